/**
 * Virtual cluster syncer throughput and latency. In one run, against a host apiserver of its own
 * (withBenchCluster) and a second apiserver acting as the virtual cluster:
 *
 *   raw (baseline): a plain client creates the 2N host objects (N Services, N Endpoints) that N
 *                   selector-less (headless) virtual Services with their Endpoints translate to, directly
 *                   in the host, at concurrency C;
 *   live sync:      `platform syncer` runs (its own process); N Services and N Endpoints are
 *                   created in the virtual cluster at the same concurrency; the clock stops when
 *                   all 2N host objects exist (so it includes the 2N virtual writes, as the
 *                   projection benchmark includes its SharedSecrets);
 *   cold sync:      a fresh syncer into an empty host namespace, the N pairs already in the
 *                   virtual cluster; from process start to all 2N host objects;
 *   latency:        at steady state, L sequential changes of one Endpoints address each: time
 *                   from the virtual write until a host watch sees the translated change (p50,
 *                   p99), beside the same measure for a direct host write (write -> watch).
 * Prints each figure beside its baseline and the ratio (reportFigure); also the CPU time per
 * synced object of the syncer and of both apiservers (beside the host apiserver's per object
 * written directly), the host writes the syncer made (2N is the floor), host writes during 5 s
 * at rest (0 expected) and the syncer's peak RSS.
 *
 *   bench/sync/run.sh [N=2000] [C=32] [L=200]     (BENCH_SMOKE=1: N=60, C=8, L=10)
 *   SYNC_BENCH_CPU_PROF=<dir>: the syncers write V8 CPU profiles there (node --cpu-prof).
 *
 * The syncer runs as it is installed: compiled to dist/ (tsc -p tsconfig.build.json, done here
 * first), not through the tsx loader a checkout's bin/platform.js uses, whose start-up alone
 * (seconds of transpiling) is no cost of the syncer. SYNC_BENCH_RUNTIME=tsx runs it from the
 * sources instead (the smoke run does, to spare the build).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import pino from 'pino';
import { stringify } from 'yaml';
import { apiserverWrites } from '../../e2e/support/apiserver-writes.ts';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import {
  desiredSyncerIdentity,
  SYNCER_CLUSTER_ROLES,
  syncerServiceAccountName,
} from '../../src/controllers/virtualcluster/identity.ts';
import { ensureControlPlaneBinary } from '../../src/dev/binaries.ts';
import { type Cluster, ControlPlane, freePort } from '../../src/dev/controlplane.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { applyObject } from '../../src/runtime/apply.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { collectionPath, KubeClient, objectPath, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { syncedKinds } from '../../src/sync/controllers/syncer.ts';
import { hostNameLong, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import type { KubeObject, SyncContext } from '../../src/sync/sync-context.ts';
import { translateToHost } from '../../src/sync/translate.ts';
import { clientGoCost, reportPeakRss } from '../memory/measure.ts';
import {
  benchMode,
  type PlatformRuntime,
  platformEntry,
  pool,
  quantile,
  reportFigure,
  withBenchCluster,
} from '../support.ts';

const smoke = benchMode() === 'smoke';
const N = Number(process.argv[2] ?? (smoke ? 60 : 2000));
const C = Number(process.argv[3] ?? (smoke ? 8 : 32));
const L = Number(process.argv[4] ?? (smoke ? 10 : 200));
const VC = 'bench-vc';
/** No wait of this benchmark lasts longer (it fails instead). */
const WAIT_LIMIT_MS = 10 * 60_000;
const REST_MS = smoke ? 1000 : 5000;
const RUNTIME: PlatformRuntime =
  (process.env.SYNC_BENCH_RUNTIME ?? (smoke ? 'tsx' : 'dist')) === 'tsx' ? 'tsx' : 'dist';
const ENTRY = platformEntry(RUNTIME);

