import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { browserFailure, browserOpener } from './login/browser-opener.ts';
import { loginWithBrowser } from './login/browser-sign-in.ts';
import {
  kubeconfigPath,
  logout,
  readKubeconfig,
  withLoginContext,
  writeKubeconfig,
} from './login/login-context.ts';
import { loginWithPassword } from './login/password.ts';
import type { SignedIn, TlsOptions } from './login/signed-in.ts';

/**
 * `platform login <url>` and `platform logout`, the way `gh auth login` and kubelogin work, for a
 * person at a terminal wherever their browser is:
 *
 * - a browser that opens on this machine (`BROWSER`, macOS `open`, Windows `start`, `xdg-open`
 *   with a display) signs in and hands the new key back to a one-shot listener on 127.0.0.1;
 * - without one (a server reached over SSH, `--no-browser`, or the browser would not start) the
 *   command prints the URL to open in a browser anywhere, and the page shows a code to paste
 *   into the waiting command;
 * - `--password` signs in without a browser, and keeps the device token the platform hands out
 *   (in `$XDG_CONFIG_HOME/platform/device-tokens.json`, `~/.config/...` by default, mode 0600)
 *   to send with the next password sign-in of that user there: others' failed guesses, which
 *   block the user for unknown devices, do not lock this terminal out (docs/login.md).
 *
 * Either way the key travels sealed to a key pair the command made for this sign-in only
 * (`src/login/cli-handoff.ts`): the page and the loopback see only a code no one else can open.
 * The key lands in a kubeconfig context pointing at the gateway's management API, made current.
 * `platform logout` deletes that Login key on the platform (`/auth/logout`), removes the context,
 * and sends the person to the identity provider's sign-out page when the platform says so.
 *
 * The pieces live in `login/`: signed-in.ts (what a sign-in ends with), password.ts,
 * browser-sign-in.ts with browser-opener.ts, login-context.ts (the kubeconfig context and logout).
 */

function ask(question: string, hidden: boolean): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  if (hidden) {
    const write = (rl as unknown as { _writeToOutput: (text: string) => void })._writeToOutput;
    (rl as unknown as { _writeToOutput: (text: string) => void })._writeToOutput = (text: string) => {
      if (text.startsWith(question)) write.call(rl, text);
    };
  }
  return new Promise((resolve) =>
    rl.question(question, (answer) => {
      rl.close();
      if (hidden) process.stderr.write('\n');
      resolve(answer);
    }),
  );
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += (chunk as Buffer).toString('utf8');
  return text.replace(/\r?\n$/, '');
}

export function loginCommand(): Command {
  return new Command('login')
    .description('Sign in to the platform and add a kubeconfig context for its management API')
    .argument('<url>', 'the platform URL (where /auth/login is served)')
    .option('--password', 'sign in with a username and password instead of the browser')
    .option('--username <name>', 'the username for --password (asked when omitted)')
    .option(
      '--no-browser',
      'do not open a browser here: print the sign-in URL for a browser anywhere, then read the code its page shows',
    )
    .option('--kubeconfig <path>', 'kubeconfig to write (default $KUBECONFIG or ~/.kube/config)')
    .option('--context <name>', 'context name (default platform-<host>)')
    .option('--certificate-authority <file>', 'CA of the platform certificate')
    .option('--insecure-skip-tls-verify', 'do not verify the platform certificate')
    .action(async (url: string, options: Record<string, string | boolean | undefined>) => {
      const tls: TlsOptions = {
        caFile: options.certificateAuthority as string | undefined,
        insecure: options.insecureSkipTlsVerify === true,
      };
      let signedIn: SignedIn;
      if (options.password) {
        const username = (options.username as string | undefined) ?? (await ask('Username: ', false));
        const password = process.stdin.isTTY ? await ask('Password: ', true) : await readStdin();
        signedIn = await loginWithPassword(url, username, password, tls);
      } else {
        signedIn = await loginWithBrowser(url, {
          openBrowser: options.browser !== false,
          input: process.stdin,
          output: process.stderr,
        });
      }
      const path = kubeconfigPath(options.kubeconfig as string | undefined);
      const context =
        (options.context as string | undefined) ?? `platform-${new URL(url).host.replace(/:/g, '-')}`;
      writeKubeconfig(path, withLoginContext(readKubeconfig(path), context, signedIn, tls, url));
      process.stderr.write(
        `Signed in as ${signedIn.user}; kubeconfig context "${context}" in ${path} is current.\n`,
      );
    });
}

export function logoutCommand(): Command {
  return new Command('logout')
    .description('Delete the Login key of a platform login context and remove the context')
    .option('--kubeconfig <path>', 'kubeconfig (default $KUBECONFIG or ~/.kube/config)')
    .option('--context <name>', 'context (default the current one)')
    .option('--certificate-authority <file>', 'CA of the platform certificate')
    .option('--insecure-skip-tls-verify', 'do not verify the platform certificate')
    .option('--no-browser', "print the identity provider's sign-out address instead of opening it")
    .action(async (options: Record<string, string | boolean | undefined>) => {
      const out = await logout(
        kubeconfigPath(options.kubeconfig as string | undefined),
        options.context as string | undefined,
        {
          caFile: options.certificateAuthority as string | undefined,
          insecure: options.insecureSkipTlsVerify === true,
        },
      );
      process.stderr.write(`Signed out: the key of context "${out.context}" is deleted.\n`);
      // The identity provider's own session ends in the browser that holds it.
      if (!out.redirect || new URL(out.redirect).origin === new URL(out.platformUrl).origin) return;
      process.stderr.write(`To sign out of your identity provider too, open:\n\n  ${out.redirect}\n\n`);
      const opener = options.browser === false ? undefined : browserOpener(out.redirect);
      if (opener) void browserFailure(opener);
    });
}
