import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, inject } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { clientForConnection, readCredentialsSecret } from '../../src/clusters/access.ts';
import {
  provisionedAdminSecretName,
  provisionedConnection,
} from '../../src/clusters/provisioned-connection.ts';
import { ProcessesProvisioner } from '../../src/provision/processes.ts';
import type { ProvisionedInstance } from '../../src/provision/provisioner.ts';
import { isAlreadyExists } from '../../src/runtime/errors.ts';
import { fieldManagers } from '../../src/runtime/field-managers.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { type GatewayEnv, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { eventually } from '../support/wait.ts';

/**
 * A virtual cluster the platform provisioned, reached through the gateway (issue 27): the gateway
 * on an apiserver of its own (the host, with kube-controller-manager for the project roles'
 * aggregation), two projects, and one VirtualClusterInstance made by the processes provisioner
 * run here directly (the virtual cluster controller does not run: what is tested is how the
 * gateway reaches what a provisioner made, its admin Secret).
 *
 * - Project {@link WEB} (namespace `p-web`): owner `alice` (platform-project-admin), member
 *   `carol` with platform-project-viewer. Its instance {@link INSTANCE} is provisioned (a real
 *   etcd, kube-apiserver and kube-controller-manager); {@link PENDING} names a template too but
 *   the provisioner never made it.
 * - Project {@link SHOP} (namespace `p-shop`): owner `bob`. Its instance {@link SHOP_INSTANCE} is
 *   a provisioned instance too, whose admin Secret is a copy of {@link INSTANCE}'s (the same
 *   virtual apiserver, one control plane less on a busy machine): what bob reaches there shows
 *   the path works for him, so a refusal of him elsewhere is the platform's, not the target's.
 *
 * In the virtual cluster nobody but its admin has any right at first; tests grant there.
 */

export const WEB = 'web';
export const SHOP = 'shop';
export const INSTANCE = 'dev';
export const PENDING = 'pending';
export const SHOP_INSTANCE = 'app';
export const TEMPLATE = 'small';
export const namespaceOf = (project: string) => `p-${project}`;

export interface ProvisionedEnv {
  readonly gateway: GatewayEnv;
  /** Keys of alice (owner of web), carol (viewer of web) and bob (owner of shop). */
  readonly keys: { readonly alice: string; readonly carol: string; readonly bob: string };
  /** The provisioned apiserver's URL, as its admin Secret names it. */
  readonly virtualServer: string;
  /** A cluster-admin client of the virtual cluster (its admin Secret's credential). */
  readonly virtualAdmin: KubeClient;
  /** The access-proxy URL of a project's virtual cluster on the gateway. */
  proxyUrl(project: string, instance: string): string;
  /** Lets `user` list namespaces in the virtual cluster (a ClusterRoleBinding there; idempotent). */
  grantNamespaceList(user: string): Promise<void>;
}

const NAMESPACE_READER = 'e2e-namespace-reader';

export function useProvisionedEnv(): () => ProvisionedEnv {
  const gateway = useGatewayEnv({
    https: true,
    controllers: ['sharedsecret', 'project'],
    controllerManager: true,
  });
  let stateDir: string | undefined;
  let provisioner: ProcessesProvisioner | undefined;
  let provisioned: ProvisionedInstance | undefined;
  let env: ProvisionedEnv | undefined;
  beforeAll(async () => {
    const g = gateway();
    const api = new KubeClient(g.kc);
    const keys = {
      alice: await g.user('alice'),
      carol: await g.user('carol'),
      bob: await g.user('bob'),
    };
    await createProject(g, WEB, { owner: { user: 'alice' }, members: [viewer('carol')] });
    await createProject(g, SHOP, { owner: { user: 'bob' } });
    await g.custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'virtualclustertemplates',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterTemplate',
        metadata: { name: TEMPLATE },
        spec: {},
      },
    });
    const dev = await createInstance(g, WEB, INSTANCE);
    await createInstance(g, WEB, PENDING);
    await createInstance(g, SHOP, SHOP_INSTANCE);

    stateDir = mkdtempSync(join(tmpdir(), 'platform-provisioned-proxy-'));
    provisioner = new ProcessesProvisioner({ stateDir, binary: inject('controlPlaneBinary'), api });
    provisioned = { namespace: namespaceOf(WEB), name: INSTANCE, uid: dev.metadata.uid };
    await provisioner.ensure(provisioned, { controllerManager: true });
    await eventually(
      async () => (await provisioner!.status(provisioned!)).phase === 'Ready',
      120_000,
      'the provisioned control plane to be ready',
    );
    const adminData = await readCredentialsSecret(
      api,
      namespaceOf(WEB),
      provisionedAdminSecretName(INSTANCE),
    );
    const connection = provisionedConnection(INSTANCE, adminData);
    // The shop's instance: the same virtual apiserver, through an admin Secret of its own name.
    await g.core.createNamespacedSecret({
      namespace: namespaceOf(SHOP),
      body: { metadata: { name: provisionedAdminSecretName(SHOP_INSTANCE) }, data: adminData ?? {} },
    });
    const virtualAdmin = clientForConnection(connection, fieldManagers.gateway);
    await virtualAdmin.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: {
        metadata: { name: NAMESPACE_READER },
        rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list'] }],
      },
    });
    env = {
      gateway: g,
      keys,
      virtualServer: connection.server,
      virtualAdmin,
      proxyUrl: (project, instance) =>
        `${g.server.url}/kubernetes/project/${project}/virtualcluster/${instance}`,
      grantNamespaceList: async (user) => {
        await virtualAdmin
          .request({
            method: 'POST',
            path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
            body: {
              metadata: { name: `${NAMESPACE_READER}-${user}` },
              roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NAMESPACE_READER },
              subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
            },
          })
          .catch((err: unknown) => {
            if (!isAlreadyExists(err)) throw err;
          });
      },
    };
  }, 240_000);
  afterAll(async () => {
    env?.virtualAdmin.close();
    if (provisioner && provisioned) await provisioner.remove(provisioned);
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });
  return () => {
    if (!env) throw new Error('the provisioned environment is not started');
    return env;
  };
}

const viewer = (name: string) => ({ kind: 'User', name, clusterRole: 'platform-project-viewer' });

async function createProject(g: GatewayEnv, name: string, spec: Record<string, unknown>): Promise<void> {
  await g.custom.createClusterCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    plural: 'projects',
    body: { apiVersion: GROUP_VERSION, kind: 'Project', metadata: { name }, spec },
  });
  await eventually(
    async () =>
      (await g.core.readNamespace({ name: namespaceOf(name) }).catch(() => undefined)) !== undefined,
    30_000,
    `the namespace of project ${name}`,
  );
}

async function createInstance(
  g: GatewayEnv,
  project: string,
  name: string,
): Promise<{ metadata: { uid: string } }> {
  return (await g.custom.createNamespacedCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    namespace: namespaceOf(project),
    plural: 'virtualclusterinstances',
    body: {
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterInstance',
      metadata: { name },
      spec: { templateRef: { name: TEMPLATE } },
    },
  })) as { metadata: { uid: string } };
}
