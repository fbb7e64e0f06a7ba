import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { ACCESS_KEY_EXTRA } from '../../src/identity/groups.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { type GatewayEnv, GROUP_VERSION } from '../gateway/support.ts';
import { kubeConfigFor } from './cluster.ts';
import { eventually } from './wait.ts';

/**
 * The targets of the access proxy as an e2e test connects them (docs/access-proxy.md does the
 * same with kubectl): the platform's identity on a target, the one ClusterRole and binding that
 * let it impersonate, and the platform objects (`Project`, `Cluster`, `VirtualClusterInstance`)
 * with their credentials Secrets.
 */

export const CLUSTER = 'edge';
export const PROJECT = 'web';
export const PROJECT_NAMESPACE = `p-${PROJECT}`;
export const VIRTUAL_CLUSTER = 'dev';

/** The platform's identity on a target: a ServiceAccount whose token the credentials Secret holds. */
export const PROXY_IDENTITY = { namespace: 'kube-system', name: 'platform-access-proxy' } as const;
export const IMPERSONATOR_ROLE = 'platform-impersonator';

/**
 * The one ClusterRole and binding a target needs (docs/access-proxy.md shows the same objects):
 * `impersonate` on users, groups and the access-key extra the platform sends, nothing else.
 */
export function impersonatorRbac(subject: { kind: 'ServiceAccount'; namespace: string; name: string }) {
  return {
    clusterRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: IMPERSONATOR_ROLE },
      rules: [
        { apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] },
        {
          apiGroups: ['authentication.k8s.io'],
          resources: [`userextras/${ACCESS_KEY_EXTRA}`],
          verbs: ['impersonate'],
        },
      ],
    },
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: IMPERSONATOR_ROLE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: IMPERSONATOR_ROLE },
      subjects: [subject],
    },
  };
}

/**
 * Makes `cluster` a target the platform may reach: its ServiceAccount, the impersonation RBAC,
 * and a token for it (one day). Returns the token, for a credentials Secret.
 */
export async function prepareTarget(cluster: Cluster): Promise<string> {
  const admin = new KubeClient(kubeConfigFor(cluster));
  try {
    const { namespace, name } = PROXY_IDENTITY;
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${namespace}/serviceaccounts`,
      body: { metadata: { name } },
    });
    const rbac = impersonatorRbac({ kind: 'ServiceAccount', namespace, name });
    await admin.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: rbac.clusterRole,
    });
    await admin.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: rbac.clusterRoleBinding,
    });
    const review = await admin.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 86_400 },
      },
    });
    return review.status.token;
  } finally {
    admin.close();
  }
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** The project whose space and virtual cluster the paths reach; the project controller makes its namespace. */
export async function createProject(g: GatewayEnv): Promise<void> {
  await g.custom.createClusterCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    plural: 'projects',
    body: { apiVersion: GROUP_VERSION, kind: 'Project', metadata: { name: PROJECT }, spec: {} },
  });
  await eventually(
    async () =>
      (await g.core.readNamespace({ name: PROJECT_NAMESPACE }).catch(() => undefined)) !== undefined,
    30_000,
    'the project namespace',
  );
}

/** Where a platform object says its cluster is, and the credentials its Secret holds. */
export interface TargetSpec {
  /** The `Cluster` (or `VirtualClusterInstance`) name. */
  readonly name: string;
  readonly endpoint: string;
  /** The server's CA, as `spec.caData`; none: left out. */
  readonly caPem?: string;
  /** The credentials Secret's data (plain text values); none: no Secret is created, only referenced. */
  readonly credentials?: Readonly<Record<string, string>>;
}

/** Creates a `Cluster` named `spec.name` whose credentials Secret `<name>-credentials` is in the platform namespace. */
export async function connectCluster(g: GatewayEnv, spec: TargetSpec): Promise<void> {
  const secret = `${spec.name}-credentials`;
  if (spec.credentials)
    await g.core.createNamespacedSecret({
      namespace: g.platformNamespace,
      body: { metadata: { name: secret }, stringData: { ...spec.credentials } },
    });
  await g.custom.createClusterCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    plural: 'clusters',
    body: {
      apiVersion: GROUP_VERSION,
      kind: 'Cluster',
      metadata: { name: spec.name },
      spec: {
        endpoint: spec.endpoint,
        ...(spec.caPem ? { caData: b64(spec.caPem) } : {}),
        credentialsSecretRef: { name: secret, namespace: g.platformNamespace },
      },
    },
  });
}

/** Creates a `VirtualClusterInstance` of {@link PROJECT}, its credentials Secret beside it. */
export async function connectVirtualCluster(g: GatewayEnv, spec: TargetSpec): Promise<void> {
  const secret = `${spec.name}-credentials`;
  if (spec.credentials)
    await g.core.createNamespacedSecret({
      namespace: PROJECT_NAMESPACE,
      body: { metadata: { name: secret }, stringData: { ...spec.credentials } },
    });
  await g.custom.createNamespacedCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    namespace: PROJECT_NAMESPACE,
    plural: 'virtualclusterinstances',
    body: {
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterInstance',
      metadata: { name: spec.name },
      spec: {
        endpoint: spec.endpoint,
        ...(spec.caPem ? { caData: b64(spec.caPem) } : {}),
        credentialsSecretRef: { name: secret },
      },
    },
  });
}
