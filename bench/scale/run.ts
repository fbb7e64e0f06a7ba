/**
 * The scale curve. In one run, against a control plane of its own:
 *
 * 1. The operator (sharedsecret and accesskey controllers, its own process) at N access keys,
 *    N Users and N SharedSecrets (one access rule each: N Roles and N RoleBindings projected),
 *    for each N of the steps (default 1,000, 10,000, 50,000). Per step the objects are grown to N
 *    with the operator stopped, then a fresh operator starts; printed per step: start to /readyz,
 *    start to every SharedSecret Ready (the new ones projected), resident memory and per cached
 *    object (and the slope between steps: memory linear in objects keeps it flat), and the p50/p99
 *    time from a change of a SharedSecret's access rule to its reconcile (Ready for that generation).
 * 2. The last step's operator (its virtualcluster controller) then syncs 1, 10, then 30 virtual
 *    clusters (real apiservers on the same etcd, ControlPlane.startCluster) of P Services and
 *    Endpoints each: once every instance is synced, resident memory and idle CPU per syncer against
 *    the same operator syncing none (goals: an idle syncer <= 1% of a core and <= 5 MiB beyond its
 *    objects, at the curve's memory per further cached object).
 *
 *   bench/scale/run.sh [STEPS=1000,10000,50000] [VCS=1,10,30] [P=150] [L=100]
 *   (BENCH_SMOKE=1: STEPS=60,180, VCS=1,2, P=10, L=5, the operator from the sources)
 *
 * The operator runs compiled to dist/ (as installed) at full size; SCALE_BENCH_RUNTIME=tsx runs it
 * from the sources. SCALE_CPU_PROF=<dir>: the operators write V8 CPU profiles there. Every wait is
 * bounded and fails at once when the operator died.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { benchMode, type PlatformRuntime, platformEntry, withBenchCluster } from '../support.ts';
import { operatorCurve, perObjectKiB, SCALE_NAMESPACE } from './curve.ts';
import { syncerCurve } from './syncers.ts';

const smoke = benchMode() === 'smoke';
const list = (text: string | undefined, fallback: number[]) =>
  text ? text.split(',').map(Number) : fallback;
const STEPS = list(process.argv[2], smoke ? [60, 180] : [1_000, 10_000, 50_000]);
const VIRTUAL_CLUSTERS = list(process.argv[3], smoke ? [1, 2] : [1, 10, 30]);
const PAIRS = Number(process.argv[4] ?? (smoke ? 10 : 150));
const CHANGES = Number(process.argv[5] ?? (smoke ? 5 : 100));
const IDLE_WINDOW_MS = smoke ? 1_000 : 20_000;
const RUNTIME: PlatformRuntime =
  (process.env.SCALE_BENCH_RUNTIME ?? (smoke ? 'tsx' : 'dist')) === 'tsx' ? 'tsx' : 'dist';

async function main(): Promise<void> {
  const entry = platformEntry(RUNTIME);
  await withBenchCluster('scale', async (cluster, kc: KubeConfig, plane) => {
    const api = new KubeClient(kc);
    await installPlatformRoles(api);
    await api.request({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: { metadata: { name: SCALE_NAMESPACE } },
    });
    process.stdout.write(
      `scale benchmark${smoke ? ' (smoke)' : ''}: steps ${STEPS.join(', ')}; virtual clusters ${VIRTUAL_CLUSTERS.join(', ')} of ${PAIRS} Services and Endpoints; operator from ${RUNTIME === 'tsx' ? 'the sources (tsx)' : 'dist/'}\n`,
    );
    await operatorCurve(cluster, api, entry, STEPS, CHANGES, (operator, curve) =>
      syncerCurve(plane, api, operator, VIRTUAL_CLUSTERS, PAIRS, IDLE_WINDOW_MS, perObjectKiB(curve)).then(
        () => {},
      ),
    );
  });
}

await main();
