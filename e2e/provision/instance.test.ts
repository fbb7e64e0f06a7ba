// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { CLEANUP_FINALIZER, INSTANCE_UID_LABEL } from '../../src/api/labels.ts';
import { API_GROUP } from '../../src/api/meta.ts';
import { secretNameOf } from '../../src/provision/control-plane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { uniqueName } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { useProvisioningEnv } from '../support/provisioned-instances.ts';
import { eventually } from '../support/wait.ts';

/**
 * Issue 27: a VirtualClusterInstance the platform provisions. An operator process with the
 * processes provisioner; a VirtualClusterTemplate whose config syncs ConfigMaps, Services and
 * Endpoints; a member of the namespace (impersonated, allowed only instances there) creates an
 * instance naming it. It becomes Provisioned and Ready; with the admin kubeconfig of its Secret,
 * objects made in the virtual cluster appear on the host; the operator restarted, they are all
 * still there and the syncer carries new ones; deleted, nothing of it is left: no host object
 * it synced, no process, no state directory, no Secret, no syncer identity.
 */

const MEMBER = 'provision-member@e2e';
const VCI = 'virtualclusterinstances';
const SYNCED = ['configmaps', 'services', 'endpoints'] as const;

describe('a provisioned VirtualClusterInstance (processes provisioner)', { timeout: 600_000 }, () => {
  const env = useProvisioningEnv('provision-vci', {
    description: 'e2e provision/instance',
    config: stringify({
      sync: {
        toHost: {
          configMaps: { enabled: true },
          services: { enabled: true },
          endpoints: { enabled: true },
        },
      },
    }),
  });
  const { kc, namespace } = env;
  const core = kc.makeApiClient(CoreV1Api);
  const name = uniqueName('vc');
  const startOperator = () => env.startOperator('operator', ['--no-leader-elect']);
  const stopOperator = () => env.stopOperator('operator');
  const instanceDir = () => env.instanceDir(name);
  const readInstance = () => env.readInstance(name);
  const condition = (type: string) => env.condition(name, type);
  const waitReady = (what: string) => env.waitCondition(name, 'Ready', 'True', 300_000, what);
  const virtual = () => env.virtualCore(name);
  /** The host objects of `plural` the syncer wrote for this instance, by their virtual names. */
  const syncedOnHost = async (plural: (typeof SYNCED)[number]) => {
    const list = await new KubeClient(kc).request<{ items: any[] }>({
      method: 'GET',
      path: `/api/v1/namespaces/${namespace()}/${plural}`,
      query: { labelSelector: `${LABEL_MANAGED_BY}=${name}` },
    });
    return list.items.map((o) => o.metadata.annotations?.[ANNOTATION_OBJECT_NAME]).sort();
  };

  beforeAll(async () => {
    // The member may make instances in this namespace, and nothing else.
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: namespace(),
      body: {
        metadata: { name: 'instances' },
        rules: [
          {
            apiGroups: [API_GROUP],
            resources: [VCI],
            verbs: ['get', 'list', 'watch', 'create', 'delete'],
          },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: namespace(),
      body: {
        metadata: { name: 'instances' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'instances' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: MEMBER }],
      },
    });
    startOperator();
  });

  /** The member's client: the host's admin credentials, impersonating the member. */
  const asMember = () => {
    const member = new KubeConfig();
    member.loadFromString(kc.exportConfig());
    const user = member.getCurrentUser()!;
    member.users = member.users.map((u) => (u.name === user.name ? { ...u, impersonateUser: MEMBER } : u));
    return member.makeApiClient(CustomObjectsApi);
  };

  test('a member creates it from a template; it becomes Provisioned and Ready, with Events', async () => {
    await env.createInstance(name, asMember());
    await waitReady('the instance Ready');
    const instance = await readInstance();
    expect(instance.metadata.finalizers).toContain(CLEANUP_FINALIZER);
    expect(await condition('Provisioned')).toMatchObject({
      status: 'True',
      reason: 'Provisioned',
      observedGeneration: 1,
    });
    expect(await condition('Syncing')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(instance.status.observedGeneration).toBe(1);
    expect(
      processesNaming(instanceDir())
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
    const events = await new KubeClient(kc).request<{ items: any[] }>({
      method: 'GET',
      path: `/apis/events.k8s.io/v1/namespaces/${namespace()}/events`,
    });
    const reasons = events.items.filter((e) => e.regarding?.name === name).map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['Provisioning', 'Provisioned']));
  });

  test('objects made in it with its admin kubeconfig: the synced kinds appear on the host', async () => {
    const api = await virtual();
    await api.createNamespace({ body: { metadata: { name: 'apps' } } });
    await api.createNamespacedConfigMap({
      namespace: 'apps',
      body: { metadata: { name: 'settings' }, data: { mode: 'before' } },
    });
    await api.createNamespacedService({
      namespace: 'apps',
      body: { metadata: { name: 'web' }, spec: { ports: [{ port: 80, targetPort: 8080 }] } },
    });
    await api.createNamespacedEndpoints({
      namespace: 'apps',
      body: {
        metadata: { name: 'web' },
        subsets: [{ addresses: [{ ip: '10.1.2.3' }], ports: [{ port: 8080 }] }],
      },
    });
    await eventually(
      async () =>
        (await syncedOnHost('configmaps')).includes('settings') &&
        (await syncedOnHost('services')).includes('web') &&
        (await syncedOnHost('endpoints')).includes('web'),
      60_000,
      'the ConfigMap, Service and Endpoints on the host',
    );
  });

  test('the operator restarted: the virtual cluster and its objects are still there, and it syncs', async () => {
    const before = processesNaming(instanceDir()).map((p) => p.pid);
    await stopOperator();
    // Its control plane ended with it (a graceful stop); its state is kept.
    await eventually(() => processesNaming(instanceDir()).length === 0, 30_000, 'no process of it left');
    expect(existsSync(join(instanceDir(), 'data'))).toBe(true);
    expect((await syncedOnHost('configmaps')).includes('settings')).toBe(true);

    startOperator();
    await eventually(
      async () =>
        (
          await (
            await virtual()
          )
            .readNamespacedConfigMap({ namespace: 'apps', name: 'settings' })
            .catch(() => null)
        )?.data?.mode === 'before',
      300_000,
      'the virtual cluster back with its ConfigMap',
    );
    await waitReady('the instance Ready again');
    expect(processesNaming(instanceDir()).filter((p) => before.includes(p.pid))).toEqual([]);
    await (await virtual()).createNamespacedConfigMap({
      namespace: 'apps',
      body: { metadata: { name: 'after' }, data: { mode: 'after' } },
    });
    await eventually(
      async () => (await syncedOnHost('configmaps')).includes('after'),
      60_000,
      'a ConfigMap made after the restart on the host',
    );
    expect(await syncedOnHost('services')).toContain('web');
    expect(await syncedOnHost('endpoints')).toContain('web');
  });

  test('deleted: no host object it synced, no process, no state directory, no Secret, no syncer identity', async () => {
    const uid = (await readInstance()).metadata.uid;
    await env.deleteInstance(name, asMember());
    await eventually(async () => (await readInstance()) === undefined, 120_000, 'the instance gone');
    for (const plural of SYNCED) expect(await syncedOnHost(plural)).toEqual([]);
    expect(processesNaming(instanceDir())).toEqual([]);
    expect(existsSync(instanceDir())).toBe(false);
    for (const role of ['admin', 'pki'] as const)
      await expect(
        core.readNamespacedSecret({ namespace: namespace(), name: secretNameOf(name, role) }),
      ).rejects.toMatchObject({
        code: 404,
      });
    const accounts = await core.listNamespacedServiceAccount({
      namespace: namespace(),
      labelSelector: `${INSTANCE_UID_LABEL}=${uid}`,
    });
    expect(accounts.items).toEqual([]);
    const events = await new KubeClient(kc).request<{ items: any[] }>({
      method: 'GET',
      path: `/apis/events.k8s.io/v1/namespaces/${namespace()}/events`,
    });
    expect(events.items.filter((e) => e.regarding?.name === name).map((e) => e.reason)).toContain(
      'Deprovisioned',
    );
  });
});
