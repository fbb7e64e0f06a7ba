import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { Command } from 'commander';
import { compactDecrypt, exportJWK, generateKeyPair } from 'jose';
import { Agent, fetch as undiciFetch } from 'undici';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { CLI_HANDOFF_ALGORITHMS, verificationCode } from '../login/cli-handoff.ts';
import { ownValue, setOwnValue } from '../runtime/json.ts';

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
 */

export interface SignedIn {
  readonly key: string;
  readonly keyName: string;
  readonly user: string;
  /** The management API URL for the kubeconfig. */
  readonly server: string;
}

export interface TlsOptions {
  readonly caFile?: string | undefined;
  readonly insecure?: boolean | undefined;
}

const dispatcherFor = (tls: TlsOptions) =>
  new Agent({
    connect: {
      ...(tls.caFile ? { ca: readFileSync(tls.caFile, 'utf8') } : {}),
      ...(tls.insecure ? { rejectUnauthorized: false } : {}),
    },
  });

const base = (url: string) => url.replace(/\/+$/, '');

/** Where the device tokens of password sign-ins are kept. */
export function deviceTokensPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'platform', 'device-tokens.json');
}

/** Device tokens by platform origin, then username. */
type DeviceTokens = Record<string, Record<string, string>>;

function readDeviceTokens(path: string): DeviceTokens {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as DeviceTokens) : {};
  } catch {
    return {};
  }
}

/** The device token kept for `username` at the platform `url`, if any. */
export function deviceTokenFor(path: string, url: string, username: string): string | undefined {
  // The username is data: `constructor` or `__proto__` finds a token only when one was kept for it.
  const forOrigin = ownValue(readDeviceTokens(path), new URL(url).origin);
  const token = forOrigin === undefined ? undefined : ownValue(forOrigin, username);
  return typeof token === 'string' ? token : undefined;
}

/**
 * Keeps `token` for `username` at the platform `url`: written beside the file and renamed over
 * it, readable by the owner only (0600, its directory 0700), other entries kept.
 */
export function keepDeviceToken(path: string, url: string, username: string, token: string): void {
  const tokens = readDeviceTokens(path);
  const origin = new URL(url).origin;
  setOwnValue(tokens, origin, { ...ownValue(tokens, origin), [username]: token });
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(tokens, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
}

/**
 * A password sign-in against `<url>/auth/password/login` (JSON), sending the device token kept
 * at `deviceTokens` for this user there and keeping the one the platform answers with.
 */
export async function loginWithPassword(
  url: string,
  username: string,
  password: string,
  tls: TlsOptions = {},
  deviceTokens: string = deviceTokensPath(),
): Promise<SignedIn> {
  const deviceToken = deviceTokenFor(deviceTokens, url, username);
  const response = await undiciFetch(`${base(url)}/auth/password/login`, {
    method: 'POST',
    dispatcher: dispatcherFor(tls),
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ username, password, ...(deviceToken ? { deviceToken } : {}) }),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok)
    throw new Error(typeof body.message === 'string' ? body.message : `sign-in failed (${response.status})`);
  if (typeof body.deviceToken === 'string' && body.deviceToken !== '')
    keepDeviceToken(deviceTokens, url, username, body.deviceToken);
  const { deviceToken: _kept, ...signedIn } = body;
  return signedIn as unknown as SignedIn;
}

/** The key pair of one browser sign-in: the public half goes with the login URL. */
export interface SignInKeys {
  /** X25519, base64url: the `cli` parameter. */
  readonly publicKey: string;
  readonly privateKey: CryptoKey;
  /** What the page shows for this sign-in, and the terminal too. */
  readonly verification: string;
  /**
   * The origin of the platform signed in to. Anyone who saw the login URL can seal a code to its
   * public key (ECDH-ES proves nothing about the sender), so a code naming any other server is
   * refused: the kubeconfig never points a key at a server the person did not choose.
   */
  readonly origin: string;
}

export async function signInKeys(platformUrl: string): Promise<SignInKeys> {
  const { publicKey, privateKey } = await generateKeyPair(CLI_HANDOFF_ALGORITHMS.alg, { crv: 'X25519' });
  const { x } = await exportJWK(publicKey);
  if (!x) throw new Error('no X25519 key');
  return { publicKey: x, privateKey, verification: verificationCode(x), origin: new URL(platformUrl).origin };
}

/** A code that is not this sign-in's (another terminal's, mistyped, cut short). */
export class CodeRefused extends Error {
  override readonly name = 'CodeRefused';
}

