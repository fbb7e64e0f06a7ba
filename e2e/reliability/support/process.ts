import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { eventually } from '../../support/wait.ts';

const platformBin = fileURLToPath(new URL('../../../bin/platform.js', import.meta.url));

/** A `platform operator` child process and what the tests read from it. */
export interface OperatorProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly healthPort: number;
  readonly exited: Promise<void>;
  /** Signals it (SIGKILL by default) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** The text of its /metrics. */
  metrics(): Promise<string>;
  /** Resolves once /readyz answers 200 (every informer synced); throws if the process exits. */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Resident set size in KiB (VmRSS of /proc/<pid>/status); undefined once it is gone. */
  rssKiB(): number | undefined;
}

/** Wraps a spawned operator whose /metrics and /readyz are on 127.0.0.1:`healthPort`. */
export function operatorProcess(child: ChildProcess, healthPort: number, logPath: string): OperatorProcess {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  const base = `http://127.0.0.1:${healthPort}`;
  return {
    child,
    pid: child.pid ?? -1,
    healthPort,
    exited,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
    metrics: () => fetch(`${base}/metrics`).then((r) => r.text()),
    waitReady: (timeoutMs = 90_000) =>
      eventually(
        async () => {
          if (child.exitCode !== null || child.signalCode !== null) {
            throw new Error(`the operator exited (${child.exitCode ?? child.signalCode}):\n${tail(logPath)}`);
          }
          return fetch(`${base}/readyz`).then(
            (r) => r.ok,
            () => false,
          );
        },
        timeoutMs,
        'the operator to become ready',
      ),
    rssKiB: () => {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
        return match ? Number(match[1]) : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

/** `platform operator ARGS` as a real process, everything it serves switched on unless ARGS say otherwise. */
export function spawnPlatformOperator(args: string[], healthPort: number, logPath: string): OperatorProcess {
  const log = createWriteStream(logPath, { flags: 'a' });
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      platformBin,
      'operator',
      ...args,
      '--health-port',
      String(healthPort),
      '--health-host',
      '127.0.0.1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  return operatorProcess(child, healthPort, logPath);
}

export function tail(path: string, chars = 3000): string {
  try {
    return readFileSync(path, 'utf8').slice(-chars);
  } catch {
    return '(no log)';
  }
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition. */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of a metric's samples whose labels include `labels`. */
export function metricSum(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
