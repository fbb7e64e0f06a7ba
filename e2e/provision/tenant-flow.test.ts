// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent } from 'undici';
import { describe, expect, test } from 'vitest';
import { INSTANCE_UID_LABEL, SLEEPING_LABEL } from '../../src/api/labels.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { call } from '../gateway/support.ts';
import { kubectl } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { usePlatformProcess } from '../support/platform-operator.ts';
import { waitForValue } from '../support/wait.ts';

/**
 * Issue 27, a tenant's whole flow with the processes provisioner, as the tenant does it: every
 * step through the platform's gateway with the tenant's own access key, on the whole platform
 * (`platform operator`: controllers, webhooks, gateway) as a process of its own.
 *
 * A platform admin makes a VirtualClusterTemplate (syncing ConfigMaps, Services and Endpoints)
 * and a Project whose member alice holds `platform-project-user`, and mints alice's key. alice
 * creates an instance from the template through the management API; it becomes Ready; she binds
 * herself in it with its admin credential (read through her project's space: the way a fresh
 * virtual cluster gets its first users), gets her kubeconfig from
 * `POST .../virtualclusterinstances/<name>/kubeconfig` and with kubectl makes a Namespace, a
 * ConfigMap, a Service and Endpoints in it; they appear on the host in the project's namespace.
 * The platform is restarted (the operator process ended and started again while its cluster
 * stays up): everything is still there. With a short `spec.sleepAfter` it falls asleep
 * (`Sleeping=True`, its processes gone, its storage and host copies kept, labelled sleeping);
 * one kubectl request through the proxy wakes it and sees the objects made before. She deletes
 * the instance: nothing of it remains on the host (listed) or on disk.
 */

const PROJECT = 'web';
const NAMESPACE = 'p-web';
const NAME = 'dev';
const SYNCED = ['configmaps', 'services', 'endpoints'] as const;

