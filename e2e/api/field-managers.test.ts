import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GROUP_VERSION } from '../../src/api/meta.ts';
import { resources } from '../../src/api/resources.ts';
import { defaultOperatorOptions, type RunningOperator, startOperator } from '../../src/cli/operator.ts';
import { type RunningSyncer, runSyncer } from '../../src/cli/syncer.ts';
import { bootstrapAdmin } from '../../src/dev/bootstrap.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { BASE_PATH, type Gateway } from '../../src/gateway/index.ts';
import { isPlatformFieldManager } from '../../src/runtime/field-managers.ts';
import {
  collectionPath,
  KubeClient,
  type ObjectList,
  objectPath,
  type ResourceRef,
} from '../../src/runtime/kube-client.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';

/**
 * Every write the platform makes names its component as the field manager: the whole operator
 * (`startOperator`, as `platform operator` composes it: admission webhooks, controllers with
 * leader election, the gateway and sign-in) runs against an apiserver of its own (no
 * kube-controller-manager, so nobody else writes there), `platform dev`'s bootstrap makes the
 * admin, and the test drives writes through it: a SharedSecret projected, a Project's namespace,
 * a Team's membership, keys created through the gateway (by an admin and by the user herself),
 * a password set and a password sign-in. Then every `metadata.managedFields[].manager` of every
 * object there is one of the platform's names, or the test's own, or the name the caller sent
 * through the gateway: never `unknown` (a write without a manager from a client without a
 * User-Agent) nor a library's User-Agent.
 */

const PLATFORM_NAMESPACE = 'platform-system';
/** The test's own writes (objects it creates as a cluster admin). */
const TEST_MANAGER = 'e2e-field-managers';
/** The User-Agent of the test's calls through the gateway: a caller's name must stay the caller's. */
const CALLER_AGENT = 'e2e-caller';
const PASSWORD = 'correct-horse-battery-staple-7';

type Managed = { manager?: string; operation?: string; subresource?: string };
type Obj = {
  kind?: string;
  metadata: { name: string; namespace?: string; managedFields?: Managed[] };
  status?: Record<string, unknown>;
};

const custom = (plural: string, namespaced = false): ResourceRef => ({
  group: 'management.platform',
  version: 'v1',
  plural,
  namespaced,
});
const core = (plural: string, namespaced = true): ResourceRef => ({
  group: '',
  version: 'v1',
  plural,
  namespaced,
});
const NAMESPACED: ResourceRef[] = [
  core('secrets'),
  core('configmaps'),
  core('serviceaccounts'),
  resources.roles,
  resources.roleBindings,
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespaced: true },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', namespaced: true },
  custom('sharedsecrets', true),
  custom('virtualclusterinstances', true),
];
const CLUSTER_SCOPED: ResourceRef[] = [
  custom('users'),
  custom('teams'),
  custom('ownedaccesskeys'),
  custom('projects'),
  custom('clusters'),
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    plural: 'validatingwebhookconfigurations',
    namespaced: false,
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    plural: 'mutatingwebhookconfigurations',
    namespaced: false,
  },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', namespaced: false },
];

