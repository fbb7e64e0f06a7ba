import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort } from '../../src/dev/controlplane.ts';
import { waitUntil } from '../support.ts';

/** How long an operator may take to answer /readyz (far beyond a healthy start: only a hang reaches it). */
const READY_BOUND_MS = 10 * 60_000;

export interface OperatorProcess {
  readonly child: ChildProcess;
  /** When it was spawned (performance.now()). */
  readonly startedAt: number;
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
  const startedAt = performance.now();
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      ...(process.env.SCALE_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SCALE_CPU_PROF}`] : []),
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
  return { child, startedAt };
}

/** Resident memory of a process now (`VmRSS`) and at its peak (`VmHWM`), in MiB (Linux /proc). */
export function residentMiB(pid: number | undefined): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
  return { now: field('VmRSS'), peak: field('VmHWM') };
}

/**
 * The lowest resident memory of a process over `windowMs` at rest, in MiB: right after a burst of
 * work its heap still holds that work's garbage until V8's memory reducer collects it in the
 * quiet, so a single reading after a burst says little about what the process keeps.
 */
export async function restingResidentMiB(pid: number | undefined, windowMs: number): Promise<number> {
  let lowest = residentMiB(pid).now;
  const deadline = performance.now() + windowMs;
  while (performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    lowest = Math.min(lowest, residentMiB(pid).now);
  }
  return lowest;
}

/** CPU time (user + system) a process has used so far, in milliseconds (Linux /proc). */
export function cpuMs(pid: number | undefined): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}
