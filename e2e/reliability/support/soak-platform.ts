// biome-ignore-all lint/suspicious/noExplicitAny: objects are read as loose JSON
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { API_GROUP, API_VERSION } from '../../../src/api/meta.ts';
import type { Cluster } from '../../../src/dev/controlplane.ts';
import { freePort } from '../../../src/dev/controlplane.ts';
import { generateAccessKey } from '../../../src/identity/keys.ts';
import { KubeClient } from '../../../src/runtime/kube-client.ts';
import { call } from '../../gateway/support.ts';
import { kubeConfigFor, uniqueName } from '../../support/cluster.ts';
import { installCrds } from '../../support/crds.ts';
import { eventually } from '../../support/wait.ts';
import { waitUntilWebhooksServe } from '../../support/webhooks-ready.ts';
import type { Plane } from './plane.ts';
import { type OperatorProcess, spawnPlatformOperator } from './process.ts';

const GV = `${API_GROUP}/${API_VERSION}`;
export const PLATFORM_NS = 'platform-system';
export const SECRET_NAMESPACES = ['soak-a', 'soak-b'] as const;
export const VCI_NAMESPACE = 'soak-vc';
export const VCI_NAME = 'vc';
export const VIRTUAL_NAMESPACE = 'apps';

/** The syncer's configuration: Services and Endpoints (the defaults) with a patch run in the sandbox. */
export const SYNC_CONFIG = {
  sync: {
    toHost: {
      endpoints: {
        patches: [
          {
            path: 'metadata.annotations["platform.test/tier"]',
            expression: '"host-" + value',
            reverseExpression: 'value.replace(/^host-/, "")',
          },
        ],
      },
    },
  },
};

/**
 * The whole platform as one real `platform operator` process (every controller with leader
 * election, the admission webhooks, the gateway) on a host apiserver of its own with a
 * kube-controller-manager, and a second apiserver as a virtual cluster synced by the operator's
 * `virtualcluster` controller. Ports are fixed, so a restarted process serves where the old one did.
 */
export interface SoakPlatform {
  host: Cluster;
  virtualCluster: Cluster;
  admin: KubeClient;
  virtual: KubeClient;
  gateway: string;
  gatewayApi: string;
  adminKey: string;
  aliceKey: string;
  operator: OperatorProcess;
  /** Starts the operator process again (after a kill) and waits until all of it serves. */
  restart(): Promise<OperatorProcess>;
  logPath: string;
}

