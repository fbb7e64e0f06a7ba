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
 *
 * The parts: `setting.ts` (sizes, where the syncers run from), `objects.ts` (what is written, the
 * host watches), `syncer.ts` (the syncer process, its host identity, the waits on it),
 * `phases.ts` (each phase, returning what it measured), `report.ts` (the figures).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { ensureControlPlaneBinary } from '../../src/dev/binaries.ts';
import { ControlPlane } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { withBenchCluster } from '../support.ts';
import { type Bench, coldSync, directWrites, liveSync, propagation } from './phases.ts';
import { report } from './report.ts';

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
      const bench: Bench = { hostCluster, virtualCluster, host, virtual, dir, configPath, children };
      const direct = await directWrites(bench);
      const live = await liveSync(bench);
      const changes = await propagation(bench, live);
      const cold = await coldSync(bench);
      report({ direct, live, propagation: changes, cold });
      host.close();
      virtual.close();
    });
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await virtualPlane?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
