import type { KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { isApiError, ResourceVersionExpiredError } from '../../src/runtime/errors.ts';
import { Informer, type InformerOptions } from '../../src/runtime/informer.ts';
import {
  collectionPath,
  KubeClient,
  type ObjectList,
  objectPath,
  type ResourceRef,
} from '../../src/runtime/kube-client.ts';
import type { WatchEvent } from '../../src/runtime/kube-watch.ts';
import { hostKubeConfig, uniqueName, useNamespace } from '../support/cluster.ts';
import {
  apiserverAddress,
  captureLogger,
  compactEtcd,
  eventually,
  TcpProxy,
  throughProxy,
} from './support.ts';

const configMaps: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };
/**
 * kube-apiserver serves core Events from etcd, not from its watch cache (which answers an old
 * resourceVersion with the current state as ADDED events while it has not rotated); so after an
 * etcd compaction a watch of Events from an old resourceVersion reliably gets 410 Gone.
 */
const coreEvents: ResourceRef = { group: '', version: 'v1', plural: 'events', namespaced: true };
const quiet = pino({ level: 'silent' });
const fastBackoff = { initialMs: 50, maxMs: 500, factor: 2, jitter: 0.5 };

describe('Informer against a real apiserver', () => {
  const namespace = useNamespace('informer');
  const admin = new KubeClient(hostKubeConfig());
  const cleanups: Array<() => Promise<void>> = [];
  // Each test watches only its own objects.
  let testLabel = '';
  beforeEach(() => {
    testLabel = uniqueName('t');
    resource = configMaps;
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  function informer(api: KubeClient, extra: Partial<InformerOptions> = {}): Informer {
    const inf = new Informer({
      api,
      resource,
      namespace: namespace(),
      labelSelector: `test=${testLabel}`,
      clock: systemClock,
      random: systemRandom,
      logger: quiet,
      backoff: fastBackoff,
      ...extra,
    });
    cleanups.push(() => inf.stop());
    return inf;
  }

  const label = () => ({ test: testLabel });
  let resource = configMaps;
  const create = (name: string, data: Record<string, string> = {}) =>
    admin.request<KubernetesObject>({
      method: 'POST',
      path: collectionPath(resource, namespace()),
      body:
        resource === coreEvents
          ? {
              apiVersion: 'v1',
              kind: 'Event',
              metadata: { name, labels: label() },
              involvedObject: { kind: 'Namespace', name: namespace(), namespace: namespace() },
              reason: 'Test',
              message: JSON.stringify(data),
            }
          : { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels: label() }, data },
    });
  const update = (name: string, data: Record<string, string>) =>
    admin.request<KubernetesObject>({
      method: 'PATCH',
      path: objectPath(resource, namespace(), name),
      body: resource === coreEvents ? { message: JSON.stringify(data) } : { data },
      contentType: 'application/merge-patch+json',
    });
  const remove = (name: string) =>
    admin.request({ method: 'DELETE', path: objectPath(resource, namespace(), name) });

  /** The apiserver's current state as key -> resourceVersion. */
  async function serverState(): Promise<Map<string, string>> {
    const list = await admin.request<ObjectList<KubernetesObject>>({
      method: 'GET',
      path: collectionPath(resource, namespace()),
      query: {
        labelSelector: Object.entries(label())
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      },
    });
    return new Map(
      list.items.map((item) => [`${namespace()}/${item.metadata!.name}`, item.metadata!.resourceVersion!]),
    );
  }

  function cacheState(inf: Informer): Map<string, string> {
    return new Map(
      inf.store
        .list()
        .map((obj) => [`${obj.metadata!.namespace}/${obj.metadata!.name}`, obj.metadata!.resourceVersion!]),
    );
  }

  async function expectCacheToConverge(inf: Informer): Promise<void> {
    let expected = new Map<string, string>();
    await eventually(
      async () => {
        expected = await serverState();
        const actual = cacheState(inf);
        return actual.size === expected.size && [...expected].every(([key, rv]) => actual.get(key) === rv);
      },
      30_000,
      'the cache to equal the apiserver state',
    );
    expect(cacheState(inf)).toEqual(expected);
  }

  it('lists existing objects, then sees create, update and delete; hasSynced after the list', async () => {
    await create('before');
    const inf = informer(admin);
    const seen: string[] = [];
    inf.addEventHandler({
      onAdd: (obj) => seen.push(`add ${obj.metadata?.name}`),
      onUpdate: (_old, obj) =>
        seen.push(`update ${obj.metadata?.name} ${(obj as { data?: { v?: string } }).data?.v}`),
      onDelete: (obj, unknown) => seen.push(`delete ${obj.metadata?.name} ${unknown}`),
    });
    expect(inf.hasSynced()).toBe(false);
    inf.start();
    expect(await inf.waitForSync()).toBe(true);
    expect(inf.hasSynced()).toBe(true);
    expect(inf.store.get(`${namespace()}/before`)?.kind).toBe('ConfigMap');

    await create('x');
    await update('x', { v: '2' });
    await remove('x');
    await eventually(() => seen.length >= 4, 10_000, 'four events');
    expect(seen).toEqual(['add before', 'add x', 'update x 2', 'delete x false']);
    expect(inf.store.get(`${namespace()}/x`)).toBeUndefined();
  });

  it('converges to the apiserver state after the connection is reset while objects change', async () => {
    const proxy = await TcpProxy.start(apiserverAddress(hostKubeConfig()));
    cleanups.push(() => proxy.close());
    for (const name of ['keep', 'change', 'drop']) await create(name);
    const inf = informer(new KubeClient(throughProxy(hostKubeConfig(), proxy)));
    const deleted: Array<[string, boolean]> = [];
    inf.addEventHandler({ onDelete: (obj, unknown) => deleted.push([obj.metadata!.name!, unknown]) });
    inf.start();
    await inf.waitForSync();

    proxy.refuse(true);
    proxy.breakAll();
    await update('change', { v: 'changed while disconnected' });
    await remove('drop');
    await create('new');
    proxy.refuse(false);

    await expectCacheToConverge(inf);
    expect(deleted).toEqual([['drop', false]]);
  });

  it('relists on 410 Gone when resuming from an expired resourceVersion, with synthetic deletes', async () => {
    resource = coreEvents;
    const proxy = await TcpProxy.start(apiserverAddress(hostKubeConfig()));
    cleanups.push(() => proxy.close());
    for (const name of ['a', 'b']) await create(name);
    const { logger, records } = captureLogger();
    const inf = informer(new KubeClient(throughProxy(hostKubeConfig(), proxy)), { logger });
    const deleted: Array<[string, boolean]> = [];
    inf.addEventHandler({ onDelete: (obj, unknown) => deleted.push([obj.metadata!.name!, unknown]) });
    inf.start();
    await inf.waitForSync();

    proxy.refuse(true);
    proxy.breakAll();
    // While it cannot watch, change the world and compact etcd past its position, so that only
    // a relist can bring the cache back.
    await remove('a');
    await update('b', { v: '2' });
    await create('c');
    await compactEtcd();
    proxy.refuse(false);

    await expectCacheToConverge(inf);
    expect(records.some((r) => r.msg === 'resourceVersion expired, relisting')).toBe(true);
    // The deletion happened while no watch was running: known only from the relist.
    expect(deleted).toEqual([['a', true]]);
  });

  it('a watch from a too-old resourceVersion fails with 410 (status or ERROR event)', async () => {
    resource = coreEvents;
    await create('compacted');
    // Watch from the update's resourceVersion (so the apiserver has each event's previous state)
    // after etcd compacted past it.
    const old = await update('compacted', { v: '2' });
    await create('later');
    await create('later-still');
    await compactEtcd();
    let failure: unknown;
    const seen: string[] = [];
    try {
      const query = { resourceVersion: old.metadata!.resourceVersion, timeoutSeconds: 10 };
      const stream = await admin.watch(
        collectionPath(coreEvents, namespace()),
        query,
        (event: WatchEvent) => {
          seen.push(JSON.stringify(event).slice(0, 300));
          if (event.type === 'ERROR' && (event.object as { code?: number }).code === 410) {
            throw new ResourceVersionExpiredError('expired');
          }
        },
      );
      await stream.done;
    } catch (err) {
      failure = err;
    }
    expect(
      failure instanceof ResourceVersionExpiredError || isApiError(failure, 410),
      `${failure} ${seen.join('\n')}`,
    ).toBe(true);
  });

  it('the watchdog restarts a stream that went silent (half-open connection) and catches up', async () => {
    const proxy = await TcpProxy.start(apiserverAddress(hostKubeConfig()));
    cleanups.push(() => proxy.close());
    await create('w');
    const { logger, records } = captureLogger();
    const inf = informer(new KubeClient(throughProxy(hostKubeConfig(), proxy)), {
      logger,
      minWatchTimeoutSeconds: 1,
      watchdogSlackMs: 500,
    });
    inf.start();
    await inf.waitForSync();
    // Let the watch connect, then swallow everything on it, including the server's close.
    // Two connections: the pooled one the list used and the watch.
    await eventually(() => proxy.connections >= 2, 10_000, 'an open watch connection');
    proxy.silenceAll();
    await update('w', { v: 'while silent' });

    await expectCacheToConverge(inf);
    expect(records.some((r) => (r.err as { type?: string } | undefined)?.type === 'WatchStalledError')).toBe(
      true,
    );
  });
});
