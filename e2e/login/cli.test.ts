import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { call } from '../gateway/support.ts';
import { kubectl, uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { formOf, launchChromium } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import { browserFor, oidcSection } from './support/sign-in.ts';

/**
 * `platform login` and `platform logout` as a person runs them: the command itself
 * (`bin/platform.js`, a child process with a terminal's stdin and stderr), chromium (or a scripted
 * browser) playing the person's browser, the kubeconfig it writes used by the real kubectl
 * through the gateway, and logout ending the key (kubectl is refused) and the identity provider's
 * session.
 *
 * - No browser on the command's machine (no display, no BROWSER): it prints the login URL for a
 *   browser anywhere; the page shows a code, pasted into the waiting command.
 * - A browser on its machine (BROWSER): the page hands the code to its loopback listener.
 * - A browser that cannot be started: back to the code.
 */

const PLATFORM = join(import.meta.dirname, '..', '..', 'bin', 'platform.js');
const env = useLoginEnv();
const dir = mkdtempSync(join(tmpdir(), 'platform-login-cli-'));
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** `platform <args>` in a child process, as from a terminal of a machine without a display. */
class Platform {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly exit: Promise<number>;
  stderr = '';

  constructor(args: string[], extraEnv: Record<string, string> = {}) {
    // Only what a shell on a headless server has: no DISPLAY, no BROWSER, HOME of its own.
    this.child = spawn(PLATFORM, args, {
      env: { PATH: process.env.PATH ?? '', HOME: dir, ...extraEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stderr.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
    });
    this.child.stdout.resume();
    this.exit = new Promise((resolve) => this.child.on('close', (code) => resolve(code ?? 1)));
  }

  /** The first match of `pattern` in what the command printed, once it printed it. */
  async printed(pattern: RegExp): Promise<RegExpExecArray> {
    let exited = false;
    void this.exit.then(() => {
      exited = true;
    });
    let match: RegExpExecArray | null = null;
    await eventually(
      () => {
        match = pattern.exec(this.stderr);
        if (!match && exited) throw new Error(`platform exited without printing ${pattern}:\n${this.stderr}`);
        return match !== null;
      },
      60_000,
      `platform to print ${pattern}`,
    );
    return match as unknown as RegExpExecArray;
  }

  /** Types a line into the command's terminal. */
  type(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  end(text = ''): void {
    this.child.stdin.end(text);
  }

  exited(): Promise<number> {
    return this.exit;
  }
}

const tls = () => ['--certificate-authority', env().caFile];

/** A kubeconfig path of its own. */
const kubeconfigFile = () => join(mkdtempSync(join(dir, 'kube-')), 'config');

/** kubectl with a kubeconfig, its discovery cache beside it (as a person's kubectl keeps one). */
const kubectlWith = (config: string, args: string[]) =>
  kubectl(['--cache-dir', join(dirname(config), 'cache'), ...args], { kubeconfig: config });

function contextOf(path: string) {
  const config = parseYaml(readFileSync(path, 'utf8'));
  const context = config.contexts.find((entry: { name: string }) => entry.name === config['current-context']);
  const cluster = config.clusters.find((entry: { name: string }) => entry.name === context.context.cluster);
  const user = config.users.find((entry: { name: string }) => entry.name === context.context.user);
  return { config, context, cluster: cluster.cluster, token: user.user.token as string };
}

/** Waits until the gateway refuses `key` (it read the deletion). */
async function refusedByGateway(key: string) {
  await eventually(
    async () =>
      (
        await call(`${env().gateway.api}/ownedaccesskeys`, {
          token: key,
          dispatcher: env().gateway.dispatcher,
        })
      ).status === 401,
    30_000,
    'the gateway to refuse the deleted key',
  );
}

const SIGN_IN_URL = /Open this address in a browser on any device and sign in:\n\n {2}(\S+)\n/;
const VERIFICATION = /terminal showing ([A-Z2-7]{4}-[A-Z2-7]{4})/;

describe('platform login without a browser on its machine', () => {
  it('prints a URL for a browser anywhere and takes the code its page shows; kubectl works; logout ends the key and the provider session', async () => {
    const { oidc } = env();
    const account = uniqueName('cliuser');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    const back = `${env().platformUrl}/auth/login`;
    await env().configure(`
auth:
  password: { disabled: true }
${oidcSection(env())}
    postLogoutRedirectURI: ${back}
`);
    const kubeconfig = kubeconfigFile();
    const login = new Platform(['login', env().platformUrl, ...tls(), '--kubeconfig', kubeconfig]);
    const [, printedUrl] = await login.printed(SIGN_IN_URL);
    const [, verification] = await login.printed(VERIFICATION);
    const url = new URL(printedUrl as string);
    // Nothing of this machine in the URL: no loopback address to send anything back to.
    expect(url.searchParams.get('return')).toBeNull();
    expect(url.searchParams.get('cli')).toMatch(/^[\w-]{43}$/);

    // The person, on another machine, opens it and signs in with the identity provider.
    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(url.toString());
    expect(await page.textContent('#cli-for')).toContain(verification);
    await page.click('#login-oidc');
    await page.fill('input[name="username"]', account);
    await page.click('button[type="submit"]');
    await page.waitForSelector('#cli-code');
    expect(await page.textContent('#cli-verification')).toBe(verification);
    // The page shows a code only that command opens, never the key.
    expect(await page.content()).not.toMatch(/pak_/);
    const code = (await page.textContent('#cli-code')) ?? '';
    login.type(code);
    expect(await login.exited(), login.stderr).toBe(0);
    expect(login.stderr).toContain(`Signed in as ${account}`);

    // The kubeconfig: the gateway's management API, its CA, the key; kubectl lists the user's keys.
    const written = contextOf(kubeconfig);
    expect(written.cluster.server).toBe(env().gateway.base);
    expect(Buffer.from(written.cluster['certificate-authority-data'], 'base64').toString()).toBe(env().caPem);
    const [stored] = await env().loginKeys(account);
    expect(stored?.spec.type).toBe('Login');
    await env().gateway.accepted(written.token);
    const listed = await kubectlWith(kubeconfig, ['get', 'ownedaccesskeys', '-o', 'name']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(`ownedaccesskey.management.platform/${stored?.metadata.name}`);

    // Signing out: the key goes, the context goes, and the provider's sign-out page is given.
    const before = join(dirname(kubeconfig), 'before-logout.kubeconfig');
    copyFileSync(kubeconfig, before);
    const logout = new Platform(['logout', ...tls(), '--kubeconfig', kubeconfig]);
    expect(await logout.exited(), logout.stderr).toBe(0);
    const [, endSession] = await logout.printed(
      /To sign out of your identity provider too, open:\n\n {2}(\S+)\n/,
    );
    expect(new URL(endSession as string).origin).toBe(oidc.issuer);
    expect(await env().loginKeys(account)).toEqual([]);
    expect(parseYaml(readFileSync(kubeconfig, 'utf8')).contexts).toEqual([]);
    // The same browser, which holds the provider's session, ends it and comes back.
    await page.goto(endSession as string);
    await page.click('#logout-yes');
    await page.waitForURL(back);
    // kubectl with the key of before: refused once the gateway read the deletion.
    await refusedByGateway(written.token);
    const refused = await kubectlWith(before, ['get', 'ownedaccesskeys']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('error: You must be logged in to the server (Unauthorized');
    await context.close();
  });

  it('asks again for a code that is not its own, and falls back to the code when the browser cannot start', async () => {
    await env().configure('');
    const name = await env().userWithPassword('clipaste', 'cli paste password 1');
    const kubeconfig = kubeconfigFile();
    // BROWSER names an opener that fails: the command says so and prints the URL for anywhere.
    const login = new Platform(['login', env().platformUrl, ...tls(), '--kubeconfig', kubeconfig], {
      BROWSER: 'false',
    });
    await login.printed(/The browser could not be opened/);
    const [, printedUrl] = await login.printed(SIGN_IN_URL);
    expect(new URL(printedUrl as string).searchParams.get('return')).toBeNull();
    // A scripted browser signs in with the password form (its action carries the sign-in on).
    const agent = browserFor(env());
    const loginPage = await agent.request(printedUrl as string);
    const form = formOf(
      loginPage.text.slice(loginPage.text.indexOf('<form method="post" action="/auth/password/login')),
    );
    const signedIn = await agent.request(new URL(form.action, printedUrl).toString(), {
      method: 'POST',
      form: { username: name, password: 'cli paste password 1' },
    });
    const code = /<code id="cli-code">([^<]+)<\/code>/.exec(signedIn.text)?.[1] as string;
    expect(code).toBeDefined();
    // Another terminal's code, then this one's.
    const other = new Platform(['login', env().platformUrl, ...tls(), '--no-browser']);
    await other.printed(SIGN_IN_URL);
    other.end();
    login.type(code.replace(/^.{8}/, 'AAAAAAAA'));
    await login.printed(/this code is not for this sign-in/);
    login.type(code);
    expect(await login.exited(), login.stderr).toBe(0);
    expect(await other.exited()).toBe(1);
    expect(other.stderr).toContain('no code was pasted');
    const written = contextOf(kubeconfig);
    expect((await env().use(written.token, '/ownedaccesskeys')).status).toBe(200);
  });
});

describe('platform login with a browser on its machine', () => {
  it('opens it with BROWSER; the page hands the code to the loopback listener', async () => {
    await env().configure('');
    const name = await env().userWithPassword('cliloop', 'cli loop password 1');
    const opened = join(dir, `${uniqueName('opened')}.url`);
    const opener = join(dir, `${uniqueName('browser')}.sh`);
    writeFileSync(opener, `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`);
    chmodSync(opener, 0o755);
    const kubeconfig = kubeconfigFile();
    const login = new Platform(['login', env().platformUrl, ...tls(), '--kubeconfig', kubeconfig], {
      BROWSER: opener,
    });
    await login.printed(/Opening your browser to sign in/);
    await eventually(() => existsSync(opened) && readFileSync(opened, 'utf8') !== '', 30_000, 'the browser');
    const url = new URL(readFileSync(opened, 'utf8'));
    expect(url.searchParams.get('return')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?state=/);
    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(url.toString());
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', 'cli loop password 1');
    await page.click('#password-form button');
    await page.waitForSelector('text=You can close this window');
    expect(await login.exited(), login.stderr).toBe(0);
    const written = contextOf(kubeconfig);
    expect(written.cluster.server).toBe(env().gateway.base);
    await env().gateway.accepted(written.token);
    const listed = await kubectlWith(kubeconfig, ['get', 'ownedaccesskeys', '-o', 'name']);
    expect(listed.code, listed.stderr).toBe(0);
    await context.close();
  });
});

describe('platform login --password', () => {
  it('reads the password from stdin, writes a working context; logout deletes the key', async () => {
    await env().configure('');
    const name = await env().userWithPassword('clipw', 'cli password 123');
    const kubeconfig = kubeconfigFile();
    const args = [
      'login',
      env().platformUrl,
      '--password',
      '--username',
      name,
      ...tls(),
      '--kubeconfig',
      kubeconfig,
    ];
    const wrong = new Platform(args);
    wrong.end('not the password\n');
    expect(await wrong.exited()).toBe(1);
    expect(wrong.stderr).toContain('wrong username or password');
    expect(existsSync(kubeconfig)).toBe(false);
    const login = new Platform(args);
    login.end('cli password 123\n');
    expect(await login.exited(), login.stderr).toBe(0);
    const written = contextOf(kubeconfig);
    // The context is named after the platform's host (a port after a dash), and made current.
    const { host } = new URL(env().platformUrl);
    expect(written.config['current-context']).toBe(`platform-${host.replace(':', '-')}`);
    await env().gateway.accepted(written.token);
    expect((await kubectlWith(kubeconfig, ['get', 'ownedaccesskeys', '-o', 'name'])).code).toBe(0);
    const logout = new Platform(['logout', ...tls(), '--kubeconfig', kubeconfig]);
    expect(await logout.exited(), logout.stderr).toBe(0);
    // A password sign-in has no identity provider to sign out of.
    expect(logout.stderr).not.toContain('identity provider');
    expect(await env().loginKeys(name)).toEqual([]);
    // The context, its cluster and its user are gone from the kubeconfig.
    const after = parseYaml(readFileSync(kubeconfig, 'utf8'));
    expect([after.contexts, after.clusters, after.users]).toEqual([[], [], []]);
  });
});
