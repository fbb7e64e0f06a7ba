import type { ChildProcess } from 'node:child_process';
import { apiserverWrites } from '../../e2e/support/apiserver-writes.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { collectionPath, type KubeClient, objectPath } from '../../src/runtime/kube-client.ts';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { hostNameLong, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import type { KubeObject, SyncContext } from '../../src/sync/sync-context.ts';
import { translateToHost } from '../../src/sync/translate.ts';
import { type ClientGoCost, clientGoCost } from '../memory/measure.ts';
import { pool } from '../support.ts';
import { endpoints, type HostWatch, ip, pair, services, watchHost, watchHostAll } from './objects.ts';
import { C, L, N, REST_MS, VC, WAIT_LIMIT_MS } from './setting.ts';
import {
  bounded,
  cpuMs,
  peakRssMiB,
  spawnSyncer,
  syncerHostKubeconfig,
  waitFor,
  waitReady,
} from './syncer.ts';

/**
 * The phases of the sync benchmark, in the order `run.ts` runs them, each returning what it
 * measured: the direct writes (the baseline), the live sync, the propagation of changes (and its
 * baselines), the cold sync.
 */

/** Both clusters, the directory the syncers' files go to, and the syncers started (stopped by the caller). */
export interface Bench {
  readonly hostCluster: Cluster;
  readonly virtualCluster: Cluster;
  readonly host: KubeClient;
  readonly virtual: KubeClient;
  readonly dir: string;
  readonly configPath: string;
  readonly children: ChildProcess[];
}