/** What a code the platform sealed for this sign-in holds. */
export async function openCode(code: string, keys: SignInKeys): Promise<SignedIn> {
  let fields: Record<string, unknown>;
  try {
    const { plaintext } = await compactDecrypt(code.replace(/\s+/g, ''), keys.privateKey, {
      keyManagementAlgorithms: [CLI_HANDOFF_ALGORITHMS.alg],
      contentEncryptionAlgorithms: [CLI_HANDOFF_ALGORITHMS.enc],
    });
    fields = JSON.parse(new TextDecoder().decode(plaintext));
  } catch {
    throw new CodeRefused(
      `this code is not for this sign-in: paste the whole code of the page that names ${keys.verification}`,
    );
  }
  const { key, keyName, user, server } = fields;
  if (typeof key !== 'string' || typeof server !== 'string')
    throw new CodeRefused('the code holds no key; sign in again');
  if (originOf(server) !== keys.origin)
    throw new CodeRefused(`the code names another server than ${keys.origin}; it is not from your sign-in`);
  return {
    key,
    keyName: typeof keyName === 'string' ? keyName : '',
    user: typeof user === 'string' ? user : '',
    server,
  };
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** The login page for this sign-in: its key, and the loopback listener when the browser is local. */
export function signInUrl(url: string, keys: SignInKeys, returnTo?: string): string {
  const query = new URLSearchParams({ cli: keys.publicKey });
  if (returnTo) query.set('return', returnTo);
  return `${base(url)}/auth/login?${query}`;
}

/**
 * A one-shot listener on 127.0.0.1 for the platform's page to POST the sealed code to (checked
 * against a random state in the return address; a code that does not open is refused and the
 * listener waits on).
 */
export async function loopbackListener(keys: SignInKeys): Promise<{
  readonly returnTo: string;
  readonly result: Promise<SignedIn>;
  close(): void;
}> {
  const state = randomBytes(16).toString('hex');
  let resolve: (value: SignedIn) => void = () => {};
  const result = new Promise<SignedIn>((done) => {
    resolve = done;
  });
  const server = createServer((req, res) => {
    const target = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (
      req.method !== 'POST' ||
      target.pathname !== '/callback' ||
      target.searchParams.get('state') !== state
    ) {
      res.writeHead(404).end();
      return;
    }
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      openCode(new URLSearchParams(body).get('code') ?? '', keys).then(
        (signedIn) => {
          res
            .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
            .end(
              '<!doctype html><title>Signed in</title><p>Signed in. You can close this window and return to the terminal.</p>',
            );
          resolve(signedIn);
        },
        (err: Error) => {
          res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end(err.message);
        },
      );
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    returnTo: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback?state=${state}`,
    result,
    close: () => {
      server.close();
      server.closeAllConnections();
    },
  };
}

/** How to open a URL in the person's browser on this machine. */
export interface BrowserOpener {
  readonly command: string;
  readonly args: readonly string[];
  /** Windows: the arguments are already quoted for cmd.exe. */
  readonly windowsVerbatimArguments?: boolean;
}

/** cmd.exe's special characters, escaped for `start` (as `gh` does); `%` is left to the URL. */
const forCmd = (text: string) => text.replace(/[\^&|<>()]/g, '^$&');

/**
 * The command that opens `url` in a browser on this machine, or undefined when there is none that
 * would show it to the person at this terminal: `BROWSER` (a command, `%s` for the URL, else the
 * URL last), macOS `open` and Windows `start` unless the terminal is a remote shell (SSH), else
 * `xdg-open` where there is a display.
 */
export function browserOpener(
  url: string,
  platform: NodeJS.Platform = process.platform,
  env: NodeJS.ProcessEnv = process.env,
): BrowserOpener | undefined {
  const custom = (platform === 'win32' ? env.BROWSER : env.BROWSER?.split(':')[0])?.trim();
  if (custom) {
    const [command = '', ...args] = custom.split(/\s+/);
    const placeholder = args.some((arg) => arg.includes('%s'));
    return { command, args: placeholder ? args.map((arg) => arg.replaceAll('%s', url)) : [...args, url] };
  }
  const remote = Boolean(env.SSH_CONNECTION || env.SSH_TTY || env.SSH_CLIENT);
  switch (platform) {
    case 'darwin':
      return remote ? undefined : { command: 'open', args: [url] };
    case 'win32':
      return remote
        ? undefined
        : {
            command: env.ComSpec ?? 'cmd.exe',
            args: ['/d', '/c', 'start', '""', forCmd(url)],
            windowsVerbatimArguments: true,
          };
    default:
      return env.DISPLAY || env.WAYLAND_DISPLAY ? { command: 'xdg-open', args: [url] } : undefined;
  }
}

/**
 * Starts the opener; the promise settles only when it fails (it could not be started, or it exited
 * with an error, as `xdg-open` does when nothing can open URLs). Openers that stay with the
 * browser they started are not waited for.
 */
export function browserFailure(opener: BrowserOpener): Promise<void> {
  return new Promise((failed) => {
    const child = spawn(opener.command, [...opener.args], {
      stdio: 'ignore',
      detached: true,
      windowsVerbatimArguments: opener.windowsVerbatimArguments === true,
    });
    child.on('error', () => failed());
    child.on('exit', (code) => {
      if (code !== 0) failed();
    });
    child.unref();
  });
}

export interface BrowserSignInOptions {
  /** Try a browser on this machine (`--no-browser`: false). */
  readonly openBrowser: boolean;
  /** Where the person types (the terminal). */
  readonly input: Readable;
  /** Where the command talks to the person. */
  readonly output: Writable;
  readonly platform?: NodeJS.Platform;
  readonly env?: NodeJS.ProcessEnv;
  /** How long a browser on this machine has to hand the code back. Default 5 minutes. */
  readonly loopbackTimeoutMs?: number;
}

/** Asks for the code until one opens (empty lines are asked again; three codes that do not open end it). */
async function pastedCode(keys: SignInKeys, lines: Interface, output: Writable): Promise<SignedIn> {
  const ended = new Promise<undefined>((resolve) => lines.once('close', () => resolve(undefined)));
  let refused = 0;
  while (refused < 3) {
    const line = await Promise.race([
      new Promise<string>((resolve) => lines.question('Code: ', resolve)),
      ended,
    ]);
    if (line === undefined) throw new Error('no code was pasted: the input ended');
    if (line.trim() === '') continue;
    try {
      return await openCode(line, keys);
    } catch (err) {
      if (!(err instanceof CodeRefused)) throw err;
      output.write(`${err.message}\n`);
      refused++;
    }
  }
  throw new Error('no code of this sign-in was pasted');
}

/**
 * A browser sign-in. With a browser on this machine, it opens the login page and waits for the
 * page to hand the code to the loopback listener; without one (or when it fails to start), it
 * prints the login page's address for a browser anywhere and reads the code the page shows.
 */
export async function loginWithBrowser(url: string, options: BrowserSignInOptions): Promise<SignedIn> {
  const keys = await signInKeys(url);
  const { output } = options;
  const say = (text: string) => output.write(text);
  if (options.openBrowser && browserOpener(url, options.platform, options.env) !== undefined) {
    const listener = await loopbackListener(keys);
    const local = signInUrl(url, keys, listener.returnTo);
    const opener = browserOpener(local, options.platform, options.env) as BrowserOpener;
    say(
      `Opening your browser to sign in (this terminal shows ${keys.verification}):\n\n  ${local}\n\n` +
        'Signing in on another device? Press Ctrl-C and run platform login with --no-browser.\n',
    );
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), options.loopbackTimeoutMs ?? 5 * 60_000);
    });
    try {
      const first = await Promise.race([
        listener.result,
        browserFailure(opener).then(() => 'failed' as const),
        timedOut,
      ]);
      if (first === 'timeout') throw new Error('no sign-in arrived from the browser in time');
      if (first !== 'failed') return first;
      say('The browser could not be opened.\n');
    } finally {
      clearTimeout(timer);
      listener.close();
    }
  }
  say(
    `Open this address in a browser on any device and sign in:\n\n  ${signInUrl(url, keys)}\n\n` +
      `The page then shows a code for the terminal showing ${keys.verification}; paste it here.\n`,
  );
  const lines = createInterface({
    input: options.input,
    output,
    terminal: (options.input as { isTTY?: boolean }).isTTY === true,
  });
  try {
    return await pastedCode(keys, lines, output);
  } finally {
    lines.close();
  }
}

interface Kubeconfig {
  apiVersion?: string;
  kind?: string;
  clusters?: Array<{ name: string; cluster: Record<string, unknown> }>;
  users?: Array<{ name: string; user: Record<string, unknown> }>;
  contexts?: Array<{ name: string; context: Record<string, unknown> }>;
  'current-context'?: string;
  [key: string]: unknown;
}

const upsert = <T extends { name: string }>(list: T[] | undefined, entry: T): T[] => [
  ...(list ?? []).filter((item) => item.name !== entry.name),
  entry,
];

/** The kubeconfig with a context `name` for this sign-in, made current; other entries kept. */
export function withLoginContext(
  existing: Kubeconfig | undefined,
  name: string,
  signedIn: SignedIn,
  tls: TlsOptions,
  /** The platform URL signed in at (where `platform logout` finds `/auth/logout`). */
  platformUrl?: string,
): Kubeconfig {
  const config: Kubeconfig = existing ?? {};
  const cluster: Record<string, unknown> = { server: signedIn.server };
  if (tls.caFile)
    cluster['certificate-authority-data'] = Buffer.from(readFileSync(tls.caFile)).toString('base64');
  if (tls.insecure) cluster['insecure-skip-tls-verify'] = true;
  return {
    ...config,
    apiVersion: 'v1',
    kind: 'Config',
    clusters: upsert(config.clusters, { name, cluster }),
    users: upsert(config.users, { name, user: { token: signedIn.key } }),
    contexts: upsert(config.contexts, {
      name,
      context: {
        cluster: name,
        user: name,
        extensions: [
          {
            name: 'platform.login',
            extension: {
              keyName: signedIn.keyName,
              user: signedIn.user,
              ...(platformUrl ? { url: base(platformUrl) } : {}),
            },
          },
        ],
      },
    }),
    'current-context': name,
  };
}

export function kubeconfigPath(explicit?: string): string {
  return explicit ?? process.env.KUBECONFIG?.split(':')[0] ?? join(homedir(), '.kube', 'config');
}

const readKubeconfig = (path: string): Kubeconfig | undefined =>
  existsSync(path) ? ((parseYaml(readFileSync(path, 'utf8')) as Kubeconfig | null) ?? undefined) : undefined;

function writeKubeconfig(path: string, config: Kubeconfig) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, stringifyYaml(config), { mode: 0o600 });
}

export interface SignedOut {
  /** The context removed. */
  readonly context: string;
  /**
   * Where the platform sends the person next: the identity provider's sign-out page (its
   * end-session endpoint) for a sign-in through OIDC, else the platform's login page.
   */
  readonly redirect?: string | undefined;
  /** The platform URL (to tell its own pages from the identity provider's). */
  readonly platformUrl: string;
}

/**
 * Signs out of `context`: deletes its Login key on the platform (`POST /auth/logout` with the
 * key) and removes the context, its cluster and its user from the kubeconfig.
 */
export async function logout(
  path: string,
  contextName: string | undefined,
  tls: TlsOptions = {},
): Promise<SignedOut> {
  const config = readKubeconfig(path);
  const name = contextName ?? config?.['current-context'];
  const context = config?.contexts?.find((entry) => entry.name === name);
  if (!config || !context || !name) throw new Error(`no kubeconfig context ${name ?? ''} in ${path}`);
  const extension = (
    context.context.extensions as
      | Array<{ name: string; extension: { keyName?: string; url?: string } }>
      | undefined
  )?.find((entry) => entry.name === 'platform.login');
  const server = config.clusters?.find((entry) => entry.name === context.context.cluster)?.cluster.server;
  const token = config.users?.find((entry) => entry.name === context.context.user)?.user.token;
  if (!extension?.extension.keyName || typeof server !== 'string' || typeof token !== 'string')
    throw new Error(`context ${name} was not made by platform login`);
  const platformUrl = base(extension.extension.url ?? server.replace(/\/kubernetes\/management\/*$/, ''));
  const response = await undiciFetch(`${platformUrl}/auth/logout`, {
    method: 'POST',
    dispatcher: dispatcherFor(tls),
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
  const body = (await response.json().catch(() => ({}))) as { redirect?: unknown };
  // 401: the key is already gone or expired; the local context goes either way.
  if (!response.ok && response.status !== 401)
    throw new Error(`the platform refused to sign out (${response.status})`);
  writeKubeconfig(path, {
    ...config,
    clusters: config.clusters?.filter((entry) => entry.name !== context.context.cluster),
    users: config.users?.filter((entry) => entry.name !== context.context.user),
    contexts: config.contexts?.filter((entry) => entry.name !== name),
    'current-context': config['current-context'] === name ? '' : config['current-context'],
  });
  return {
    context: name,
    platformUrl,
    ...(response.ok && typeof body.redirect === 'string' ? { redirect: body.redirect } : {}),
  };
}

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
