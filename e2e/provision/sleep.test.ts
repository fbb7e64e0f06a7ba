// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { existsSync } from 'node:fs';
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import {
  LAST_ACTIVITY_ANNOTATION,
  SLEEP_REQUESTED_ANNOTATION,
  SLEEPING_LABEL,
} from '../../src/api/labels.ts';
import { resources } from '../../src/api/resources.ts';
import { secretNameOf } from '../../src/provision/control-plane.ts';
import { KubeClient, objectPath } from '../../src/runtime/kube-client.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { uniqueName } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { useProvisioningEnv } from '../support/provisioned-instances.ts';
import { eventually } from '../support/wait.ts';

/**
 * Issue 27, sleep mode, the controller's side (the gateway's is e2e/access-proxy/wake*.test.ts):
 * an operator with the processes provisioner on real apiservers. An instance whose `sleepAfter`
 * runs out falls asleep (Sleeping=True since status.sleepingSince, Ready=False Sleeping, its
 * processes gone, what its syncer wrote on the host kept and labelled sleeping); a later
 * last-activity annotation wakes it with its objects and without the label; the sleep-requested
 * annotation puts it to sleep at once; `deleteAfter` deletes it and nothing of it remains. A
 * change the syncer carries counts as activity: of two instances with the same `sleepAfter`, the
 * one kept busy with changes is awake when the idle one has fallen asleep, and falls asleep once
 * the changes stop. Judged by conditions and their order, never by how long anything took.
 */

const BOUND_MS = 300_000;

