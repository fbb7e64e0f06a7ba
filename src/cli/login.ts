import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { Agent, fetch as undiciFetch } from 'undici';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

/**
 * `platform login <url>` and `platform logout`, the way `gh auth login` and kubelogin work: the
 * browser signs in (or, on a machine without one, the URL is printed to open elsewhere) and hands
 * the new key to a one-shot listener on 127.0.0.1; `--password` signs in without a browser. The
 * key lands in a kubeconfig context pointing at the gateway's management API, made current.
 * `platform logout` deletes that Login key on the platform and removes the context.
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

/** A password sign-in against `<url>/auth/password/login` (JSON). */
export async function loginWithPassword(
  url: string,
  username: string,
  password: string,
  tls: TlsOptions = {},
): Promise<SignedIn> {
  const response = await undiciFetch(`${base(url)}/auth/password/login`, {
    method: 'POST',
    dispatcher: dispatcherFor(tls),
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok)
    throw new Error(typeof body.message === 'string' ? body.message : `sign-in failed (${response.status})`);
  return body as unknown as SignedIn;
}

/**
 * A browser sign-in: listens on 127.0.0.1 for the platform to POST the key back (checked against
 * a random state in the return address), shows or opens `<url>/auth/login?return=...`, waits.
 */
export async function loginWithBrowser(
  url: string,
  show: (loginUrl: string) => void | Promise<void>,
  timeoutMs = 5 * 60_000,
): Promise<SignedIn> {
  const state = randomBytes(16).toString('hex');
  let settle: { resolve: (value: SignedIn) => void; reject: (err: Error) => void } | undefined;
  const result = new Promise<SignedIn>((resolve, reject) => {
    settle = { resolve, reject };
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
      const form = new URLSearchParams(body);
      const key = form.get('key');
      if (!key) {
        res.writeHead(400).end();
        return;
      }
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(
          '<!doctype html><title>Signed in</title><p>Signed in. You can close this window and return to the terminal.</p>',
        );
      settle?.resolve({
        key,
        keyName: form.get('keyName') ?? '',
        user: form.get('user') ?? '',
        server: form.get('server') ?? `${base(url)}/kubernetes/management`,
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const returnTo = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback?state=${state}`;
  const timer = setTimeout(() => settle?.reject(new Error('no sign-in arrived in time')), timeoutMs);
  try {
    await show(`${base(url)}/auth/login?return=${encodeURIComponent(returnTo)}`);
    return await result;
  } finally {
    clearTimeout(timer);
    server.close();
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
          { name: 'platform.login', extension: { keyName: signedIn.keyName, user: signedIn.user } },
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

/** Deletes the Login key of `context` on the platform (through the management API, as its owner) and removes the context. */
export async function logout(
  path: string,
  contextName: string | undefined,
  tls: TlsOptions = {},
): Promise<string> {
  const config = readKubeconfig(path);
  const name = contextName ?? config?.['current-context'];
  const context = config?.contexts?.find((entry) => entry.name === name);
  if (!config || !context || !name) throw new Error(`no kubeconfig context ${name ?? ''} in ${path}`);
  const extension = (
    context.context.extensions as Array<{ name: string; extension: { keyName?: string } }> | undefined
  )?.find((entry) => entry.name === 'platform.login');
  const server = config.clusters?.find((entry) => entry.name === context.context.cluster)?.cluster.server;
  const token = config.users?.find((entry) => entry.name === context.context.user)?.user.token;
  if (!extension?.extension.keyName || typeof server !== 'string' || typeof token !== 'string')
    throw new Error(`context ${name} was not made by platform login`);
  const response = await undiciFetch(
    `${server}/apis/management.platform/v1/ownedaccesskeys/${encodeURIComponent(extension.extension.keyName)}`,
    { method: 'DELETE', dispatcher: dispatcherFor(tls), headers: { authorization: `Bearer ${token}` } },
  );
  // 401: the key is already gone or expired; the local context goes either way.
  if (!response.ok && response.status !== 404 && response.status !== 401)
    throw new Error(`the platform refused to delete the key (${response.status})`);
  writeKubeconfig(path, {
    ...config,
    clusters: config.clusters?.filter((entry) => entry.name !== context.context.cluster),
    users: config.users?.filter((entry) => entry.name !== context.context.user),
    contexts: config.contexts?.filter((entry) => entry.name !== name),
    'current-context': config['current-context'] === name ? '' : config['current-context'],
  });
  return name;
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

/** Opens a browser where there is a display; otherwise (or when that fails) prints the URL. */
async function showLoginUrl(url: string, openBrowser: boolean) {
  process.stderr.write(`Sign in at:\n\n  ${url}\n\n`);
  if (!openBrowser || !(process.env.DISPLAY || process.env.WAYLAND_DISPLAY)) return;
  const opener = spawn('xdg-open', [url], { stdio: 'ignore', detached: true });
  opener.on('error', () => {});
  opener.unref();
}

export function loginCommand(): Command {
  return new Command('login')
    .description('Sign in to the platform and add a kubeconfig context for its management API')
    .argument('<url>', 'the platform URL (where /auth/login is served)')
    .option('--password', 'sign in with a username and password instead of the browser')
    .option('--username <name>', 'the username for --password (asked when omitted)')
    .option('--no-browser', 'print the sign-in URL instead of opening a browser')
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
        signedIn = await loginWithBrowser(url, (loginUrl) =>
          showLoginUrl(loginUrl, options.browser !== false),
        );
      }
      const path = kubeconfigPath(options.kubeconfig as string | undefined);
      const context =
        (options.context as string | undefined) ?? `platform-${new URL(url).host.replace(/:/g, '-')}`;
      writeKubeconfig(path, withLoginContext(readKubeconfig(path), context, signedIn, tls));
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
    .action(async (options: Record<string, string | boolean | undefined>) => {
      const name = await logout(
        kubeconfigPath(options.kubeconfig as string | undefined),
        options.context as string | undefined,
        {
          caFile: options.certificateAuthority as string | undefined,
          insecure: options.insecureSkipTlsVerify === true,
        },
      );
      process.stderr.write(`Signed out: the key of context "${name}" is deleted.\n`);
    });
}
