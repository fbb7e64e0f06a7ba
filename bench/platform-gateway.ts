import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import autocannon from 'autocannon';
import type { User } from '../src/api/identity.ts';
import type { OwnedAccessKey } from '../src/api/ownedaccesskey.ts';
import { StatusError } from '../src/api/status.ts';
import { freePort } from '../src/dev/controlplane.ts';
import { impersonationHeaders } from '../src/gateway/proxy/impersonation.ts';
import { authenticateAccessKey } from '../src/identity/authenticate.ts';
import { generateAccessKey, hashAccessKey } from '../src/identity/keys.ts';
import { PepperStore } from '../src/identity/pepper.ts';
import { KubeClient } from '../src/runtime/kube-client.ts';
import { inspectFlag } from './inspector-gc.ts';
import {
  benchMode,
  type PlatformRuntime,
  platformEntry,
  reportFigure,
  stopChild,
  waitUntil,
} from './support.ts';

/**
 * What the benchmarks of the gateway (bench/gateway: the management API) and of its access proxy
 * (bench/proxy: other clusters) share: `platform gateway` in a process of its own, pinned to CPUs
 * of its own; CPU and memory of a process from /proc; autocannon load with the CPU each process
 * spent per answered request; platform keys stored as admission would store them, with the very
 * impersonation headers the gateway sends for them (the direct baselines).
 */

/** Bounds on the waits: far beyond what a healthy run takes, so only a hang reaches them. */
export const START_BOUND_MS = 120_000;
export const GROUP = 'management.platform';

export type Headers = Record<string, string>;
export type Impersonation = Record<string, string | string[]>;

/** The namespace the measured gateway serves as its platform namespace (its pepper, its config). */
export const PLATFORM_NAMESPACE = 'platform-system';

/**
 * The load of both benchmarks: `run.sh [SECONDS=10] [CONNECTIONS=16] [N=50] ...` (`BENCH_SMOKE=1`:
 * 2 s, 4, 5), a warm-up run of each path first, and where the measured gateway runs from.
 */
export interface LoadSizes {
  readonly smoke: boolean;
  readonly seconds: number;
  readonly connections: number;
  /** Objects in the listed namespace. */
  readonly n: number;
  readonly warmUpSeconds: number;
  readonly runtime: PlatformRuntime;
}

export function loadSizes(): LoadSizes {
  const smoke = benchMode() === 'smoke';
  return {
    smoke,
    seconds: Number(process.argv[2] ?? (smoke ? 2 : 10)),
    connections: Number(process.argv[3] ?? (smoke ? 4 : 16)),
    n: Number(process.argv[4] ?? (smoke ? 5 : 50)),
    warmUpSeconds: smoke ? 1 : 2,
    runtime: gatewayRuntime(smoke),
  };
}

/** CPU seconds (user + system, all threads) a process has used so far, from /proc (Linux). */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Resident memory of a process in bytes (VmRSS of /proc/<pid>/status, Linux). */
export function residentBytes(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB$/m);
    return line ? Number(line[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export interface Measured {
  readonly result: autocannon.Result;
  /** CPU milliseconds per answered request, by process. */
  readonly cpuMs: Record<string, number>;
}

export interface LoadOptions {
  readonly seconds: number;
  readonly connections: number;
  /** The processes whose CPU is counted, by name. */
  readonly processes: Record<string, number | undefined>;
}

/** autocannon against `url` for `options.seconds`, with each process's CPU per answered request. */
export async function load(url: string, headers: Headers, options: LoadOptions): Promise<Measured> {
  const { processes } = options;
  const before = Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, cpuSeconds(pid)]));
  const result = await autocannon({
    url,
    connections: options.connections,
    duration: options.seconds,
    workers: 1,
    headers: { accept: 'application/json', ...headers },
  });
  const answered = Math.max(1, result.requests.total);
  const cpuMs = Object.fromEntries(
    Object.entries(processes).map(([name, pid]) => [
      name,
      ((cpuSeconds(pid) - (before[name] ?? Number.NaN)) * 1000) / answered,
    ]),
  );
  return { result, cpuMs };
}

/** A proxy's CPU per request (`run.cpuMs[proxy]`) beside kube-apiserver's for the same requests, in one run. */
export function reportCpuFigure(
  name: string,
  request: string,
  run: Measured,
  proxy: string,
  goal?: string,
): void {
  const [value, apiserver] = [run.cpuMs[proxy] ?? Number.NaN, run.cpuMs.apiserver ?? Number.NaN];
  reportFigure({
    name,
    value,
    unit: 'CPU ms',
    baseline: { name: `kube-apiserver CPU for the same ${request}`, value: apiserver, unit: 'CPU ms' },
    ratio: value / apiserver,
    ...(goal ? { goal } : {}),
  });
}

