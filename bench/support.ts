import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIGURE_LINE_PREFIX, type Figure } from '../e2e/support/benchmarks.ts';
import { createOperator, defaultOperatorOptions, type OperatorOptions } from '../src/cli/operator.ts';
import { ensureControlPlaneBinary } from '../src/dev/binaries.ts';
import { type Cluster, ControlPlane } from '../src/dev/controlplane.ts';
import { installCrds } from '../src/dev/install-crds.ts';
import { type Gateway, setupGateway } from '../src/gateway/index.ts';
import { KubeClient } from '../src/runtime/kube-client.ts';
import type { Manager } from '../src/runtime/manager.ts';

/**
 * Runs `body` against a control plane of its own (so no test or other benchmark disturbs the
 * figures) with our CRDs installed, and tears everything down afterwards. `plane` starts further
 * apiservers on the same etcd (a cluster the platform connects to), stopped with it.
 */
export async function withBenchCluster<T>(
  name: string,
  body: (cluster: Cluster, kc: KubeConfig, plane: ControlPlane) => Promise<T>,
): Promise<T> {
  const binary = await ensureControlPlaneBinary(() => {});
  const stateDir = mkdtempSync(join(tmpdir(), `platform-bench-${name}-`));
  const plane = await ControlPlane.start({ stateDir, binary });
  try {
    const cluster = await plane.startCluster({ name: 'bench' });
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    await installCrds(kc);
    return await body(cluster, kc, plane);
  } finally {
    await plane.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** Runs `fn(0..count-1)` with at most `concurrency` calls in flight. */
export async function pool(
  count: number,
  concurrency: number,
  fn: (i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

/** The q-quantile (0..1) of the values, nearest-rank. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

/**
 * The gateway as `platform operator` serves it (its informers on a manager), without controllers
 * (unless `operator` names some, with their options), webhooks or leader election, on loopback
 * over plain HTTP. Not started: `manager.start()`, then `gateway.start()`.
 */
export function gatewayOnly(
  kubeconfig: string,
  namespace: string,
  logger: Logger,
  operator: Partial<OperatorOptions> = {},
): { manager: Manager; gateway: Gateway } {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const manager = createOperator(
    defaultOperatorOptions({
      kubeconfig,
      namespace,
      controllers: [],
      leaderElect: false,
      healthPort: 0,
      healthHost: '127.0.0.1',
      logLevel: 'warn',
      webhooks: false,
      gateway: false,
      ...operator,
    }),
    logger,
  );
  const gateway = setupGateway(manager, {
    kubeConfig: kc,
    api: new KubeClient(kc),
    platformNamespace: namespace,
    host: '127.0.0.1',
    port: 0,
    logger,
  });
  return { manager, gateway };
}

/**
 * How a benchmark runs: `full` (the figures we report) or `smoke` (`BENCH_SMOKE=1`: small N,
 * a few seconds, run by `make test` so a benchmark cannot rot; no figure is judged in it).
 */
export type BenchMode = 'full' | 'smoke';
export const benchMode = (): BenchMode => (process.env.BENCH_SMOKE === '1' ? 'smoke' : 'full');

/** Prints a figure: one human line and one `BENCH-FIGURE {json}` line for the table. */
export function reportFigure(figure: Figure): void {
  const baseline = figure.baseline
    ? `  vs ${figure.baseline.name} ${formatNumber(figure.baseline.value)} ${figure.baseline.unit}`
    : '';
  const ratio = figure.ratio !== undefined ? `  ratio ${figure.ratio.toFixed(3)}` : '';
  const goal = figure.goal ? `  (goal ${figure.goal})` : '';
  process.stdout.write(
    `  ${figure.name}: ${formatNumber(figure.value)} ${figure.unit}${baseline}${ratio}${goal}\n${FIGURE_LINE_PREFIX}${JSON.stringify(figure)}\n`,
  );
}

function formatNumber(value: number): string {
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3);
}

/** What a benchmark waits on besides its condition: a bound, and a child whose death ends the wait. */
export interface WaitBound {
  /** Fails past this many milliseconds (far beyond a healthy run, so only a hang reaches it). */
  readonly boundMs: number;
  /** A child process the wait depends on: its exit fails the wait at once. */
  readonly child?: ChildProcess;
  readonly intervalMs?: number;
}

function assertChildAlive(what: string, child: WaitBound['child']): void {
  if (child && (child.exitCode !== null || child.signalCode !== null)) {
    throw new Error(`${what}: the child process exited (${child.exitCode ?? child.signalCode})`);
  }
}

/** Polls `check` until it holds; throws past the bound or when the child died. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  bound: WaitBound,
): Promise<void> {
  const deadline = performance.now() + bound.boundMs;
  for (;;) {
    assertChildAlive(what, bound.child);
    if (await check()) return;
    if (performance.now() > deadline)
      throw new Error(`gave up waiting for ${what} after ${bound.boundMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, bound.intervalMs ?? 20));
  }
}

/** `promise`, or a failure past the bound or when the child died. */
export async function within<T>(promise: Promise<T>, what: string, bound: WaitBound): Promise<T> {
  let settled = false;
  const guard = waitUntil(what, () => settled, { ...bound, intervalMs: bound.intervalMs ?? 50 });
  try {
    return await Promise.race([promise, guard.then(() => promise)]);
  } finally {
    settled = true;
  }
}

/** Stops a child process: SIGTERM (a graceful stop, so a CPU profile gets written), SIGKILL if it has not exited within `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Runs a benchmark's `main` as the process: exit 0 when it completes, 1 (the error printed) when it fails. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/** Where a benchmark's `platform` child runs from: the sources through tsx, or compiled to dist/. */
export type PlatformRuntime = 'tsx' | 'dist';

const REPO = join(import.meta.dirname, '..');

/**
 * The `platform` entry a benchmark spawns: compiled to dist/ as the image installs it (tsc, built
 * here), or the checkout's sources through tsx (the smoke forms), whose transpiling would
 * otherwise be counted as the component's cost.
 */
export function platformEntry(runtime: PlatformRuntime): string {
  if (runtime === 'tsx') return join(REPO, 'bin', 'platform.js');
  execFileSync(
    process.execPath,
    [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: REPO, stdio: 'inherit', timeout: 10 * 60_000 },
  );
  return join(REPO, 'dist', 'cli', 'main.js');
}