/** CPU time (user + system) a process has used so far, in milliseconds (Linux /proc). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

const services: ResourceRef = { group: '', version: 'v1', plural: 'services', namespaced: true };
const endpoints: ResourceRef = { group: '', version: 'v1', plural: 'endpoints', namespaced: true };

const ip = (i: number, generation = 0) =>
  `10.${100 + (generation % 150)}.${Math.floor(i / 250)}.${(i % 250) + 1}`;

function pair(i: number, generation = 0): { service: KubeObject; endpoints: KubeObject } {
  const name = `svc-${i}`;
  return {
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: 'apps', labels: { app: name } },
      // Headless: the bench apiservers' service range is a /24, too small for 2,000 ClusterIPs.
      spec: { clusterIP: 'None', ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
    },
    endpoints: {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, namespace: 'apps', labels: { app: name } },
      subsets: [
        {
          addresses: [
            { ip: ip(i, generation), targetRef: { kind: 'Pod', name: `${name}-0`, namespace: 'apps' } },
          ],
          ports: [{ name: 'http', port: 8080 }],
        },
      ],
    },
  };
}

const quiet = pino({ level: 'silent' });

/** Counts the objects of a host namespace (labelled managed-by) and reports changes. */
function watchHost(api: KubeClient, resource: ResourceRef, namespace: string) {
  const informer = new Informer<KubernetesObject>({
    api,
    resource,
    namespace,
    labelSelector: `${LABEL_MANAGED_BY}=${VC}`,
    clock: systemClock,
    random: systemRandom,
    logger: quiet,
  });
  const listeners = new Set<(obj: KubeObject) => void>();
  const notify = (obj: KubernetesObject) => {
    for (const listener of listeners) listener(obj as unknown as KubeObject);
  };
  informer.addEventHandler({ onAdd: notify, onUpdate: (_old, obj) => notify(obj) });
  informer.start();
  return {
    informer,
    count: () => informer.store.size,
    /** Resolves when an object satisfying `check` is seen (now or later). */
    until(check: (obj: KubeObject) => boolean): Promise<void> {
      return new Promise((resolve) => {
        const listener = (obj: KubeObject) => {
          if (!check(obj)) return;
          listeners.delete(listener);
          resolve();
        };
        listeners.add(listener);
        for (const obj of informer.store.list()) listener(obj as unknown as KubeObject);
      });
    },
  };
}

/**
 * The host kubeconfig the syncer runs with, by `BENCH_SYNC_HOST`:
 * - `syncer` (default): as the operator runs it, its own ServiceAccount in the namespace it syncs
 *   into, bound there to the syncer roles of the kinds it syncs, with a TokenRequest token;
 * - `platform`: one ServiceAccount of the platform's namespace allowed the syncer's verbs in every
 *   namespace, as syncers ran before they had identities of their own (the operator's);
 * - `admin`: the cluster admin (system:masters, which API Priority and Fairness exempts).
 * The first two are treated alike by the apiserver's fairness (both are ServiceAccounts); the
 * comparison of the identities is made between them, on one commit.
 */