/** The direct writes: the very host objects the syncer will write, written straight into `bench-raw`. */
export async function directWrites(bench: Bench): Promise<{ ms: number; apiserverCpuMs: number }> {
  const { host, hostCluster } = bench;
  const ctx: SyncContext = { vclusterName: VC, hostNamespace: 'bench-raw', config: loadSyncConfig({}) };
  const raw: KubeObject[] = [];
  for (let i = 0; i < N; i++) {
    const { service, endpoints: eps } = pair(i);
    for (const obj of [service, eps]) {
      const withUid = structuredClone(obj);
      (withUid.metadata as Record<string, unknown>).uid =
        `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      raw.push(translateToHost(String(obj.kind), withUid, null, ctx));
    }
  }
  // The same observer as in the sync phases (a watch of the namespace's objects), so that both
  // sides pay the apiserver for it; the clock stops when every write has returned.
  const rawServices = watchHost(host, services, 'bench-raw');
  const rawEndpoints = watchHost(host, endpoints, 'bench-raw');
  await Promise.all([rawServices.informer.waitForSync(), rawEndpoints.informer.waitForSync()]);
  const apiserverCpu = cpuMs(hostCluster.apiServer.pid);
  const started = performance.now();
  await pool(raw.length, C, (i) => {
    const obj = raw[i]!;
    return host.request({
      method: 'POST',
      path: collectionPath(obj.kind === 'Service' ? services : endpoints, 'bench-raw'),
      body: obj,
    });
  });
  const ms = performance.now() - started;
  await waitFor(() => rawServices.count() >= N && rawEndpoints.count() >= N, 'the direct writes seen');
  const apiserverCpuMs = cpuMs(hostCluster.apiServer.pid) - apiserverCpu;
  await Promise.all([rawServices.informer.stop(), rawEndpoints.informer.stop()]);
  return { ms, apiserverCpuMs };
}

export interface LiveSync {
  /** The syncer, still running (the propagation phase measures it). */
  readonly child: ChildProcess;
  readonly services: HostWatch;
  readonly endpoints: HostWatch;
  readonly ms: number;
  /** CPU milliseconds of the syncer and both apiservers during the sync. */
  readonly cpu: { readonly syncer: number; readonly host: number; readonly virtual: number };
  readonly writes: number;
  readonly restWrites: number;
  readonly peakRssMiB: number;
  readonly clientGo: ClientGoCost;
}

/** Live sync: the syncer ready first, then the virtual objects are created. */
export async function liveSync(bench: Bench): Promise<LiveSync> {
  const { host, virtual, hostCluster, virtualCluster } = bench;
  const live = await spawnSyncer(
    virtualCluster,
    await syncerHostKubeconfig(host, hostCluster, 'bench-sync', bench.dir),
    'bench-sync',
    bench.configPath,
  );
  bench.children.push(live.child);
  await waitReady(live.healthPort, live.child);
  const liveServices = watchHost(host, services, 'bench-sync');
  const liveEndpoints = watchHost(host, endpoints, 'bench-sync');
  await Promise.all([liveServices.informer.waitForSync(), liveEndpoints.informer.waitForSync()]);
  const writesBefore = await apiserverWrites(hostCluster, ['events', 'leases']);
  const cpuBefore = {
    syncer: cpuMs(live.child.pid),
    host: cpuMs(hostCluster.apiServer.pid),
    virtual: cpuMs(virtualCluster.apiServer.pid),
  };
  const started = performance.now();
  await pool(2 * N, C, (j) => {
    const { service, endpoints: eps } = pair(j >> 1);
    const obj = j % 2 === 0 ? service : eps;
    return virtual.request({
      method: 'POST',
      path: collectionPath(obj.kind === 'Service' ? services : endpoints, 'apps'),
      body: obj,
    });
  });
  await waitFor(() => liveServices.count() >= N && liveEndpoints.count() >= N, 'the live sync', live.child);
  const ms = performance.now() - started;
  const cpu = {
    syncer: cpuMs(live.child.pid) - cpuBefore.syncer,
    host: cpuMs(hostCluster.apiServer.pid) - cpuBefore.host,
    virtual: cpuMs(virtualCluster.apiServer.pid) - cpuBefore.virtual,
  };
  const writes = (await apiserverWrites(hostCluster, ['events', 'leases'])) - writesBefore;
  await new Promise((r) => setTimeout(r, REST_MS));
  const restWrites = (await apiserverWrites(hostCluster, ['events', 'leases'])) - writesBefore - writes;
  const peakRss = peakRssMiB(live.child);
  // What the syncer caches: the virtual Services and Endpoints, and their host copies.
  const hostCopies = { namespace: 'bench-sync', labelSelector: `${LABEL_MANAGED_BY}=${VC}` };
  const clientGo = await clientGoCost(
    [
      {
        kubeconfig: virtualCluster.kubeconfigPath,
        targets: [{ resource: services }, { resource: endpoints }],
      },
      {
        kubeconfig: hostCluster.kubeconfigPath,
        targets: [
          { resource: services, ...hostCopies },
          { resource: endpoints, ...hostCopies },
        ],
      },
    ],
    WAIT_LIMIT_MS,
  );
  return {
    child: live.child,
    services: liveServices,
    endpoints: liveEndpoints,
    ms,
    cpu,
    writes,
    restWrites,
    peakRssMiB: peakRss,
    clientGo,
  };
}

/** Milliseconds from a write until a watch saw its change, one sample per change. */
export interface Propagation {
  /** Through the syncer: virtual write -> host watch. */
  readonly synced: number[];
  /** A direct host write -> the host watch. */
  readonly direct: number[];
  /** The floor of any syncer: a virtual write seen by a watch, then a host write seen by a watch. */
  readonly floor: number[];
}

/**
 * Latency at steady state, one address change at a time: through the live syncer, then its two
 * baselines (the live syncer stopped before the floor). Stops the live sync's watches.
 */
export async function propagation(bench: Bench, live: LiveSync): Promise<Propagation> {
  const synced = await syncedChanges(bench, live);
  const rawWatch = watchHostAll(bench.host, 'bench-raw');
  await rawWatch.informer.waitForSync();
  const direct = await directChanges(bench, rawWatch);
  live.child.kill('SIGTERM');
  if (live.child.exitCode === null && live.child.signalCode === null)
    await bounded(new Promise((resolve) => live.child.once('exit', resolve)), 'the live syncer to stop');
  const floor = await floorChanges(bench, rawWatch);
  await Promise.all([
    live.services.informer.stop(),
    live.endpoints.informer.stop(),
    rawWatch.informer.stop(),
  ]);
  return { synced, direct, floor };
}

/** Changes of virtual Endpoints, each timed until the syncer's host copy holds it. */
async function syncedChanges(bench: Bench, live: LiveSync): Promise<number[]> {
  const samples: number[] = [];
  for (let k = 0; k < L; k++) {
    const i = (k * 7) % N;
    const next = ip(i, k + 1);
    const seen = live.endpoints.until(
      (obj) =>
        (obj.metadata as { name?: string }).name === hostNameLong(`svc-${i}`, 'apps', VC) &&
        JSON.stringify(obj.subsets).includes(`"${next}"`),
    );
    const started = performance.now();
    await bench.virtual.request({
      method: 'PATCH',
      path: objectPath(endpoints, 'apps', `svc-${i}`),
      body: pair(i, k + 1).endpoints,
      contentType: 'application/merge-patch+json',
    });
    await bounded(seen, 'a propagated change', live.child);
    samples.push(performance.now() - started);
  }
  return samples;
}

/** Changes of the directly written host Endpoints, each timed until the host watch sees it. */
async function directChanges(bench: Bench, rawWatch: HostWatch): Promise<number[]> {
  const samples: number[] = [];
  for (let k = 0; k < L; k++) {
    const i = (k * 7) % N;
    const next = ip(i, k + 1);
    const name = hostNameLong(`svc-${i}`, 'apps', VC);
    const seen = rawWatch.until(
      (obj) =>
        (obj.metadata as { name?: string }).name === name &&
        JSON.stringify(obj.subsets).includes(`"${next}"`),
    );
    const started = performance.now();
    await bench.host.request({
      method: 'PATCH',
      path: objectPath(endpoints, 'bench-raw', name),
      body: { subsets: [{ addresses: [{ ip: next }], ports: [{ name: 'http', port: 8080 }] }] },
      contentType: 'application/merge-patch+json',
    });
    await bounded(seen, 'a direct change seen by the watch');
    samples.push(performance.now() - started);
  }
  return samples;
}

/**
 * The floor of any syncer: the virtual write seen through a watch of the virtual cluster, then
 * the host write seen through the host's watch, made one after the other by a bare client (what a
 * syncer must do at the least, without any work of its own in between).
 */
async function floorChanges(bench: Bench, rawWatch: HostWatch): Promise<number[]> {
  const { virtual, host } = bench;
  await virtual.request({
    method: 'POST',
    path: '/api/v1/namespaces',
    body: { metadata: { name: 'bench-floor' } },
  });
  const FLOOR_OBJECTS = Math.min(20, N);
  for (let j = 0; j < FLOOR_OBJECTS; j++) {
    const eps = pair(j).endpoints;
    await virtual.request({
      method: 'POST',
      path: collectionPath(endpoints, 'bench-floor'),
      body: {
        ...eps,
        metadata: { name: `floor-${j}`, namespace: 'bench-floor', labels: { [LABEL_MANAGED_BY]: VC } },
      },
    });
  }
  const virtualWatch = watchHost(virtual, endpoints, 'bench-floor');
  await virtualWatch.informer.waitForSync();
  const floor: number[] = [];
  for (let k = 0; k < L; k++) {
    const j = k % FLOOR_OBJECTS;
    const i = (k * 7) % N;
    const next = ip(i, L + k + 1);
    const name = hostNameLong(`svc-${i}`, 'apps', VC);
    const subsets = [{ addresses: [{ ip: next }], ports: [{ name: 'http', port: 8080 }] }];
    const seenVirtual = virtualWatch.until(
      (obj) =>
        (obj.metadata as { name?: string }).name === `floor-${j}` &&
        JSON.stringify(obj.subsets).includes(`"${next}"`),
    );
    const started = performance.now();
    await virtual.request({
      method: 'PATCH',
      path: objectPath(endpoints, 'bench-floor', `floor-${j}`),
      body: { subsets },
      contentType: 'application/merge-patch+json',
    });
    await bounded(seenVirtual, 'a virtual change seen by the watch');
    const seenHost = rawWatch.until(
      (obj) =>
        (obj.metadata as { name?: string }).name === name &&
        JSON.stringify(obj.subsets).includes(`"${next}"`),
    );
    await host.request({
      method: 'PATCH',
      path: objectPath(endpoints, 'bench-raw', name),
      body: { subsets },
      contentType: 'application/merge-patch+json',
    });
    await bounded(seenHost, 'the host change seen by the watch');
    floor.push(performance.now() - started);
  }
  await virtualWatch.informer.stop();
  return floor;
}

/** Cold sync: a fresh syncer catching up with N existing pairs into an empty namespace. */
export async function coldSync(bench: Bench): Promise<{ ms: number; readyMs: number; syncerCpuMs: number }> {
  const { host, hostCluster } = bench;
  const coldServices = watchHost(host, services, 'bench-cold');
  const coldEndpoints = watchHost(host, endpoints, 'bench-cold');
  await Promise.all([coldServices.informer.waitForSync(), coldEndpoints.informer.waitForSync()]);
  const coldKubeconfig = await syncerHostKubeconfig(host, hostCluster, 'bench-cold', bench.dir);
  const started = performance.now();
  const cold = await spawnSyncer(bench.virtualCluster, coldKubeconfig, 'bench-cold', bench.configPath);
  bench.children.push(cold.child);
  let readyMs = 0;
  void waitReady(cold.healthPort, cold.child).then(
    () => {
      readyMs = performance.now() - started;
    },
    () => {},
  );
  await waitFor(() => coldServices.count() >= N && coldEndpoints.count() >= N, 'the cold sync', cold.child);
  const ms = performance.now() - started;
  const syncerCpuMs = cpuMs(cold.child.pid);
  cold.child.kill('SIGTERM');
  await Promise.all([coldServices.informer.stop(), coldEndpoints.informer.stop()]);
  return { ms, readyMs, syncerCpuMs };
}