describe('field managers', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let admin: KubeClient;
  let operator: RunningOperator | undefined;
  let gateway: Gateway;
  let adminKey: string;
  let gatewayApi: string;
  let platformUrl: string;

  /** The test's own write, named as the test's. */
  const create = (resource: ResourceRef, body: Record<string, unknown>, namespace?: string) =>
    admin.request({
      method: 'POST',
      path: collectionPath(resource, namespace),
      query: { fieldManager: TEST_MANAGER },
      body,
    });
  const read = <T = Obj>(resource: ResourceRef, name: string, namespace?: string) =>
    admin.request<T>({ method: 'GET', path: objectPath(resource, namespace, name) });
  /** A call through the gateway, as a caller naming itself `CALLER_AGENT` (no fieldManager). */
  const viaGateway = async (url: string, token: string, method: string, body?: unknown) => {
    const response = await undiciFetch(url, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'user-agent': `${CALLER_AGENT}/1.0`,
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: (text ? JSON.parse(text) : undefined) as Record<string, unknown>,
    };
  };
  /** Every manager of the objects listed, with where it wrote (`ns/name (operation subresource)`). */
  const managersOf = (objects: readonly Obj[]) => {
    const byManager = new Map<string, string[]>();
    for (const obj of objects) {
      const where = `${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
      for (const entry of obj.metadata.managedFields ?? []) {
        const manager = entry.manager ?? '<none>';
        byManager.set(manager, [
          ...(byManager.get(manager) ?? []),
          `${where} (${entry.operation}${entry.subresource ? ` ${entry.subresource}` : ''})`,
        ]);
      }
    }
    return byManager;
  };
  /** The managers that are neither the platform's, the test's, the caller's nor kube-apiserver's. */
  const strangers = (byManager: Map<string, string[]>) =>
    Object.fromEntries(
      [...byManager].filter(
        ([manager]) =>
          !isPlatformFieldManager(manager) &&
          manager !== TEST_MANAGER &&
          manager !== CALLER_AGENT &&
          // kube-apiserver's own objects (the default namespaces, its bootstrap RBAC) are its own.
          manager !== 'kube-apiserver',
      ),
    );
  const conditionOf = (obj: Obj | undefined, type: string) =>
    (obj?.status?.conditions as { type: string; status: string }[] | undefined)?.find((c) => c.type === type);

  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('managers') });
    const kc = kubeConfigFor(cluster);
    admin = new KubeClient(kc);
    await installCrds(kc);
    await create(core('namespaces', false), { metadata: { name: PLATFORM_NAMESPACE } });
    operator = await startOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        leaderElect: true,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'silent',
        webhookHost: '127.0.0.1',
        webhookPort: 0,
        webhookEndpoint: 'local',
        gatewayHost: '127.0.0.1',
        gatewayPort: 0,
      }),
      pino({ level: 'silent' }),
    );
    const served = operator.gateway;
    if (!served) throw new Error('the operator started without its gateway');
    gateway = served.gateway;
    platformUrl = served.server.url.replace(/\/+$/, '');
    gatewayApi = `${platformUrl}${BASE_PATH}/apis/${GROUP_VERSION}`;
    // `platform dev`'s bootstrap, on a client that names nobody: the admin's binding, User and key.
    const bootstrapped = await bootstrapAdmin({
      api: new KubeClient(kc),
      platformNamespace: PLATFORM_NAMESPACE,
      gatewayServer: `${platformUrl}${BASE_PATH}`,
      gatewayCaPem: '',
      kubeconfigPath: join(mkdtempSync(join(tmpdir(), 'platform-field-managers-')), 'admin.kubeconfig'),
      log: () => {},
    });
    adminKey = bootstrapped.accessKey;
    await eventually(
      async () => (await gateway.authenticator.authenticate(adminKey)).ok,
      60_000,
      'the gateway accepts the admin key',
    );
  }, 180_000);

  afterAll(async () => {
    await operator?.stop();
  });

  test('every object the platform wrote names a platform component as each of its managers', async () => {
    // A user in a team, a SharedSecret shared with her, a Project she owns.
    await create(custom('users'), {
      apiVersion: GROUP_VERSION,
      kind: 'User',
      metadata: { name: 'alice' },
      spec: { username: 'alice' },
    });
    await create(custom('teams'), {
      apiVersion: GROUP_VERSION,
      kind: 'Team',
      metadata: { name: 'ops' },
      spec: { users: ['alice'] },
    });
    await create(core('namespaces', false), { metadata: { name: 'team-a' } });
    await create(
      custom('sharedsecrets', true),
      {
        apiVersion: GROUP_VERSION,
        kind: 'SharedSecret',
        metadata: { name: 'db' },
        spec: {
          data: { password: 'czNjcjN0' },
          access: [{ name: 'read', verbs: ['get'], users: ['alice'] }],
        },
      },
      'team-a',
    );
    await create(custom('projects'), {
      apiVersion: GROUP_VERSION,
      kind: 'Project',
      metadata: { name: 'shop' },
      spec: { owner: { user: 'alice' } },
    });

    // Through the gateway: the admin creates a key for alice; sets her password; she signs in
    // with it and creates a key of her own (stored by the gateway as itself, for her).
    const forAlice = await viaGateway(`${gatewayApi}/ownedaccesskeys`, adminKey, 'POST', {
      metadata: { name: 'alice-by-admin' },
      spec: { user: 'alice', type: 'User' },
    });
    expect(forAlice.status, JSON.stringify(forAlice.body)).toBe(201);
    const password = await viaGateway(`${platformUrl}/auth/users/alice/password`, adminKey, 'POST', {
      password: PASSWORD,
    });
    expect(password.status, JSON.stringify(password.body)).toBeLessThan(300);
    const signIn = await undiciFetch(`${platformUrl}/auth/password/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ username: 'alice', password: PASSWORD }),
    });
    const signedIn = (await signIn.json()) as { key?: string };
    expect(signIn.status, JSON.stringify(signedIn)).toBe(200);
    const aliceKey = signedIn.key ?? '';
    await eventually(
      async () => (await gateway.authenticator.authenticate(aliceKey)).ok,
      60_000,
      "the gateway accepts alice's key",
    );
    const own = await viaGateway(`${gatewayApi}/ownedaccesskeys`, aliceKey, 'POST', {
      metadata: { name: 'alice-own' },
      spec: { user: 'alice', type: 'User' },
    });
    expect(own.status, JSON.stringify(own.body)).toBe(201);

    // Everything the controllers do about them is done.
    await eventually(
      async () =>
        conditionOf(await read(custom('sharedsecrets', true), 'db', 'team-a'), 'Ready')?.status === 'True',
      60_000,
      'SharedSecret db Ready',
    );
    await eventually(
      async () => conditionOf(await read(custom('projects'), 'shop'), 'Ready')?.status === 'True',
      60_000,
      'Project shop Ready',
    );
    await eventually(
      async () =>
        ((await read(custom('users'), 'alice')).status?.teams as string[] | undefined)?.includes('ops') ===
        true,
      60_000,
      "alice's teams",
    );
    for (const key of ['alice-by-admin', 'alice-own'])
      await eventually(
        async () => conditionOf(await read(custom('ownedaccesskeys'), key), 'Ready') !== undefined,
        60_000,
        `key ${key} has a status`,
      );

    // Every manager of every object there.
    const namespaces = (
      await admin.request<ObjectList<Obj>>({ method: 'GET', path: collectionPath(core('namespaces', false)) })
    ).items;
    const objects: Obj[] = [...namespaces];
    for (const resource of CLUSTER_SCOPED)
      objects.push(
        ...(await admin.request<ObjectList<Obj>>({ method: 'GET', path: collectionPath(resource) })).items,
      );
    for (const namespace of namespaces)
      for (const resource of NAMESPACED)
        objects.push(
          ...(
            await admin.request<ObjectList<Obj>>({
              method: 'GET',
              path: collectionPath(resource, namespace.metadata.name),
            })
          ).items,
        );
    const byManager = managersOf(objects);
    expect(strangers(byManager)).toEqual({});

    // Not vacuous: the writes of each component were there to be looked at, under its name.
    const seen = (manager: string) => (byManager.get(manager) ?? []).join(', ');
    expect(seen('platform-project-controller')).toContain('p-shop (');
    expect(seen('platform-sharedsecret-controller')).toContain('team-a/');
    expect(seen('platform-controller')).toContain('alice (Update status)');
    expect(seen('platform-admission')).toContain(`${PLATFORM_NAMESPACE}/`);
    expect(seen('platform-login')).toContain(`${PLATFORM_NAMESPACE}/platform-password-alice`);
    expect(seen('platform-gateway')).toContain(`${PLATFORM_NAMESPACE}/`);
    expect(seen('platform-dev')).toContain('admin (');
    // The caller's own name stays on what it wrote through the gateway, her own key included.
    expect(seen(CALLER_AGENT)).toContain('alice-by-admin (Update)');
    expect(seen(CALLER_AGENT)).toContain('alice-own (Update)');
  }, 300_000);

  test("a syncer's writes, on the host and on the virtual cluster, name the syncer", async () => {
    const virtualCluster = await startCluster({ name: uniqueName('managers-vc') });
    const virtual = new KubeClient(kubeConfigFor(virtualCluster));
    const hostNamespace = 'vc-host';
    await create(core('namespaces', false), { metadata: { name: hostNamespace } });
    const configPath = join(mkdtempSync(join(tmpdir(), 'platform-field-managers-vc-')), 'vcluster.yaml');
    writeFileSync(configPath, JSON.stringify({ sync: { toHost: { configMaps: { enabled: true } } } }));
    const inVirtual = (resource: ResourceRef, body: Record<string, unknown>) =>
      virtual.request({
        method: 'POST',
        path: collectionPath(resource, 'apps'),
        query: { fieldManager: TEST_MANAGER },
        body,
      });
    await virtual.request({
      method: 'POST',
      path: collectionPath(core('namespaces', false)),
      query: { fieldManager: TEST_MANAGER },
      body: { metadata: { name: 'apps' } },
    });
    await inVirtual(core('configmaps'), { metadata: { name: 'settings' }, data: { mode: 'fast' } });
    await inVirtual(core('services'), {
      metadata: { name: 'db' },
      spec: { ports: [{ name: 'p', port: 5432 }] },
    });
    let syncer: RunningSyncer | undefined;
    try {
      // `platform syncer`, in this process.
      syncer = await runSyncer(
        {
          virtualKubeconfig: virtualCluster.kubeconfigPath,
          hostKubeconfig: cluster.kubeconfigPath,
          hostNamespace,
          name: 'vc',
          config: configPath,
          healthPort: 0,
          healthHost: '127.0.0.1',
          maxConcurrentReconciles: 2,
          logLevel: 'warn',
        },
        pino({ level: 'silent' }),
      );
      const hostCopy = (plural: string, name: string) =>
        admin.request<Obj>({
          method: 'GET',
          path: objectPath(core(plural), hostNamespace, hostNameLong(name, 'apps', 'vc')),
        });
      await eventually(
        () =>
          hostCopy('configmaps', 'settings').then(
            () => true,
            () => false,
          ),
        60_000,
        'the ConfigMap on the host',
      );
      const hostService = await (async () => {
        await eventually(
          () =>
            hostCopy('services', 'db').then(
              () => true,
              () => false,
            ),
          60_000,
          'the Service on the host',
        );
        return hostCopy('services', 'db');
      })();
      // A label set on the host copy comes back to the virtual Service: the syncer writes there too.
      await admin.request({
        method: 'PATCH',
        path: objectPath(core('services'), hostNamespace, hostService.metadata.name),
        query: { fieldManager: TEST_MANAGER },
        contentType: 'application/merge-patch+json',
        body: { metadata: { labels: { tier: 'backend' } } },
      });
      const virtualService = () =>
        virtual.request<Obj & { metadata: { labels?: Record<string, string> } }>({
          method: 'GET',
          path: objectPath(core('services'), 'apps', 'db'),
        });
      await eventually(
        async () => (await virtualService()).metadata.labels?.tier === 'backend',
        60_000,
        'the label back on the virtual Service',
      );

      const objects: Obj[] = [];
      for (const plural of ['configmaps', 'services', 'endpoints', 'secrets'])
        objects.push(
          ...(
            await admin.request<ObjectList<Obj>>({
              method: 'GET',
              path: collectionPath(core(plural), hostNamespace),
            })
          ).items,
          ...(
            await virtual.request<ObjectList<Obj>>({
              method: 'GET',
              path: collectionPath(core(plural), 'apps'),
            })
          ).items,
        );
      const byManager = managersOf(objects);
      expect(strangers(byManager)).toEqual({});
      const seen = (byManager.get('platform-syncer') ?? []).join(', ');
      expect(seen).toContain(`${hostNamespace}/${hostService.metadata.name} (`);
      expect(seen).toContain(`${hostNamespace}/${hostNameLong('settings', 'apps', 'vc')} (`);
      expect(seen).toContain('apps/db (');
    } finally {
      await syncer?.stop();
      virtual.close();
    }
  }, 300_000);
});
