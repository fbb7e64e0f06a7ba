import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Secret } from '@kubernetes/client-node';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import { PLATFORM_CONFIG_SECRET } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import { GROUP_VERSION } from '../api/meta.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources } from '../api/resources.ts';
import { PlatformConfigReader } from '../config/platform-config.ts';
import { type AuthenticationContext, authenticateAccessKey } from '../identity/authenticate.ts';
import { type AccessKeyAuthenticator, BY_KEY_ID } from '../identity/authenticator.ts';
import { GROUP_ADMINS } from '../identity/groups.ts';
import {
  type GeneratedAccessKey,
  generateAccessKey,
  hashAccessKey,
  MalformedAccessKey,
  parseAccessKey,
  type RandomBytes,
} from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { isAlreadyExists, isApiError, isNotFound } from '../runtime/errors.ts';
import { asFieldManager, fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, type ObjectList, objectPath } from '../runtime/kube-client.ts';

/**
 * The bootstrap platform admin of `platform dev`: a User `admin` holding the cluster role
 * `platform-admin`, one access key of its own, and `admin.kubeconfig` pointing kubectl at the
 * management gateway with that key. Platform admins (group `platform:admins`) are bound to
 * `cluster-admin`, as an installation does, so RBAC lets the admin do everything.
 *
 * The key's plaintext exists in exactly one place: admin.kubeconfig (mode 0600). The cluster
 * holds only its keyed hash (made here with the platform pepper, as admission would), and no
 * message ever shows the key. A restart keeps the key (and the file byte for byte) while the key
 * still authenticates as a platform admin by the gateway's own rules; otherwise it mints a new
 * one and rewrites the file.
 */

export const ADMIN_USER_NAME = 'admin';
/** The ClusterRoleBinding that makes platform admins cluster admins. */
export const PLATFORM_ADMINS_BINDING_NAME = 'platform-admins';
export const ADMIN_KUBECONFIG_CONTEXT = 'platform-dev';

const BOOTSTRAP_LABELS = {
  'app.kubernetes.io/part-of': 'platform',
  'app.kubernetes.io/component': 'dev-bootstrap',
} as const;

/** The bootstrap admin User as created on the first run. */
export function adminUserObject() {
  return {
    apiVersion: GROUP_VERSION,
    kind: 'User',
    metadata: { name: ADMIN_USER_NAME, labels: { ...BOOTSTRAP_LABELS } },
    spec: {
      username: ADMIN_USER_NAME,
      displayName: 'Platform admin (platform dev)',
      clusterRoles: [{ name: PLATFORM_ADMIN_CLUSTER_ROLE }],
    },
  };
}

/**
 * The merge patch that makes an existing User `admin` a working platform admin again (the
 * `platform-admin` role back, `disabled` off), with what it fixes; undefined when nothing is
 * wrong. Pure. Other roles and fields someone gave the user are kept.
 */
export function adminUserRepair(
  user: Pick<User, 'spec'> & { metadata?: { resourceVersion?: string | undefined } },
): { patch: Record<string, unknown>; fixes: string[] } | undefined {
  const roles = user.spec?.clusterRoles ?? [];
  const fixes: string[] = [];
  const spec: Record<string, unknown> = {};
  if (!roles.some((role) => role.name === PLATFORM_ADMIN_CLUSTER_ROLE)) {
    spec.clusterRoles = [...roles, { name: PLATFORM_ADMIN_CLUSTER_ROLE }];
    fixes.push(`gave it the cluster role ${PLATFORM_ADMIN_CLUSTER_ROLE}`);
  }
  if (user.spec?.disabled === true) {
    spec.disabled = null;
    fixes.push('enabled it');
  }
  if (fixes.length === 0) return undefined;
  // The resourceVersion makes the patch fail (409) rather than overwrite a concurrent change.
  const resourceVersion = user.metadata?.resourceVersion;
  return { patch: { ...(resourceVersion ? { metadata: { resourceVersion } } : {}), spec }, fixes };
}

/** Platform admins (`platform:admins`, see the gateway's authentication) get `cluster-admin`. */
export function platformAdminsBinding() {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: PLATFORM_ADMINS_BINDING_NAME, labels: { ...BOOTSTRAP_LABELS } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: GROUP_ADMINS }],
  };
}

/** Object name of a bootstrap key: the key's public id makes it unique and findable. */
export const bootstrapKeyName = (keyId: string) => `dev-admin-${keyId}`;