describe('a tenant provisions a virtual cluster and works in it (processes)', { timeout: 900_000 }, () => {
  const platform = usePlatformProcess('tenant-flow');
  let aliceKey = '';
  let alice = ''; // her kubeconfig on the management API
  let aliceVirtual = ''; // her kubeconfig of the virtual cluster, from the kubeconfig endpoint

  const run = (kubeconfig: string, args: string[], stdin?: string) =>
    kubectl(args, { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
  const ok = async (kubeconfig: string, args: string[], stdin?: string) => {
    const result = await run(kubeconfig, args, stdin);
    expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };
  /** The instance as alice reads it through the management API (undefined once gone). */
  const instance = async (): Promise<any> => {
    const read = await run(alice, ['-n', NAMESPACE, 'get', 'virtualclusterinstance', NAME, '-o', 'json']);
    if (read.code !== 0) {
      if (read.stderr.includes('NotFound')) return undefined;
      throw new Error(read.stderr);
    }
    return JSON.parse(read.stdout);
  };
  const conditionOf = (object: any, type: string) =>
    (object?.status?.conditions ?? []).find((c: any) => c.type === type);
  const waitCondition = (type: string, status: string, what: string, boundMs = 300_000) =>
    waitForValue(what, instance, (object) => conditionOf(object, type)?.status === status, boundMs).catch(
      (err: Error) => {
        throw new Error(`${err.message}\noperator log: ${platform().logTail()}`);
      },
    );
  /** The host objects of `plural` the syncer wrote for the instance (as the host admin). */
  const syncedObjects = async (plural: string): Promise<any[]> =>
    JSON.parse(
      await ok(platform().hostKubeconfig, [
        '-n',
        NAMESPACE,
        'get',
        plural,
        '-l',
        `${LABEL_MANAGED_BY}=${NAME}`,
        '-o',
        'json',
      ]),
    ).items;
  const virtualName = (o: any): string => o.metadata.annotations?.[ANNOTATION_OBJECT_NAME];
  /** The virtual names of the host copies of `plural`. */
  const syncedOnHost = async (plural: string) => (await syncedObjects(plural)).map(virtualName).sort();
  const instanceProcesses = () => processesNaming(platform().instanceDir(NAMESPACE, NAME));

  test('an admin makes the template, the project with alice as a member, and her key', async () => {
    const admin = platform().adminKubeconfig;
    await ok(
      admin,
      ['apply', '-f', '-'],
      `apiVersion: management.platform/v1
kind: VirtualClusterTemplate
metadata:
  name: small
spec:
  description: ConfigMaps, Services and Endpoints synced to the host
  config: |
    sync:
      toHost:
        configMaps: {enabled: true}
        services: {enabled: true}
        endpoints: {enabled: true}
---
apiVersion: management.platform/v1
kind: User
metadata:
  name: alice
spec:
  username: alice
---
apiVersion: management.platform/v1
kind: Project
metadata:
  name: ${PROJECT}
spec:
  owner:
    user: admin
  members:
    - kind: User
      name: alice
      clusterRole: platform-project-user
`,
    );
    const key = JSON.parse(
      await ok(
        admin,
        ['create', '-o', 'json', '-f', '-'],
        'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  generateName: alice-\nspec:\n  user: alice\n  ttl: 86400\n',
      ),
    );
    aliceKey = key.spec.key;
    expect(aliceKey).toMatch(/^pak_/);
    alice = platform().kubeconfig('alice', aliceKey);
  });

  test('alice creates an instance from the template through the management API; it becomes Ready', async () => {
    // Her RoleBinding comes with the project's namespace, her rights with the roles'
    // aggregation a moment later: until then the gateway answers 403.
    const created = await waitForValue(
      'alice allowed to create the instance in her project',
      () =>
        run(
          alice,
          ['apply', '-f', '-'],
          `apiVersion: management.platform/v1
kind: VirtualClusterInstance
metadata:
  name: ${NAME}
  namespace: ${NAMESPACE}
spec:
  templateRef:
    name: small
`,
        ),
      (r) => r.code === 0 || !r.stderr.includes('Forbidden'),
      60_000,
    );
    expect(created.code, created.stderr).toBe(0);
    const ready = await waitCondition('Ready', 'True', 'the instance Ready');
    expect(conditionOf(ready, 'Provisioned')).toMatchObject({ status: 'True', reason: 'Provisioned' });
    expect(conditionOf(ready, 'Syncing')).toMatchObject({ status: 'True' });
    expect(
      instanceProcesses()
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
  });

  test('her kubeconfig from the management API: kubectl makes a Namespace, ConfigMap, Service and Endpoints; the synced kinds appear on the host', async () => {
    // The first user of a fresh virtual cluster: bound by its admin credential, which a project
    // editor reads through the project's space (ADR 0029).
    const space = platform().kubeconfig(
      'alice-space',
      aliceKey,
      `${platform().url}/kubernetes/project/${PROJECT}/space/${NAMESPACE}`,
    );
    const adminKubeconfig = await ok(space, [
      '-n',
      NAMESPACE,
      'get',
      'secret',
      `vc-${NAME}-admin`,
      '-o',
      'jsonpath={.data.kubeconfig}',
    ]);
    const virtualAdmin = join(platform().dir, 'virtual-admin.kubeconfig');
    writeFileSync(virtualAdmin, Buffer.from(adminKubeconfig, 'base64'), { mode: 0o600 });
    await ok(virtualAdmin, [
      'create',
      'clusterrolebinding',
      'alice-admin',
      '--clusterrole=cluster-admin',
      '--user=alice',
    ]);

    const answer = await call(
      `${platform().url}/kubernetes/management/apis/management.platform/v1/namespaces/${NAMESPACE}/virtualclusterinstances/${NAME}/kubeconfig`,
      {
        method: 'POST',
        token: aliceKey,
        dispatcher: new Agent({ connect: { ca: platform().caPem } }),
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'management.platform/v1',
          kind: 'VirtualClusterInstanceKubeConfig',
          spec: {},
        }),
      },
    );
    expect(answer.status, answer.text).toBe(201);
    aliceVirtual = join(platform().dir, 'alice-virtual.kubeconfig');
    writeFileSync(aliceVirtual, answer.json.status.kubeConfig, { mode: 0o600 });
    expect(answer.json.status.kubeConfig).toContain(
      `${platform().url}/kubernetes/project/${PROJECT}/virtualcluster/${NAME}`,
    );

    // The binding may take a moment to reach the virtual apiserver's RBAC cache.
    await waitForValue(
      'alice allowed to create namespaces in the virtual cluster',
      () => run(aliceVirtual, ['auth', 'can-i', 'create', 'namespaces']),
      (r) => r.stdout.trim() === 'yes',
      30_000,
    );
    const created = await ok(
      aliceVirtual,
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: Namespace
metadata:
  name: apps
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: apps
data:
  mode: before
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: apps
spec:
  ports:
    - port: 80
      targetPort: 8080
---
apiVersion: v1
kind: Endpoints
metadata:
  name: web
  namespace: apps
subsets:
  - addresses:
      - ip: 10.1.2.3
    ports:
      - port: 8080
`,
    );
    expect(created).toContain('namespace/apps created');
    for (const plural of SYNCED)
      await waitForValue(
        `the ${plural} on the host`,
        () => syncedOnHost(plural),
        (names) => names.includes(plural === 'configmaps' ? 'settings' : 'web'),
        60_000,
      );
  });

  test('the platform restarted: the virtual cluster and its objects are still there, and it syncs', async () => {
    const before = instanceProcesses().map((p) => p.pid);
    await platform().stop('SIGTERM');
    await waitForValue(
      'no process of the instance left',
      async () => instanceProcesses(),
      (p) => p.length === 0,
    );
    expect(existsSync(join(platform().instanceDir(NAMESPACE, NAME), 'data'))).toBe(true);
    await platform().start();
    // Through the gateway's proxy with her kubeconfig: the control plane runs again.
    await waitForValue(
      'the ConfigMap through the proxy after the restart',
      () => run(aliceVirtual, ['-n', 'apps', 'get', 'configmap', 'settings', '-o', 'jsonpath={.data.mode}']),
      (r) => r.code === 0 && r.stdout === 'before',
      300_000,
    );
    await waitCondition('Ready', 'True', 'the instance Ready again');
    expect(instanceProcesses().filter((p) => before.includes(p.pid))).toEqual([]);
    expect(await ok(aliceVirtual, ['-n', 'apps', 'get', 'service,endpoints', '-o', 'name'])).toBe(
      'service/web\nendpoints/web\n',
    );
    expect(await syncedOnHost('configmaps')).toContain('settings');
    expect(await syncedOnHost('services')).toContain('web');
    expect(await syncedOnHost('endpoints')).toContain('web');
    await ok(aliceVirtual, ['-n', 'apps', 'create', 'configmap', 'after', '--from-literal=mode=after']);
    await waitForValue(
      'a ConfigMap made after the restart on the host',
      () => syncedOnHost('configmaps'),
      (n) => n.includes('after'),
      60_000,
    );
  });

  /** The virtual names of the host copies of `plural` labelled as sleeping. */
  const sleepingOnHost = async (plural: string) =>
    (await syncedObjects(plural))
      .filter((o) => o.metadata.labels?.[SLEEPING_LABEL] === 'true')
      .map(virtualName)
      .sort();
  const eventReasons = async () =>
    (
      JSON.parse(
        await ok(platform().hostKubeconfig, ['-n', NAMESPACE, 'get', 'events.events.k8s.io', '-o', 'json']),
      ).items as any[]
    )
      .filter((e) => e.regarding?.name === NAME)
      .map((e) => e.reason);

  test('sleep: with a short sleepAfter it falls asleep; its processes end, its storage and host copies stay, labelled sleeping', async () => {
    const dataDir = join(platform().instanceDir(NAMESPACE, NAME), 'data');
    await ok(alice, [
      '-n',
      NAMESPACE,
      'patch',
      'virtualclusterinstance',
      NAME,
      '--type=merge',
      '-p',
      '{"spec":{"sleepAfter":15}}',
    ]);
    const asleep = await waitCondition('Sleeping', 'True', 'the instance asleep', 180_000);
    expect(conditionOf(asleep, 'Sleeping')).toMatchObject({ reason: 'Inactive' });
    expect(conditionOf(asleep, 'Sleeping').lastTransitionTime).toBe(asleep.status.sleepingSince);
    expect(conditionOf(asleep, 'Ready')).toMatchObject({ status: 'False', reason: 'Sleeping' });
    expect(conditionOf(asleep, 'Provisioned')).toMatchObject({ status: 'True' });
    await waitForValue(
      'no process of the instance left',
      async () => instanceProcesses(),
      (p) => p.length === 0,
      60_000,
    );
    expect(existsSync(dataDir)).toBe(true);
    await waitForValue(
      'the host copies labelled sleeping',
      async () => [
        ...(await sleepingOnHost('configmaps')),
        ...(await sleepingOnHost('services')),
        ...(await sleepingOnHost('endpoints')),
      ],
      (names) => ['after', 'settings', 'web', 'web'].every((n) => names.includes(n)),
      60_000,
    );
    expect(await syncedOnHost('configmaps')).toEqual(expect.arrayContaining(['after', 'settings']));
    expect(await eventReasons()).toContain('FellAsleep');
  });

  test('a kubectl request through the proxy wakes it and sees the objects made before the sleep', async () => {
    // One request, no retry: the gateway holds it until the instance is awake and Ready.
    const read = await run(aliceVirtual, [
      '--request-timeout=240s',
      '-n',
      'apps',
      'get',
      'configmaps',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}={.data.mode}{"\\n"}{end}',
    ]);
    expect(read.code, read.stderr).toBe(0);
    // Awake for the steps after this one (a patch of the management API is no activity).
    await ok(alice, [
      '-n',
      NAMESPACE,
      'patch',
      'virtualclusterinstance',
      NAME,
      '--type=merge',
      '-p',
      '{"spec":{"sleepAfter":0}}',
    ]);
    expect(read.stdout).toContain('settings=before\n');
    expect(read.stdout).toContain('after=after\n');
    const awake = await waitCondition('Ready', 'True', 'the instance Ready after the wake');
    expect(conditionOf(awake, 'Sleeping')).toMatchObject({ status: 'False', reason: 'Awake' });
    expect(
      instanceProcesses()
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
    await waitForValue(
      'the sleeping label gone from the host copies',
      async () => [...(await sleepingOnHost('configmaps')), ...(await sleepingOnHost('services'))],
      (names) => names.length === 0,
      60_000,
    );
    expect(await eventReasons()).toEqual(expect.arrayContaining(['FellAsleep', 'Woke']));
  });

  test('alice deletes it: nothing of it remains on the host or on disk', async () => {
    const uid = (await instance()).metadata.uid;
    await ok(alice, ['-n', NAMESPACE, 'delete', 'virtualclusterinstance', NAME, '--timeout=180s']);
    expect(await instance()).toBeUndefined();
    const host = platform().hostKubeconfig;
    for (const plural of SYNCED) expect(await syncedOnHost(plural)).toEqual([]);
    // Every object in the namespace that names the instance (the Secrets, the syncer's identity).
    const left = JSON.parse(
      await ok(host, [
        '-n',
        NAMESPACE,
        'get',
        'secrets,serviceaccounts,rolebindings,configmaps,services,endpoints',
        '-o',
        'json',
      ]),
    ).items as any[];
    expect(
      left
        .filter(
          (o) =>
            o.metadata.name.includes(`vc-${NAME}`) ||
            o.metadata.labels?.[INSTANCE_UID_LABEL] === uid ||
            o.metadata.labels?.[LABEL_MANAGED_BY] === NAME ||
            (o.metadata.ownerReferences ?? []).some((r: any) => r.uid === uid),
        )
        .map((o) => `${o.kind}/${o.metadata.name}`),
    ).toEqual([]);
    expect(instanceProcesses()).toEqual([]);
    expect(existsSync(platform().instanceDir(NAMESPACE, NAME))).toBe(false);
  });
});