/** One line of a run: requests per second, latency, and each process's CPU per request. */
export function runLine(label: string, run: Measured): string {
  const cpu = Object.entries(run.cpuMs)
    .map(([process, ms]) => `${process} ${ms.toFixed(2)}`)
    .join(', ');
  return `  ${label.padEnd(20)} ${rps(run.result).toFixed(0).padStart(6)} req/s  p50 ${run.result.latency.p50.toFixed(1).padStart(5)} ms  p99 ${run.result.latency.p99.toFixed(1).padStart(5)} ms  CPU ms/request: ${cpu}`;
}

/** Fails the benchmark when a process it loads exited during the load, or a request of it failed. */
export function checkLoad(
  name: string,
  processes: readonly { readonly what: string; readonly child: ChildProcess }[],
  ...runs: Measured[]
): void {
  for (const { what, child } of processes)
    if (child.exitCode !== null) throw new Error(`${what} exited during the load`);
  const failed = failures(...runs.map((run) => run.result));
  if (failed > 0) throw new Error(`${name}: ${failed} requests failed (non-2xx or errors)`);
}

export const bearer = (token: string): Headers => ({ authorization: `Bearer ${token}` });
export const rps = (result: autocannon.Result) => result.requests.average;
export const failures = (...results: autocannon.Result[]) =>
  results.reduce((sum, result) => sum + result.non2xx + result.errors, 0);

/**
 * The gateway's impersonation headers as autocannon headers. autocannon writes each header as
 * one `name: value` line, so a repeated header (one `Impersonate-Group` per group, as the gateway
 * sends them: a comma would be part of the group name) is spelled as more lines in one value.
 */
export function autocannonHeaders(impersonation: Impersonation): Headers {
  const headers: Headers = {};
  for (const [name, value] of Object.entries(impersonation)) {
    headers[name] = Array.isArray(value) ? value.join(`\r\n${name}: `) : value;
  }
  return headers;
}

/**
 * Where the measured gateway runs from: compiled to dist/ for the figures, the sources through tsx
 * in the smoke form (`GATEWAY_BENCH_RUNTIME=tsx|dist` chooses).
 */
export const gatewayRuntime = (smoke: boolean): PlatformRuntime =>
  (process.env.GATEWAY_BENCH_RUNTIME ?? (smoke ? 'tsx' : 'dist')) === 'tsx' ? 'tsx' : 'dist';

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly pid: number | undefined;
  readonly url: string;
  /**
   * Its inspector's loopback port, for a collection before a memory reading (bench/inspector-gc):
   * the platform gateway's (startGatewayProcess); a bare proxy has none.
   */
  readonly inspectPort?: number;
  stop(): Promise<void>;
}

/**
 * `platform gateway` (from `entry`: see `platformEntry`), the component as the chart runs it
 * (plain HTTP), in a process of its own, ready. `GATEWAY_NODE_OPTIONS` adds Node flags to it.
 */
