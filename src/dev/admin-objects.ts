import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import type { User } from '../api/identity.ts';
import { GROUP_VERSION } from '../api/meta.ts';
import { GROUP_ADMINS } from '../identity/groups.ts';
import { type GeneratedAccessKey, hashAccessKey } from '../identity/keys.ts';
import { isJsonObject } from '../runtime/json.ts';

/**
 * What `platform dev`'s bootstrap (bootstrap.ts) writes, as pure functions: the admin User, the
 * binding of platform admins to `cluster-admin`, the stored form of an admin key, and the
 * admin.kubeconfig document (and the token read back from it).
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
  isJsonObject(value) ? value : undefined;

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
