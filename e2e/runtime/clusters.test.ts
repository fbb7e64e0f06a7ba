import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/controlplane.ts';
import { KubeClient, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { hostKubeConfig, kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { eventually } from './support.ts';

const quiet = pino({ level: 'silent' });
const configMaps: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };

/** A client of an address nobody listens on: its informers never sync. */
async function unreachableClient(): Promise<KubeClient> {
  const kc = hostKubeConfig();
  const cluster = kc.getCurrentCluster()!;
  const port = await freePort();
  kc.clusters = [{ ...cluster, server: `https://127.0.0.1:${port}` }];
  return new KubeClient(kc);
}

describe('one Manager, several clusters', () => {
  const startCluster = useExtraClusters();
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const startManager = async () => {
    const manager = new Manager({
      api: new KubeClient(hostKubeConfig()),
      logger: quiet,
    });
    await manager.start();
    cleanups.push(() => manager.stop());
    return manager;
  };

  it('a cluster and a controller added while the manager runs reconcile objects of that cluster; removed, they stop', async () => {
    const manager = await startManager();
    const other = await startCluster({ name: uniqueName('other') });
    const otherCore = kubeConfigFor(other).makeApiClient(CoreV1Api);
    const namespace = uniqueName('multi');
    await otherCore.createNamespace({ body: { metadata: { name: namespace } } });

    const cluster = manager.addCluster({ name: 'other', api: new KubeClient(kubeConfigFor(other)) });
    const informer = cluster.informer(configMaps, { namespace });
    const reconciled: string[] = [];
    const controller = manager
      .controller({
        name: 'other-configmaps',
        needLeaderElection: false,
        reconcile: async (key) => {
          reconciled.push(key);
        },
      })
      .watchPrimary(informer);
    expect(await controller.whenStarted(AbortSignal.timeout(60_000))).toBe(true);
    expect(manager.readiness()).toEqual({ ready: true, notReady: [] });

    await otherCore.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'one' } } });
    await eventually(() => reconciled.includes(`${namespace}/one`), 30_000, 'the other cluster reconciled');
    // The object exists in the other cluster only: the manager's own cluster has no such namespace.
    expect(manager.cluster.informer(configMaps, { namespace }).store.size).toBe(0);

    await manager.removeController(controller);
    await manager.removeCluster(cluster);
    expect(controller.isRunning).toBe(false);
    expect(() => manager.controller({ name: 'other-configmaps', reconcile: async () => {} })).not.toThrow();
  });

  it('readiness counts the caches of the clusters that say so, and forgets a removed cluster', async () => {
    const manager = await startManager();
    await eventually(() => manager.readiness().ready, 60_000, 'the own cluster to sync');

    const tenant = manager.addCluster({ name: 'tenant', api: await unreachableClient(), readiness: false });
    tenant.informer(configMaps);
    const required = manager.addCluster({ name: 'required', api: await unreachableClient() });
    required.informer(configMaps);
    const report = manager.readiness();
    expect(report.ready).toBe(false);
    expect(report.notReady).toEqual(['cluster required: informer v1/configmaps not synced']);

    await manager.removeCluster(required);
    expect(manager.readiness()).toEqual({ ready: true, notReady: [] });
    const removeCheck = manager.addReadinessCheck(() => ({ ready: false, notReady: ['starting'] }));
    expect(manager.readiness()).toEqual({ ready: false, notReady: ['starting'] });
    removeCheck();
    expect(manager.readiness().ready).toBe(true);
    await manager.removeCluster(tenant);
  });
});