async function syncerHostKubeconfig(host: KubeClient, cluster: Cluster, namespace: string, dir: string) {
  const mode = process.env.BENCH_SYNC_HOST ?? 'syncer';
  if (mode === 'admin') return cluster.kubeconfigPath;
  await installPlatformRoles(host);
  let account: { namespace: string; name: string };
  if (mode === 'platform') {
    account = { namespace: 'platform-system', name: 'platform-operator' };
    await host
      .request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: account.namespace } },
      })
      .catch(() => {});
    await applyObject(
      host,
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: account },
      { fieldManager: 'bench', force: true },
    );
    for (const role of Object.values(SYNCER_CLUSTER_ROLES))
      await applyObject(
        host,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: `bench-${role}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ kind: 'ServiceAccount', ...account }],
        } as KubernetesObject,
        { fieldManager: 'bench', force: true },
      );
  } else {
    const instance = { metadata: { namespace, name: VC, uid: `bench-${namespace}` } };
    const identity = desiredSyncerIdentity(instance, namespace, syncedKinds(loadSyncConfig({})));
    for (const object of [identity.serviceAccount, ...identity.roleBindings])
      await applyObject(host, object, { fieldManager: 'bench', force: true });
    account = { namespace, name: syncerServiceAccountName(instance) };
  }
  const answer = await host.request<{ status: { token: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${account.namespace}/serviceaccounts/${account.name}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  });
  const path = join(dir, `${namespace}.kubeconfig`);
  writeFileSync(
    path,
    kubeConfigYaml({
      name: 'host',
      server: cluster.server,
      caPem: cluster.caPem,
      credentials: { token: answer.status.token },
    }),
    { mode: 0o600 },
  );
  return path;
}

function spawnSyncer(virtual: Cluster, hostKubeconfig: string, namespace: string, configPath: string) {
  const profileDir = process.env.SYNC_BENCH_CPU_PROF;
  return freePort().then((healthPort) => {
    const child = spawn(
      process.execPath,
      [
        '--no-node-snapshot',
        ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
        ENTRY,
        'syncer',
        '--virtual-kubeconfig',
        virtual.kubeconfigPath,
        '--host-kubeconfig',
        hostKubeconfig,
        '--host-namespace',
        namespace,
        '--name',
        VC,
        '--config',
        configPath,
        '--health-port',
        String(healthPort),
        '--health-host',
        '127.0.0.1',
        '--max-concurrent-reconciles',
        String(Math.max(1, Math.round(C / 2))),
        '--log-level',
        'warn',
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    return { child, healthPort };
  });
}

/** Fails (instead of waiting on) when the syncer died or the wait passes WAIT_LIMIT_MS. */
function assertAlive(child: ChildProcess | undefined, started: number, what: string): void {
  if (child && child.exitCode !== null)
    throw new Error(`the syncer exited (${child.exitCode}) while waiting for ${what}`);
  if (performance.now() - started > WAIT_LIMIT_MS) throw new Error(`gave up waiting for ${what}`);
}

async function waitReady(port: number, child: ChildProcess): Promise<void> {
  const started = performance.now();
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    assertAlive(child, started, 'the syncer to be ready');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function waitFor(check: () => boolean, what: string, child?: ChildProcess): Promise<void> {
  const started = performance.now();
  while (!check()) {
    assertAlive(child, started, what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits for a promise, failing instead when the syncer dies or the wait is too long. */
async function bounded<T>(promise: Promise<T>, what: string, child?: ChildProcess): Promise<T> {
  let done = false;
  const guard = (async () => {
    const started = performance.now();
    while (!done) {
      assertAlive(child, started, what);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    return await Promise.race([promise, guard.then(() => promise)]);
  } finally {
    done = true;
  }
}

function peakRssMiB(child: ChildProcess): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'platform-bench-sync-'));
  let virtualPlane: ControlPlane | undefined;
  try {
    await withBenchCluster('sync', async (hostCluster, hostKc) => {
      // The virtual cluster: an apiserver of its own (own etcd), as a real one would be.
      virtualPlane = await ControlPlane.start({
        stateDir: join(dir, 'virtual'),
        binary: await ensureControlPlaneBinary(() => {}),
      });
      const virtualCluster = await virtualPlane.startCluster({ name: 'virtual' });
      const virtualKc = new KubeConfig();
      virtualKc.loadFromFile(virtualCluster.kubeconfigPath);
      const host = new KubeClient(hostKc);
      const virtual = new KubeClient(virtualKc);
      for (const name of ['bench-raw', 'bench-sync', 'bench-cold'])
        await host.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
      await virtual.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: 'apps' } },
      });
      const configPath = join(dir, 'vcluster.yaml');
      writeFileSync(configPath, stringify({}));

      // Baseline: the very host objects the syncer will write, written directly.
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
      const rawApiserverCpu = cpuMs(hostCluster.apiServer.pid);
      const rawStart = performance.now();
      await pool(raw.length, C, (i) => {
        const obj = raw[i]!;
        return host.request({
          method: 'POST',
          path: collectionPath(obj.kind === 'Service' ? services : endpoints, 'bench-raw'),
          body: obj,
        });
      });
      const rawMs = performance.now() - rawStart;
      await waitFor(() => rawServices.count() >= N && rawEndpoints.count() >= N, 'the direct writes seen');
      const rawApiserverCpuMs = cpuMs(hostCluster.apiServer.pid) - rawApiserverCpu;
      await Promise.all([rawServices.informer.stop(), rawEndpoints.informer.stop()]);

      // Live sync: syncer ready first, then the virtual objects are created.
      const live = await spawnSyncer(
        virtualCluster,
        await syncerHostKubeconfig(host, hostCluster, 'bench-sync', dir),
        'bench-sync',
        configPath,
      );
      children.push(live.child);
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
      const liveStart = performance.now();
      await pool(2 * N, C, (j) => {
        const { service, endpoints: eps } = pair(j >> 1);
        const obj = j % 2 === 0 ? service : eps;
        return virtual.request({
          method: 'POST',
          path: collectionPath(obj.kind === 'Service' ? services : endpoints, 'apps'),
          body: obj,
        });
      });
      await waitFor(
        () => liveServices.count() >= N && liveEndpoints.count() >= N,
        'the live sync',
        live.child,
      );
      const liveMs = performance.now() - liveStart;
      const liveCpu = {
        syncer: cpuMs(live.child.pid) - cpuBefore.syncer,
        host: cpuMs(hostCluster.apiServer.pid) - cpuBefore.host,
        virtual: cpuMs(virtualCluster.apiServer.pid) - cpuBefore.virtual,
      };
      const syncWrites = (await apiserverWrites(hostCluster, ['events', 'leases'])) - writesBefore;
      await new Promise((r) => setTimeout(r, REST_MS));
      const restWrites =
        (await apiserverWrites(hostCluster, ['events', 'leases'])) - writesBefore - syncWrites;
      const liveRss = peakRssMiB(live.child);
      // What the syncer caches: the virtual Services and Endpoints, and their host copies.
      const hostCopies = { namespace: 'bench-sync', labelSelector: `${LABEL_MANAGED_BY}=${VC}` };
      const liveClientGo = await clientGoCost(
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

      // Latency at steady state: one address change at a time.
      const samples: number[] = [];
      for (let k = 0; k < L; k++) {
        const i = (k * 7) % N;
        const next = ip(i, k + 1);
        const seen = liveEndpoints.until(
          (obj) =>
            (obj.metadata as { name?: string }).name === hostNameLong(`svc-${i}`, 'apps', VC) &&
            JSON.stringify(obj.subsets).includes(`"${next}"`),
        );
        const started = performance.now();
        await virtual.request({
          method: 'PATCH',
          path: objectPath(endpoints, 'apps', `svc-${i}`),
          body: pair(i, k + 1).endpoints,
          contentType: 'application/merge-patch+json',
        });
        await bounded(seen, 'a propagated change', live.child);
        samples.push(performance.now() - started);
      }
      const rawWatch = watchHostAll(host, 'bench-raw');
      await rawWatch.informer.waitForSync();
      const baseline: number[] = [];
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
        await host.request({
          method: 'PATCH',
          path: objectPath(endpoints, 'bench-raw', name),
          body: { subsets: [{ addresses: [{ ip: next }], ports: [{ name: 'http', port: 8080 }] }] },
          contentType: 'application/merge-patch+json',
        });
        await bounded(seen, 'a direct change seen by the watch');
        baseline.push(performance.now() - started);
      }
      live.child.kill('SIGTERM');
      if (live.child.exitCode === null && live.child.signalCode === null)
        await bounded(new Promise((resolve) => live.child.once('exit', resolve)), 'the live syncer to stop');

      // The floor of any syncer: the virtual write seen through a watch of the virtual cluster,
      // then the host write seen through the host's watch, made one after the other by a bare
      // client (what a syncer must do at the least, without any work of its own in between).
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
      await Promise.all([
        liveServices.informer.stop(),
        liveEndpoints.informer.stop(),
        rawWatch.informer.stop(),
        virtualWatch.informer.stop(),
      ]);

      // Cold sync: a fresh syncer catching up with N existing pairs into an empty namespace.
      const coldServices = watchHost(host, services, 'bench-cold');
      const coldEndpoints = watchHost(host, endpoints, 'bench-cold');
      await Promise.all([coldServices.informer.waitForSync(), coldEndpoints.informer.waitForSync()]);
      const coldKubeconfig = await syncerHostKubeconfig(host, hostCluster, 'bench-cold', dir);
      const coldStart = performance.now();
      const cold = await spawnSyncer(virtualCluster, coldKubeconfig, 'bench-cold', configPath);
      children.push(cold.child);
      let readyMs = 0;
      void waitReady(cold.healthPort, cold.child).then(
        () => {
          readyMs = performance.now() - coldStart;
        },
        () => {},
      );
      await waitFor(
        () => coldServices.count() >= N && coldEndpoints.count() >= N,
        'the cold sync',
        cold.child,
      );
      const coldMs = performance.now() - coldStart;
      const coldSyncerCpu = cpuMs(cold.child.pid);
      cold.child.kill('SIGTERM');
      await Promise.all([coldServices.informer.stop(), coldEndpoints.informer.stop()]);

      samples.sort((a, b) => a - b);
      baseline.sort((a, b) => a - b);
      const objects = 2 * N;
      console.log(
        `sync benchmark: N=${N} Services + N Endpoints (${objects} host objects), concurrency ${C}, syncer from ${RUNTIME === 'tsx' ? 'the sources (tsx)' : 'dist/ (compiled)'}`,
      );
      const identities: Record<string, string> = {
        syncer: 'its own ServiceAccount in its namespace (as in the operator)',
        platform: "one platform ServiceAccount allowed everywhere (the operator's, before)",
        admin: 'the cluster admin',
      };
      console.log(`  the syncer acts on the host as ${identities[process.env.BENCH_SYNC_HOST ?? 'syncer']}`);
      const raw2 = { name: 'direct host writes', value: rawMs / 1000, unit: 's' };
      reportFigure({
        name: `live sync of ${objects} objects (includes the ${objects} virtual writes)`,
        value: liveMs / 1000,
        unit: 's',
        baseline: raw2,
        ratio: liveMs / rawMs,
        goal: '<= 1.5x',
      });
      reportFigure({
        name: `cold sync of ${objects} objects (process start to all written; ready after ${(readyMs / 1000).toFixed(2)} s)`,
        value: coldMs / 1000,
        unit: 's',
        baseline: raw2,
        ratio: coldMs / rawMs,
        goal: '<= 1.3x',
      });
      for (const [label, q] of [
        ['p50', 0.5],
        ['p99', 0.99],
      ] as const) {
        reportFigure({
          name: `Endpoints change propagation ${label} (virtual write -> host watch, ${L} changes)`,
          value: quantile(samples, q),
          unit: 'ms',
          baseline: { name: 'direct host write -> watch', value: quantile(baseline, q), unit: 'ms' },
          ratio: quantile(samples, q) / quantile(baseline, q),
          ...(label === 'p99' ? { goal: '<= 1.5x' } : {}),
        });
        reportFigure({
          name: `Endpoints change propagation ${label}, against the floor of any syncer`,
          value: quantile(samples, q),
          unit: 'ms',
          baseline: {
            name: 'a virtual write seen by a watch, then a host write seen by a watch (bare client)',
            value: quantile(floor, q),
            unit: 'ms',
          },
          ratio: quantile(samples, q) / quantile(floor, q),
        });
      }
      const perObject = (ms: number) => ms / objects;
      reportFigure({
        name: 'host apiserver CPU per object, live sync',
        value: perObject(liveCpu.host),
        unit: 'ms/object',
        baseline: {
          name: 'per object written directly',
          value: perObject(rawApiserverCpuMs),
          unit: 'ms/object',
        },
        ratio: liveCpu.host / rawApiserverCpuMs,
      });
      reportFigure({
        name: 'syncer CPU per synced object, live sync',
        value: perObject(liveCpu.syncer),
        unit: 'ms/object',
      });
      reportFigure({
        name: 'syncer CPU per synced object, cold sync (start included)',
        value: perObject(coldSyncerCpu),
        unit: 'ms/object',
      });
      reportFigure({
        name: "virtual apiserver CPU per object, live sync (its 2N writes and the syncer's reads)",
        value: perObject(liveCpu.virtual),
        unit: 'ms/object',
      });
      reportFigure({
        name: 'host writes by the syncer',
        value: syncWrites,
        unit: 'writes',
        baseline: { name: 'the floor (2N)', value: objects, unit: 'writes' },
        ratio: syncWrites / objects,
        goal: '1x',
      });
      reportFigure({
        name: `host writes at rest (${REST_MS / 1000} s after the sync)`,
        value: restWrites,
        unit: 'writes',
        goal: '0',
      });
      reportPeakRss('syncer peak RSS (live run)', liveRss, liveClientGo);
      host.close();
      virtual.close();
    });
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await virtualPlane?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The raw namespace holds objects with the same labels; watch it the same way. */
function watchHostAll(api: KubeClient, namespace: string) {
  return watchHost(api, endpoints, namespace);
}

await main();
