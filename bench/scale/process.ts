import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort } from '../../src/dev/controlplane.ts';
import { collectGarbage, inspectFlag } from '../inspector-gc.ts';
import { waitUntil } from '../support.ts';

/** How long an operator may take to answer /readyz (far beyond a healthy start: only a hang reaches it). */
const READY_BOUND_MS = 10 * 60_000;

export interface OperatorProcess {
  readonly child: ChildProcess;
  /** When it was spawned (performance.now()). */
  readonly startedAt: number;
  /** The loopback port of its inspector, for {@link keptResidentMiB}'s collection. */
  readonly inspectPort: number;
}

/**
 * `platform operator` as its own process (so its memory and CPU are its own), without webhooks or
 * gateway, running `controllers`, without leader election; resolves once its /readyz answers.
 */
export async function startOperator(
  entry: string,
  kubeconfig: string,
  controllers: readonly string[],
  extraArgs: readonly string[] = [],
): Promise<OperatorProcess> {
  const healthPort = await freePort();
  const inspect = await inspectFlag();
  const startedAt = performance.now();
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      ...(process.env.SCALE_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SCALE_CPU_PROF}`] : []),
      inspect.flag,
      entry,
      'operator',
      '--no-webhooks',
      '--no-gateway',
      '--no-leader-elect',
      '--controllers',
      controllers.join(','),
      '--kubeconfig',
      kubeconfig,
      '--health-port',
      String(healthPort),
      '--health-host',
      '127.0.0.1',
      '--log-level',
      'warn',
      ...extraArgs,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  await waitUntil(
    "the operator's /readyz",
    () =>
      fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
        (response) => response.ok,
        () => false,
      ),
    { boundMs: READY_BOUND_MS, child, intervalMs: 100 },
  );
  return { child, startedAt, inspectPort: inspect.port };
}

/** Resident memory of a process now (`VmRSS`) and at its peak (`VmHWM`), in MiB (Linux /proc). */
export function residentMiB(pid: number | undefined): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
  return { now: field('VmRSS'), peak: field('VmHWM') };
}

/**
 * The operator's resident memory in MiB right after a full garbage collection (bench/inspector-gc):
 * what it keeps. After a burst of work its heap holds that work's garbage until V8's memory
 * reducer collects it, which on a busy machine took longer than any window watched for the lowest
 * reading (an operator read 374 MiB after its burst, 235 MiB some minutes later with more to hold).
 */
export async function keptResidentMiB(operator: OperatorProcess): Promise<number> {
  await collectGarbage(operator.inspectPort, { boundMs: 120_000, child: operator.child });
  return residentMiB(operator.child.pid).now;
}

/** CPU time (user + system) a process has used so far, in milliseconds (Linux /proc). */
export function cpuMs(pid: number | undefined): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

/**
 * The pid of the etcd serving the control plane whose cluster's admin kubeconfig is `kubeconfigPath`
 * (`<stateDir>/clusters/<name>/admin.kubeconfig`; its etcd runs with `--data-dir=<stateDir>/etcd`),
 * found among the machine's processes: ControlPlane does not hand out its etcd. Undefined when none.
 */
export function etcdPidOf(kubeconfigPath: string): number | undefined {
  const dataDir = `--data-dir=${join(dirname(dirname(dirname(kubeconfigPath))), 'etcd')}\0`;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dataDir)) return Number(entry);
    } catch {
      // The process ended while we looked.
    }
  }
  return undefined;
}
