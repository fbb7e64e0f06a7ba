import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import type { User } from '../api/identity.ts';
import { resources } from '../api/resources.ts';
import { GROUP_ADMINS } from '../identity/groups.ts';
import { generateAccessKey, type RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { isAlreadyExists, isApiError } from '../runtime/errors.ts';
import { asFieldManager, fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../runtime/kube-client.ts';
import {
  ADMIN_USER_NAME,
  adminKubeconfig,
  adminUserObject,
  adminUserRepair,
  bootstrapKeyObject,
  platformAdminsBinding,
  tokenOfKubeconfig,
} from './admin-objects.ts';
import { authenticationContextFromApi, emptyContext, storedKeyVerdict } from './stored-admin-key.ts';

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
 *
 * The pieces: admin-objects.ts (what is written, pure), stored-admin-key.ts (whether the stored
 * key may stay), gateway-ready.ts (waiting until kubectl with admin.kubeconfig works).
 */

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