/**
 * The stored form of a freshly generated admin key: its keyed hash and public id, never the key.
 * Pure given the pepper.
 *
 * Type `User`: it is the admin user's own key, which the admin (or any platform admin) may list,
 * disable or delete through the gateway like any key they made themselves. No `ttl`: it has to
 * outlive every restart of a local development platform, it exists only in a mode-0600 file
 * under the state directory of a platform that listens on 127.0.0.1 only, and `--reset` (or
 * disabling/deleting it) ends it; a global `auth.accessKeyMaxTTLSeconds` still bounds it, and
 * then the next start mints a new one.
 */
export function bootstrapKeyObject(generated: GeneratedAccessKey, pepper: Uint8Array) {
  return {
    apiVersion: GROUP_VERSION,
    kind: 'OwnedAccessKey',
    metadata: { name: bootstrapKeyName(generated.id), labels: { ...BOOTSTRAP_LABELS } },
    spec: {
      displayName: 'platform dev admin',
      description:
        'Bootstrap key of `platform dev`; its only copy is the admin.kubeconfig in the state directory.',
      user: ADMIN_USER_NAME,
      type: 'User' as const,
      keyHash: hashAccessKey(generated.key, pepper),
      keyId: generated.id,
    },
  };
}

export interface AdminKubeconfigInput {
  /** `https://127.0.0.1:<port>/kubernetes/management` */
  readonly server: string;
  /** The CA of the gateway's serving certificate (PEM). */
  readonly caPem: string;
  /** The admin's access key. */
  readonly accessKey: string;
}

/** The admin.kubeconfig document; deterministic, so equal inputs give an equal file. Pure. */
export function adminKubeconfig({ server, caPem, accessKey }: AdminKubeconfigInput): string {
  const name = ADMIN_KUBECONFIG_CONTEXT;
  const user = `${name}-${ADMIN_USER_NAME}`;
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } },
    ],
    users: [{ name: user, user: { token: accessKey } }],
    contexts: [{ name, context: { cluster: name, user } }],
    'current-context': name,
  });
}

const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;

const namedEntry = (list: unknown, name: unknown) =>
  Array.isArray(list) ? list.map(asRecord).find((entry) => entry?.name === name) : undefined;

/**
 * The bearer token of a kubeconfig's current context, or undefined when the text is not a
 * kubeconfig with one. Never throws (the file may be damaged or hand-edited). Pure.
 */
export function tokenOfKubeconfig(text: string): string | undefined {
  let document: Record<string, unknown> | undefined;
  try {
    document = asRecord(parseYaml(text));
  } catch {
    return undefined;
  }
  if (!document) return undefined;
  const context = asRecord(namedEntry(document.contexts, document['current-context'])?.context);
  const user = asRecord(namedEntry(document.users, context?.user)?.user);
  return typeof user?.token === 'string' && user.token !== '' ? user.token : undefined;
}

export type StoredKeyVerdict = { readonly keep: true } | { readonly keep: false; readonly reason: string };

/**
 * Whether the key stored in admin.kubeconfig can be kept: exactly when the gateway would accept
 * it now (the same {@link authenticateAccessKey} decision: well-formed, its OwnedAccessKey exists
 * and matches, not disabled or being deleted, not expired, its user exists and is enabled) and
 * it acts as a platform admin. The reason names no secret. Pure.
 */
export function storedKeyVerdict(
  accessKey: string | undefined,
  context: AuthenticationContext,
): StoredKeyVerdict {
  if (accessKey === undefined) return { keep: false, reason: 'no admin key is stored yet' };
  const result = authenticateAccessKey(accessKey, context);
  if (!result.ok) return { keep: false, reason: `the stored one is refused: ${result.failure.message}` };
  if (!result.identity.groups.includes(GROUP_ADMINS))
    return { keep: false, reason: 'the stored one does not act as a platform admin' };
  return { keep: true };
}

/**
 * Runs `action`, retrying while the apiserver cannot answer yet: 5xx (for example our admission
 * webhooks are still being registered after a restart), 429 and connection errors. A definite
 * answer (4xx) is thrown at once.
 */
export async function retryWhileUnavailable<T>(
  what: string,
  action: () => Promise<T>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await action();
    } catch (err) {
      const definite = isApiError(err) && err.code >= 400 && err.code < 500 && err.code !== 429;
      if (definite || Date.now() > deadline) {
        throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
      await sleep(500);
    }
  }
}

