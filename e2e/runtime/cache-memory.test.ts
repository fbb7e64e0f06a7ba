import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { KubernetesObject, V1ConfigMap } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { applyObject } from '../../src/runtime/apply.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Cluster } from '../../src/runtime/cluster.ts';
import {
  collectionPath,
  KubeClient,
  type ObjectList,
  type ResourceRef,
} from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';

/**
 * What the caches keep, against a real apiserver (issue 28): managedFields only of the field
 * managers a consumer names, one instance of each object for the store and every handler, and no
 * answer of the API client kept alive by the kept-alive socket that carried it.
 */

const configMaps: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };
const quiet = pino({ level: 'silent' });

/** A full collection (node's gc, exposed for this process only). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

describe('cache content', () => {
  const namespace = useNamespace('cache-memory');
  const admin = new KubeClient(hostKubeConfig());
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  /** A ConfigMap written by two field managers, so its managedFields has an entry of each. */
  async function twoManagerConfigMap(name: string): Promise<void> {
    const base = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: namespace() } };
    await applyObject(
      admin,
      { ...base, data: { a: '1' } },
      { fieldManager: 'writer-one', resource: configMaps },
    );
    await applyObject(
      admin,
      { ...base, data: { b: '2' } },
      { fieldManager: 'writer-two', resource: configMaps },
    );
  }

  function startedCluster(): Cluster {
    const cluster = new Cluster({
      name: 'host',
      api: new KubeClient(hostKubeConfig()),
      clock: systemClock,
      random: systemRandom,
      logger: quiet,
    });
    cleanups.push(() => cluster.stop());
    cluster.start();
    return cluster;
  }

  const managersOf = (obj: KubernetesObject | undefined) =>
    obj?.metadata?.managedFields?.map((entry) => entry.manager);

  it('keeps managedFields only of the managers a consumer names, listed or watched, in caches of their own', async () => {
    await twoManagerConfigMap('listed');
    const cluster = startedCluster();
    const plain = cluster.informer<V1ConfigMap>(configMaps, { namespace: namespace() });
    const keeping = cluster.informer<V1ConfigMap>(
      configMaps,
      { namespace: namespace() },
      {},
      { managedFieldsOf: ['writer-two'] },
    );
    expect(keeping).not.toBe(plain);
    expect(
      cluster.informer(configMaps, { namespace: namespace() }, {}, { managedFieldsOf: ['writer-two'] }),
    ).toBe(keeping);
    for (const informer of [plain, keeping])
      expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
    await twoManagerConfigMap('watched');
    await expect
      .poll(() => keeping.store.get(`${namespace()}/watched`)?.data?.b, { timeout: 60_000 })
      .toBe('2');
    await expect
      .poll(() => plain.store.get(`${namespace()}/watched`)?.data?.b, { timeout: 60_000 })
      .toBe('2');

    for (const name of ['listed', 'watched']) {
      const key = `${namespace()}/${name}`;
      expect(plain.store.get(key)?.metadata).not.toHaveProperty('managedFields');
      expect(managersOf(keeping.store.get(key))).toEqual(['writer-two']);
      // The rest of the object is the apiserver's.
      expect(plain.store.get(key)?.metadata?.uid).toBeTruthy();
      expect(plain.store.get(key)?.data).toEqual({ a: '1', b: '2' });
    }
    const server = await admin.request<KubernetesObject>({
      method: 'GET',
      path: `${collectionPath(configMaps, namespace())}/listed`,
    });
    expect(managersOf(server)).toEqual(expect.arrayContaining(['writer-one', 'writer-two']));
  });

  it('hands every handler the instance the store holds', async () => {
    const cluster = startedCluster();
    const informer = cluster.informer<V1ConfigMap>(configMaps, { namespace: namespace() });
    expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
    const seen: Array<[V1ConfigMap, V1ConfigMap]> = [];
    const record = (obj: V1ConfigMap) =>
      seen.push([obj, informer.store.get(`${namespace()}/${obj.metadata?.name}`)!]);
    for (let i = 0; i < 2; i++)
      informer.addEventHandler({ onAdd: record, onUpdate: (_, obj) => record(obj) });
    await twoManagerConfigMap('shared');
    await expect
      .poll(() => seen.filter(([obj]) => obj.metadata?.name === 'shared' && obj.data?.b === '2').length, {
        timeout: 60_000,
      })
      .toBe(2);
    for (const [handed, stored] of seen) expect(handed).toBe(stored);
  });

  it('keeps no answer alive through the kept-alive socket that carried it', async () => {
    await twoManagerConfigMap('answer');
    const api = new KubeClient(hostKubeConfig());
    cleanups.push(async () => api.close());
    const answerRef = await api
      .request<ObjectList<KubernetesObject>>({ method: 'GET', path: collectionPath(configMaps, namespace()) })
      .then((answer) => {
        expect(answer.items.length).toBeGreaterThan(0);
        return new WeakRef(answer);
      });
    // A WeakRef holds its target until the current job ends.
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    expect(answerRef.deref()).toBeUndefined();
    // The socket is still there to be reused.
    await api.request({ method: 'GET', path: collectionPath(configMaps, namespace()) });
  });
});