export async function startSoakPlatform(plane: Plane): Promise<SoakPlatform> {
  const [host, virtualCluster] = await Promise.all([
    plane.startCluster({ name: uniqueName('soak'), controllerManager: true }),
    plane.startCluster({ name: uniqueName('soakvc') }),
  ]);
  const hostKc = kubeConfigFor(host);
  const admin = new KubeClient(hostKc);
  const virtual = new KubeClient(kubeConfigFor(virtualCluster));
  await installCrds(hostKc);
  for (const name of [PLATFORM_NS, VCI_NAMESPACE, ...SECRET_NAMESPACES])
    await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
  await virtual.request({
    method: 'POST',
    path: '/api/v1/namespaces',
    body: { metadata: { name: VIRTUAL_NAMESPACE } },
  });
  await admin.request({
    method: 'POST',
    path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    body: {
      metadata: { name: 'platform-admins' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:admins' }],
    },
  });

  const [healthPort, webhookPort, gatewayPort] = [await freePort(), await freePort(), await freePort()];
  const logPath = join(plane.dir, 'operator.log');
  const args = [
    '--kubeconfig',
    host.kubeconfigPath,
    '--namespace',
    PLATFORM_NS,
    // The same identity after a restart: the new process takes the lease over at once (the old
    // one is dead), as a restarted pod with a stable name would.
    '--identity',
    'soak-operator',
    '--webhook-host',
    '127.0.0.1',
    '--webhook-port',
    String(webhookPort),
    '--gateway-host',
    '127.0.0.1',
    '--gateway-port',
    String(gatewayPort),
    '--log-level',
    'warn',
  ];
  const gateway = `http://127.0.0.1:${gatewayPort}`;
  const custom = hostKc.makeApiClient(CustomObjectsApi);
  const serve = async (): Promise<OperatorProcess> => {
    const operator = spawnPlatformOperator(args, healthPort, logPath);
    await operator.waitReady();
    await waitUntilWebhooksServe(custom);
    await eventually(
      async () => (await fetch(`${gateway}/readyz`).catch(() => undefined))?.status === 200,
      60_000,
      'the gateway to be ready',
    );
    return operator;
  };
  const operator = await serve();

  const gatewayApi = `${gateway}/kubernetes/management/apis/${GV}`;
  const user = async (name: string, adminUser: boolean): Promise<string> => {
    await admin.request({
      method: 'POST',
      path: `/apis/${GV}/users`,
      body: {
        apiVersion: GV,
        kind: 'User',
        metadata: { name },
        spec: {
          username: name,
          displayName: name,
          email: `${name}@example.com`,
          ...(adminUser ? { clusterRoles: [{ name: 'platform-admin' }] } : {}),
        },
      },
    });
    const { key } = generateAccessKey((size) => randomBytes(size));
    // The admission webhook hashes the key; the plaintext is never stored.
    await admin.request({
      method: 'POST',
      path: `/apis/${GV}/ownedaccesskeys`,
      body: {
        apiVersion: GV,
        kind: 'OwnedAccessKey',
        metadata: { name: `${name}-key` },
        spec: { type: 'User', user: name, key },
      },
    });
    await eventually(
      async () =>
        (await call(`${gateway}/kubernetes/management/apis`, { token: key }).catch(() => undefined))
          ?.status === 200,
      30_000,
      `the gateway to accept ${name}'s key`,
    );
    return key;
  };
  const adminKey = await user('soak-admin', true);
  const aliceKey = await user('alice', false);
  for (const name of ['bob', 'carol', 'dave']) {
    await admin.request({
      method: 'POST',
      path: `/apis/${GV}/users`,
      body: {
        apiVersion: GV,
        kind: 'User',
        metadata: { name },
        spec: { username: name, email: `${name}@example.com` },
      },
    });
  }

  await admin.request({
    method: 'POST',
    path: `/api/v1/namespaces/${VCI_NAMESPACE}/secrets`,
    body: {
      metadata: { name: 'vc-creds' },
      data: { token: Buffer.from(virtualCluster.adminToken).toString('base64') },
    },
  });
  await admin.request({
    method: 'POST',
    path: `/apis/${GV}/namespaces/${VCI_NAMESPACE}/virtualclusterinstances`,
    body: {
      apiVersion: GV,
      kind: 'VirtualClusterInstance',
      metadata: { name: VCI_NAME },
      spec: {
        endpoint: virtualCluster.server,
        caData: Buffer.from(virtualCluster.caPem).toString('base64'),
        credentialsSecretRef: { name: 'vc-creds' },
        config: stringify(SYNC_CONFIG),
      },
    },
  });
  await eventually(async () => syncing(admin), 60_000, 'the VirtualClusterInstance to sync');

  const platform: SoakPlatform = {
    host,
    virtualCluster,
    admin,
    virtual,
    gateway,
    gatewayApi,
    adminKey,
    aliceKey,
    operator,
    logPath,
    restart: async () => {
      platform.operator = await serve();
      return platform.operator;
    },
  };
  return platform;
}

/** Whether the VirtualClusterInstance's `Syncing` condition is True for its generation. */
export async function syncing(admin: KubeClient): Promise<boolean> {
  const vci = await admin.request<any>({
    method: 'GET',
    path: `/apis/${GV}/namespaces/${VCI_NAMESPACE}/virtualclusterinstances/${VCI_NAME}`,
  });
  const condition = (vci.status?.conditions ?? []).find((c: any) => c.type === 'Syncing');
  return condition?.status === 'True' && condition.observedGeneration === vci.metadata.generation;
}