async function getOrUndefined<T>(api: KubeApi, path: string): Promise<T | undefined> {
  try {
    return await api.request<T>({ method: 'GET', path });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Creates `body` at `collection` unless an object of its name exists; says whether it created it. */
async function createIfAbsent(api: KubeApi, collection: string, body: unknown): Promise<boolean> {
  try {
    await api.request({ method: 'POST', path: collection, body });
    return true;
  } catch (err) {
    if (isAlreadyExists(err)) return false;
    throw err;
  }
}

/**
 * What {@link storedKeyVerdict} needs, read from the apiserver: the key object with the stored
 * key's id, its user or team (and the user's teams), and the lifetime limits of the platform
 * configuration.
 */
async function authenticationContextFromApi(
  api: KubeApi,
  platformNamespace: string,
  accessKey: string,
  pepper: Uint8Array,
  now: () => Date,
): Promise<AuthenticationContext> {
  const parsed = parseAccessKey(accessKey);
  const keys =
    parsed instanceof MalformedAccessKey
      ? []
      : (
          await api.request<ObjectList<OwnedAccessKey>>({
            method: 'GET',
            path: collectionPath(resources.ownedAccessKeys),
            query: { fieldSelector: `spec.keyId=${parsed.id}` },
          })
        ).items;
  const users = new Map<string, User>();
  const teams = new Map<string, Team>();
  const readTeam = async (name: string) => {
    const team = await getOrUndefined<Team>(api, objectPath(resources.teams, undefined, name));
    if (team) teams.set(name, team);
  };
  for (const key of keys) {
    if (key.spec.user) {
      const user = await getOrUndefined<User>(api, objectPath(resources.users, undefined, key.spec.user));
      if (user) users.set(key.spec.user, user);
      for (const team of user?.status?.teams ?? []) await readTeam(team);
    }
    if (key.spec.team) await readTeam(key.spec.team);
  }
  const configSecret = await getOrUndefined<V1Secret>(
    api,
    objectPath(resources.secrets, platformNamespace, PLATFORM_CONFIG_SECRET),
  );
  return {
    lookupKey: (id) => keys.filter((key) => key.spec.keyId === id),
    lookupUser: (name) => users.get(name),
    lookupTeam: (name) => teams.get(name),
    pepper,
    now,
    limits: new PlatformConfigReader().of(configSecret).auth,
  };
}

/** Writes `content` to `path` (mode 0600) through a rename, unless the file already holds exactly it. */
function writeSecretFileIfChanged(path: string, content: string): boolean {
  if (existsSync(path) && readFileSync(path, 'utf8') === content) {
    chmodSync(path, 0o600);
    return false;
  }
  const temporary = `${path}.tmp`;
  writeFileSync(temporary, content, { mode: 0o600 });
  chmodSync(temporary, 0o600); // `mode` only applies when the file is created
  renameSync(temporary, path);
  return true;
}

export interface BootstrapAdminOptions {
  /** As cluster admin of the host cluster. */
  readonly api: KubeApi;
  readonly platformNamespace: string;
  /** The gateway's base URL, `https://127.0.0.1:<port>/kubernetes/management`. */
  readonly gatewayServer: string;
  readonly gatewayCaPem: string;
  readonly kubeconfigPath: string;
  readonly random?: RandomBytes;
  readonly now?: () => Date;
  /** Progress messages (never given a key). */
  readonly log: (message: string) => void;
}

export interface BootstrapAdminResult {
  /** The admin's key, for the caller's readiness probe only: never print or log it. */
  readonly accessKey: string;
  /** The pepper the key is hashed under (for {@link waitUntilGatewayAccepts}). */
  readonly pepper: Uint8Array;
  readonly keyMinted: boolean;
  readonly kubeconfigWritten: boolean;
}

/**
 * Ensures the admin RBAC binding, the admin User and a valid admin key, and writes
 * admin.kubeconfig when its content changes. Idempotent; safe on every start.
 */
export async function bootstrapAdmin(options: BootstrapAdminOptions): Promise<BootstrapAdminResult> {
  const { log } = options;
  const api = asFieldManager(options.api, fieldManagers.dev);
  const random = options.random ?? ((size: number) => randomBytes(size));
  const now = options.now ?? (() => new Date());

  const bindings = '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings';
  if (
    await retryWhileUnavailable('binding platform admins to cluster-admin', () =>
      createIfAbsent(api, bindings, platformAdminsBinding()),
    )
  )
    log(`bound the group ${GROUP_ADMINS} to cluster-admin`);

  const users = collectionPath(resources.users);
  const created = await retryWhileUnavailable(`creating the User ${ADMIN_USER_NAME}`, () =>
    createIfAbsent(api, users, adminUserObject()),
  );
  if (created) {
    log(`created the User ${ADMIN_USER_NAME} (cluster role ${PLATFORM_ADMIN_CLUSTER_ROLE})`);
  } else {
    const existing = await retryWhileUnavailable(`reading the User ${ADMIN_USER_NAME}`, () =>
      api.request<User>({ method: 'GET', path: objectPath(resources.users, undefined, ADMIN_USER_NAME) }),
    );
    const repair = adminUserRepair(existing);
    if (repair) {
      await retryWhileUnavailable(`repairing the User ${ADMIN_USER_NAME}`, () =>
        api.request({
          method: 'PATCH',
          path: objectPath(resources.users, undefined, ADMIN_USER_NAME),
          body: repair.patch,
          contentType: 'application/merge-patch+json',
        }),
      );
      log(
        `the User ${ADMIN_USER_NAME} existed but was no working platform admin: ${repair.fixes.join(', ')}`,
      );
    }
  }

  const pepper = await retryWhileUnavailable('reading the access key pepper', () =>
    new PepperStore(api, options.platformNamespace, random).ensure(),
  );
  const stored = existsSync(options.kubeconfigPath)
    ? tokenOfKubeconfig(readFileSync(options.kubeconfigPath, 'utf8'))
    : undefined;
  const verdict =
    stored === undefined
      ? storedKeyVerdict(undefined, emptyContext(pepper, now))
      : storedKeyVerdict(
          stored,
          await retryWhileUnavailable('checking the stored admin key', () =>
            authenticationContextFromApi(api, options.platformNamespace, stored, pepper, now),
          ),
        );

  let accessKey: string;
  if (verdict.keep) {
    accessKey = stored!; // a kept verdict is always about a stored key
  } else {
    const generated = generateAccessKey(random);
    const key = bootstrapKeyObject(generated, pepper);
    await retryWhileUnavailable('creating the admin access key', () =>
      api.request({ method: 'POST', path: collectionPath(resources.ownedAccessKeys), body: key }),
    );
    // The object name carries only the key's public id.
    log(`created the admin access key ${key.metadata.name}: ${verdict.reason}`);
    accessKey = generated.key;
  }

  const kubeconfigWritten = writeSecretFileIfChanged(
    options.kubeconfigPath,
    adminKubeconfig({ server: options.gatewayServer, caPem: options.gatewayCaPem, accessKey }),
  );
  return { accessKey, pepper, keyMinted: accessKey !== stored, kubeconfigWritten };
}

function emptyContext(pepper: Uint8Array, now: () => Date): AuthenticationContext {
  return {
    lookupKey: () => [],
    lookupUser: () => undefined,
    lookupTeam: () => undefined,
    pepper,
    now,
    limits: {},
  };
}

/** GET `url` with a bearer token, trusting `caPem`; resolves the status code, rejects on connection errors. */
function probe(url: string, caPem: string, accessKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { ca: caPem, timeout: 5_000, headers: { authorization: `Bearer ${accessKey}` } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}

export interface GatewayAcceptsOptions {
  readonly authenticator: AccessKeyAuthenticator;
  readonly pepper: Uint8Array;
  readonly accessKey: string;
  /** The gateway's base URL, `https://127.0.0.1:<port>/kubernetes/management`. */
  readonly server: string;
  readonly caPem: string;
  readonly timeoutMs?: number;
}

/**
 * Waits until kubectl with admin.kubeconfig works: first until the gateway's caches know the key
 * and its user (checked in process, so the wait costs no failed authentications, which the
 * gateway would count against the key), then until one real request over HTTPS lists
 * SharedSecrets across namespaces (TLS, authentication and RBAC end to end).
 */
export async function waitUntilGatewayAccepts(options: GatewayAcceptsOptions): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const { authenticator } = options;
  let last = 'the gateway caches are not synced';
  for (;;) {
    if (authenticator.ready()) {
      const verdict = storedKeyVerdict(options.accessKey, {
        lookupKey: (id) => authenticator.keys.byIndex(BY_KEY_ID, id),
        lookupUser: (name) => authenticator.users.get(name),
        lookupTeam: (name) => authenticator.teams.get(name),
        pepper: options.pepper,
        now: () => new Date(),
        limits: authenticator.config().auth,
      });
      if (verdict.keep) break;
      last = `the gateway does not accept the admin key yet (${verdict.reason})`;
    }
    if (Date.now() > deadline) throw new Error(`the gateway did not become usable: ${last}`);
    await sleep(100);
  }
  const url = `${options.server}/apis/${GROUP_VERSION}/sharedsecrets?limit=1`;
  for (;;) {
    const status = await probe(url, options.caPem, options.accessKey).catch(
      (err: unknown) => `${err instanceof Error ? err.message : String(err)}`,
    );
    if (status === 200) return;
    // 401 cannot be lag any more (the caches accepted the key): stop rather than earn a block.
    if (status === 401) throw new Error('the gateway refused the admin key (401)');
    last = typeof status === 'number' ? `listing SharedSecrets answered ${status}` : status;
    if (Date.now() > deadline) throw new Error(`the gateway did not become usable: ${last}`);
    await sleep(250);
  }
}
