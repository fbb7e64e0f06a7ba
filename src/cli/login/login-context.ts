import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fetch as undiciFetch } from 'undici';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { dispatcherFor, platformBase, type SignedIn, type TlsOptions } from './signed-in.ts';

/**
 * The kubeconfig side of `platform login` and `platform logout`: the context a sign-in adds
 * (made current, marked with a `platform.login` extension), and its removal on sign-out.
 */

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
              ...(platformUrl ? { url: platformBase(platformUrl) } : {}),
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

export const readKubeconfig = (path: string): Kubeconfig | undefined =>
  existsSync(path) ? ((parseYaml(readFileSync(path, 'utf8')) as Kubeconfig | null) ?? undefined) : undefined;

export function writeKubeconfig(path: string, config: Kubeconfig) {
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
  const platformUrl = platformBase(
    extension.extension.url ?? server.replace(/\/kubernetes\/management\/*$/, ''),
  );
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