describe('sleep mode of a provisioned VirtualClusterInstance (processes provisioner)', {
  timeout: 900_000,
}, () => {
  const env = useProvisioningEnv('provision-sleep', {
    description: 'e2e provision/sleep',
    config: stringify({ sync: { toHost: { configMaps: { enabled: true } } } }),
  });
  const { kc, namespace } = env;
  const client = new KubeClient(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const name = uniqueName('vc');

  const patch = (instance: string, body: Record<string, unknown>) =>
    client.request({
      method: 'PATCH',
      path: objectPath(resources.virtualClusterInstances, namespace(), instance),
      body,
      contentType: 'application/merge-patch+json',
    });
  const annotate = (instance: string, annotation: string) =>
    patch(instance, { metadata: { annotations: { [annotation]: new Date().toISOString() } } });
  const condition = (instance: string, type: string) => env.condition(instance, type);
  /** The host ConfigMaps the instance's syncer wrote. */
  const hostCopies = async (instance: string) =>
    (
      await client.request<{ items: any[] }>({
        method: 'GET',
        path: `/api/v1/namespaces/${namespace()}/configmaps`,
        query: { labelSelector: `${LABEL_MANAGED_BY}=${instance}` },
      })
    ).items.filter((item) => item.metadata.annotations?.[ANNOTATION_OBJECT_NAME]);
  const eventReasons = async (instance: string) =>
    (
      await client.request<{ items: any[] }>({
        method: 'GET',
        path: `/apis/events.k8s.io/v1/namespaces/${namespace()}/events`,
      })
    ).items
      .filter((e) => e.regarding?.name === instance)
      .map((e) => e.reason as string);
  const waitCondition = (instance: string, type: string, status: string, what: string) =>
    env.waitCondition(instance, type, status, BOUND_MS, what);

  beforeAll(() => {
    env.startOperator('operator', ['--no-leader-elect']);
  });

  test('with a short sleepAfter it falls asleep: Sleeping=True since sleepingSince, processes gone, host copies kept and labelled', async () => {
    await env.createInstance(name);
    await waitCondition(name, 'Ready', 'True', 'the instance Ready');
    const virtual = await env.virtualCore(name);
    await virtual.createNamespace({ body: { metadata: { name: 'apps' } } });
    await virtual.createNamespacedConfigMap({
      namespace: 'apps',
      body: { metadata: { name: 'settings' }, data: { mode: 'before' } },
    });
    await eventually(
      async () =>
        (await hostCopies(name)).some((c) => c.metadata.annotations[ANNOTATION_OBJECT_NAME] === 'settings'),
      60_000,
      'the ConfigMap copied to the host',
    );
    const running = processesNaming(env.instanceDir(name));
    expect(running.map((p) => p.component).sort()).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
    ]);
    expect(await condition(name, 'Sleeping')).toMatchObject({ status: 'False', reason: 'Awake' });

    await patch(name, { spec: { sleepAfter: 3 } });
    await waitCondition(name, 'Sleeping', 'True', 'the instance asleep');
    const instance = await env.readInstance(name);
    const sleeping = await condition(name, 'Sleeping');
    expect(sleeping).toMatchObject({ reason: 'Inactive' });
    expect(instance.status.sleepingSince).toBe(sleeping.lastTransitionTime);
    expect(Date.parse(instance.status.lastActivity)).toBeLessThan(Date.parse(instance.status.sleepingSince));
    expect(await condition(name, 'Ready')).toMatchObject({ status: 'False', reason: 'Sleeping' });
    expect(await condition(name, 'Provisioned')).toMatchObject({ status: 'True' });
    expect(processesNaming(env.instanceDir(name))).toEqual([]);
    expect(existsSync(env.instanceDir(name))).toBe(true);
    const copies = await hostCopies(name);
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) expect(copy.metadata.labels[SLEEPING_LABEL]).toBe('true');
    expect(await eventReasons(name)).toContain('FellAsleep');
  });

  test('a later last-activity annotation wakes it: Ready again, its objects there, the label gone', async () => {
    // Never again for inactivity: what follows is woken and put to sleep by the annotations alone.
    await patch(name, { spec: { sleepAfter: 0 } });
    const asleep = await env.readInstance(name);
    expect(asleep.metadata.generation).toBeGreaterThan(1);
    await eventually(
      async () => (await env.readInstance(name)).status.observedGeneration === asleep.metadata.generation,
      BOUND_MS,
      'the new sleepAfter observed',
    );
    expect(await condition(name, 'Sleeping')).toMatchObject({ status: 'True' });

    await annotate(name, LAST_ACTIVITY_ANNOTATION);
    await waitCondition(name, 'Ready', 'True', 'the instance awake and Ready');
    expect(await condition(name, 'Sleeping')).toMatchObject({ status: 'False', reason: 'Awake' });
    expect((await env.readInstance(name)).status.sleepingSince).toBeUndefined();
    const virtual = await env.virtualCore(name);
    const settings = await virtual.readNamespacedConfigMap({ namespace: 'apps', name: 'settings' });
    expect(settings.data).toEqual({ mode: 'before' });
    expect(processesNaming(env.instanceDir(name)).length).toBe(3);
    // Unlabelled before it was marked awake.
    const copies = await hostCopies(name);
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) expect(copy.metadata.labels?.[SLEEPING_LABEL]).toBeUndefined();
    expect(await eventReasons(name)).toContain('Woke');
    // It syncs again: a change made now reaches the host.
    await virtual.replaceNamespacedConfigMap({
      namespace: 'apps',
      name: 'settings',
      body: { metadata: { name: 'settings' }, data: { mode: 'after' } },
    });
    await eventually(
      async () => (await hostCopies(name)).some((c) => c.data?.mode === 'after'),
      60_000,
      'the change copied to the host',
    );
  });

  test('the sleep-requested annotation puts an awake instance to sleep at once', async () => {
    expect(await condition(name, 'Sleeping')).toMatchObject({ status: 'False' });
    await annotate(name, SLEEP_REQUESTED_ANNOTATION);
    await waitCondition(name, 'Sleeping', 'True', 'the instance asleep on request');
    expect(await condition(name, 'Sleeping')).toMatchObject({ reason: 'SleepRequested' });
    expect(processesNaming(env.instanceDir(name))).toEqual([]);
    for (const copy of await hostCopies(name)) expect(copy.metadata.labels[SLEEPING_LABEL]).toBe('true');
  });

  test('asleep across an operator restart: the new operator keeps it asleep and starts nothing', async () => {
    await env.stopOperator('operator');
    env.startOperator('operator', ['--no-leader-elect']);
    // A spec change the new operator must observe: proof that it has looked at the instance.
    await patch(name, { spec: { deleteAfter: 0 } });
    const generation = (await env.readInstance(name)).metadata.generation;
    await eventually(
      async () => (await env.readInstance(name)).status.observedGeneration === generation,
      BOUND_MS,
      'the restarted operator observing the instance',
    );
    expect(await condition(name, 'Sleeping')).toMatchObject({ status: 'True', reason: 'SleepRequested' });
    expect(await condition(name, 'Ready')).toMatchObject({ status: 'False', reason: 'Sleeping' });
    expect(processesNaming(env.instanceDir(name))).toEqual([]);
  });

  test('deleteAfter deletes it, asleep, and nothing of it remains', async () => {
    await patch(name, { spec: { deleteAfter: 2 } });
    await eventually(
      async () => (await env.readInstance(name)) === undefined,
      BOUND_MS,
      'the instance deleted',
    );
    expect(await eventReasons(name)).toEqual(
      expect.arrayContaining(['DeletedForInactivity', 'Deprovisioned']),
    );
    expect(await hostCopies(name)).toEqual([]);
    expect(processesNaming(env.instanceDir(name))).toEqual([]);
    expect(existsSync(env.instanceDir(name))).toBe(false);
    for (const role of ['admin', 'pki'] as const)
      await expect(
        core.readNamespacedSecret({ namespace: namespace(), name: secretNameOf(name, role) }),
      ).rejects.toMatchObject({ code: 404 });
  });

  test('a stalled instance (its spec.config invalid) falls asleep by time all the same', async () => {
    const stalled = uniqueName('stalled');
    await env.createInstance(stalled, env.custom, { config: 'sync: [' });
    await waitCondition(stalled, 'Stalled', 'True', 'the instance Stalled on its config');
    expect(await condition(stalled, 'Provisioned')).toMatchObject({ status: 'True' });
    expect(processesNaming(env.instanceDir(stalled)).length).toBe(3);
    // Activity now, then a sleepAfter: the stalled reconcile of that change is not yet due to
    // sleep, and nothing changes the instance afterwards; only its due time brings the sleep.
    await annotate(stalled, LAST_ACTIVITY_ANNOTATION);
    await patch(stalled, { spec: { sleepAfter: 8 } });
    await waitCondition(stalled, 'Sleeping', 'True', 'the stalled instance asleep');
    expect(processesNaming(env.instanceDir(stalled))).toEqual([]);
    await env.deleteInstance(stalled);
    await eventually(async () => (await env.readInstance(stalled)) === undefined, BOUND_MS, 'it gone');
  });

  test('a change the syncer carries is activity: the busy one stays awake while the idle one falls asleep', async () => {
    const busy = uniqueName('busy');
    const idle = uniqueName('idle');
    await env.createInstance(busy);
    await env.createInstance(idle);
    await waitCondition(busy, 'Ready', 'True', 'the busy instance Ready');
    await waitCondition(idle, 'Ready', 'True', 'the idle instance Ready');
    const virtual = await env.virtualCore(busy);
    await virtual.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'counter' }, data: { n: '0' } },
    });
    // Changes in the busy one's virtual cluster, each carried to the host, one after another.
    let changing = true;
    let changes = 0;
    const changer = (async () => {
      while (changing) {
        changes += 1;
        await virtual.replaceNamespacedConfigMap({
          namespace: 'default',
          name: 'counter',
          body: { metadata: { name: 'counter' }, data: { n: String(changes) } },
        });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    try {
      for (const instance of [busy, idle]) await patch(instance, { spec: { sleepAfter: 10 } });
      await waitCondition(idle, 'Sleeping', 'True', 'the idle instance asleep');
      expect(await condition(busy, 'Sleeping')).toMatchObject({ status: 'False', reason: 'Awake' });
      expect(await eventReasons(busy)).not.toContain('FellAsleep');
      const carried = (await hostCopies(busy)).find(
        (c) => c.metadata.annotations[ANNOTATION_OBJECT_NAME] === 'counter',
      );
      expect(Number(carried?.data?.n)).toBeGreaterThan(1);
    } finally {
      changing = false;
      await changer;
    }
    // Left alone, it falls asleep too.
    await waitCondition(busy, 'Sleeping', 'True', 'the busy instance asleep once left alone');
    for (const instance of [busy, idle]) {
      await env.deleteInstance(instance);
      await eventually(
        async () => (await env.readInstance(instance)) === undefined,
        BOUND_MS,
        `${instance} gone`,
      );
    }
  });
});