export async function startGatewayProcess(
  entry: string,
  kubeconfig: string,
  namespace: string,
): Promise<GatewayProcess> {
  const extra = (process.env.GATEWAY_NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag !== '');
  const [port, healthPort] = [await freePort(), await freePort()];
  const inspect = await inspectFlag();
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      ...extra,
      inspect.flag,
      entry,
      'gateway',
      ...['--kubeconfig', kubeconfig, '--namespace', namespace],
      ...['--gateway-host', '127.0.0.1', '--gateway-port', String(port)],
      ...['--health-host', '127.0.0.1', '--health-port', String(healthPort)],
      ...['--log-level', 'warn'],
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const stop = () => stopChild(child);
  try {
    await waitUntil(
      'the gateway to be ready',
      async () =>
        (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined))?.status === 200,
      { boundMs: START_BOUND_MS, child, intervalMs: 200 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { child, pid: child.pid, url: `http://127.0.0.1:${port}`, inspectPort: inspect.port, stop };
}

/**
 * The CPUs the gateway runs on: `GATEWAY_CPUS=1` (the default on a machine with two CPUs or more;
 * `GATEWAY_CPUS=none` turns it off), with everything else on `PLATFORM_CPUS` (default 0), as in
 * production, where it runs in pods of its own on other nodes than the apiserver.
 */
export const GATEWAY_CPUS = ((): string | undefined => {
  const asked = process.env.GATEWAY_CPUS;
  if (asked === 'none' || asked === '') return undefined;
  return asked ?? (availableParallelism() >= 2 ? '1' : undefined);
})();
export const PLATFORM_CPUS = process.env.PLATFORM_CPUS ?? '0';

/**
 * This process and what it starts from now on (the control plane; the load generator runs in it)
 * on the platform's CPUs, when the gateway has CPUs of its own. First thing in a benchmark.
 */
export function pinPlatform(): void {
  if (GATEWAY_CPUS) pin(process.pid, PLATFORM_CPUS);
}

/**
 * `platform gateway` from `runtime` for the cluster of `kubeconfig`, on the gateway's CPUs, once
 * it answers `ready` with 200: the key it is asked with is in its caches.
 */
export async function measuredGateway(
  runtime: PlatformRuntime,
  kubeconfig: string,
  ready: (gatewayUrl: string) => { readonly what: string; readonly url: string; readonly headers: Headers },
): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess(platformEntry(runtime), kubeconfig, PLATFORM_NAMESPACE);
  try {
    if (GATEWAY_CPUS && gateway.pid) pin(gateway.pid, GATEWAY_CPUS);
    const { what, url, headers } = ready(gateway.url);
    await waitUntil(what, async () => (await fetch(url, { headers })).status === 200, {
      boundMs: START_BOUND_MS,
      child: gateway.child,
      intervalMs: 200,
    });
  } catch (error) {
    await gateway.stop();
    throw error;
  }
  return gateway;
}

/** Where the gateway runs from and on which CPUs, beside `others` (for a benchmark's heading). */
export function placement(runtime: PlatformRuntime, others: string): string {
  const from = `platform gateway from ${runtime === 'tsx' ? 'the sources (tsx)' : 'dist/ (compiled)'}`;
  return GATEWAY_CPUS
    ? `${from}; gateway on CPU ${GATEWAY_CPUS}, ${others} on CPU ${PLATFORM_CPUS}`
    : `${from}; every process on every CPU`;
}

/** The platform's pepper, made as the gateway makes it (the keys are hashed with it). */
export const ensurePepper = (kc: KubeConfig): Promise<Uint8Array> =>
  new PepperStore(new KubeClient(kc), PLATFORM_NAMESPACE, randomBytes).ensure();

/** Pins a process and all its threads (children started later inherit it). */
export function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

export interface BenchKey {
  /** The plaintext key. */
  readonly token: string;
  /** The headers the gateway sends for it (the same decision, from the stored objects). */
  readonly impersonation: Impersonation;
}

/**
 * A User `user` (with `spec`) and an OwnedAccessKey of it, stored with its keyed hash as admission
 * stores it (the benchmarks run no webhooks).
 */
export async function createBenchKey(
  kc: KubeConfig,
  pepper: Uint8Array,
  user: string,
  spec: Record<string, unknown> = {},
): Promise<BenchKey> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const userObject = (await custom.createClusterCustomObject({
    group: GROUP,
    version: 'v1',
    plural: 'users',
    body: { apiVersion: `${GROUP}/v1`, kind: 'User', metadata: { name: user }, spec },
  })) as User;
  const key = generateAccessKey((size) => randomBytes(size));
  const keyObject = (await custom.createClusterCustomObject({
    group: GROUP,
    version: 'v1',
    plural: 'ownedaccesskeys',
    body: {
      apiVersion: `${GROUP}/v1`,
      kind: 'OwnedAccessKey',
      metadata: { name: user },
      spec: { user, type: 'User', keyId: key.id, keyHash: hashAccessKey(key.key, pepper) },
    },
  })) as OwnedAccessKey;
  return { token: key.key, impersonation: impersonationOf(key.key, keyObject, userObject, pepper) };
}

/** The impersonation headers the gateway sends for the key: the same decision, the same headers. */
function impersonationOf(token: string, key: OwnedAccessKey, user: User, pepper: Uint8Array): Impersonation {
  const result = authenticateAccessKey(token, {
    lookupKey: () => [key],
    lookupUser: (name) => (name === user.metadata.name ? user : undefined),
    lookupTeam: () => undefined,
    pepper,
    now: () => new Date(),
    limits: {},
  });
  if (!result.ok) throw result.failure;
  const headers = impersonationHeaders(result.identity);
  if (headers instanceof StatusError) throw headers;
  return headers;
}
