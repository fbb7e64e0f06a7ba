import { parse as parseYaml } from 'yaml';
import { ownValue } from '../runtime/json.ts';

/**
 * How the platform reaches a cluster it manages (a virtual cluster, a connected cluster) from the
 * credentials Secret its object names: pure functions from the Secret's data to a connection, and
 * the checks that keep a tenant-written Secret from making the operator read its own files or
 * run programs.
 */

/** Why a cluster cannot be connected to; the class name is the condition reason. */
export class CredentialsMissing extends Error {
  override readonly name = 'CredentialsMissing';
}
export class InvalidCredentials extends Error {
  override readonly name = 'InvalidCredentials';
}

/**
 * A connection as plain data (what `KubeConfig.loadFromOptions` takes): one cluster, one user
 * with inline credentials only.
 */
export interface Connection {
  server: string;
  /** Base64 PEM. */
  caData?: string;
  tlsServerName?: string;
  skipTLSVerify?: boolean;
  token?: string;
  certData?: string;
  keyData?: string;
  username?: string;
  password?: string;
}

/**
 * Fields of a kubeconfig user or cluster that make the client read a local file or run a
 * program: never from a Secret a tenant may write. (`token-file` would send any file of the
 * operator's, its own service account token for one, to the tenant's server as a bearer token;
 * `exec` would run a command of the tenant's choosing.)
 */
const FORBIDDEN_USER_FIELDS = [
  'exec',
  'auth-provider',
  'token-file',
  'tokenFile',
  'client-certificate',
  'client-key',
  'as',
  'as-groups',
  'as-user-extra',
];
const FORBIDDEN_CLUSTER_FIELDS = ['certificate-authority', 'proxy-url'];

type Named = { name?: unknown; cluster?: unknown; user?: unknown; context?: unknown };

function findNamed(list: unknown, name: unknown, field: 'cluster' | 'user' | 'context') {
  if (!Array.isArray(list)) return undefined;
  const entry = (list as Named[]).find((e) => e && typeof e === 'object' && e.name === name);
  const value = entry?.[field];
  return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * The current context of a kubeconfig from a credentials Secret, reduced to inline credentials.
 * Throws {@link InvalidCredentials} (never quoting the credentials) for anything else.
 */
export function connectionFromKubeconfig(text: string): Connection {
  let doc: Record<string, unknown>;
  try {
    doc = parseYaml(text) as Record<string, unknown>;
  } catch {
    throw new InvalidCredentials('the kubeconfig is not valid YAML');
  }
  if (!doc || typeof doc !== 'object') throw new InvalidCredentials('the kubeconfig is empty');
  const current = doc['current-context'];
  const context = findNamed(doc.contexts, current, 'context');
  if (!context) throw new InvalidCredentials('the kubeconfig has no current context');
  const cluster = findNamed(doc.clusters, context.cluster, 'cluster');
  const user = findNamed(doc.users, context.user, 'user') ?? {};
  if (!cluster || !str(cluster.server)) {
    throw new InvalidCredentials("the kubeconfig's current context has no cluster server");
  }
  const forbidden = [
    ...FORBIDDEN_USER_FIELDS.filter((f) => ownValue(user, f) !== undefined).map((f) => `users[].user.${f}`),
    ...FORBIDDEN_CLUSTER_FIELDS.filter((f) => ownValue(cluster, f) !== undefined).map(
      (f) => `clusters[].cluster.${f}`,
    ),
  ];
  if (forbidden.length > 0) {
    throw new InvalidCredentials(
      `the kubeconfig may hold inline credentials only; not allowed: ${forbidden.join(', ')}`,
    );
  }
  const connection: Connection = { server: str(cluster.server)! };
  const set = <K extends keyof Connection>(key: K, value: Connection[K] | undefined) => {
    if (value !== undefined) connection[key] = value;
  };
  set('caData', str(cluster['certificate-authority-data']));
  set('tlsServerName', str(cluster['tls-server-name']));
  if (cluster['insecure-skip-tls-verify'] === true) connection.skipTLSVerify = true;
  set('token', str(user.token));
  set('certData', str(user['client-certificate-data']));
  set('keyData', str(user['client-key-data']));
  set('username', str(user.username));
  set('password', str(user.password));
  return connection;
}

/**
 * How to reach a cluster: the credentials Secret's `kubeconfig` key as it is (inline credentials
 * only), else its `token` with the object's `spec.endpoint` and `spec.caData`. `secretData` is the Secret's
 * `data` (base64 values), or null when the Secret does not exist.
 */
export function connectionFor(
  target: { readonly endpoint?: string | undefined; readonly caData?: string | undefined },
  secretName: string,
  secretData: Record<string, string> | null,
): Connection {
  if (secretData === null) throw new CredentialsMissing(`Secret ${secretName} does not exist`);
  const decode = (key: string) => {
    const value = secretData[key];
    return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
  };
  const kubeconfig = decode('kubeconfig');
  if (kubeconfig !== undefined && kubeconfig.trim() !== '') return connectionFromKubeconfig(kubeconfig);
  const token = decode('token')?.trim();
  if (token === undefined || token === '') {
    throw new CredentialsMissing(`Secret ${secretName} has neither a kubeconfig nor a token key`);
  }
  if (!target.endpoint) throw new CredentialsMissing('spec.endpoint is required with a token');
  return { server: target.endpoint, token, ...(target.caData ? { caData: target.caData } : {}) };
}

/** `KubeConfig.loadFromOptions` input for a connection. */
export function kubeConfigOptions(connection: Connection) {
  const { server, caData, tlsServerName, skipTLSVerify, ...user } = connection;
  return {
    clusters: [{ name: 'virtual', server, caData, tlsServerName, skipTLSVerify: skipTLSVerify ?? false }],
    users: [{ name: 'platform', ...user }],
    contexts: [{ name: 'virtual', cluster: 'virtual', user: 'platform' }],
    currentContext: 'virtual',
  };
}
