import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The benchmarks' side the tests share (bench/ imports e2e/support, never the other way): runs
 * benchmarks as child processes, each bounded in time and in its own process group (so a
 * hung benchmark and everything it started are killed at the bound), and collects the figures
 * they print with `reportFigure()`. Used by `make bench` (bench/all.ts, full size, one table)
 * and by the smoke test in `make test` (e2e/bench/smoke.test.ts, BENCH_SMOKE=1).
 */

/** One measured figure beside its baseline from the same run, for `make bench`'s table. */
export interface Figure {
  /** What was measured, e.g. `projection time, 2000 SharedSecrets`. */
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  /** The baseline measured in the same run (for example the raw write rate of the same apiserver). */
  readonly baseline?: { readonly name: string; readonly value: number; readonly unit: string };
  /** value ÷ baseline (or the inverse where smaller is better: say so in `goal`). */
  readonly ratio?: number;
  /** The goal for the ratio or the value, as text, e.g. `<= 1.5x` or `>= 0.9`. */
  readonly goal?: string;
}

/** The prefix of the machine-readable line each figure is printed as (read by bench/all.ts). */
export const FIGURE_LINE_PREFIX = 'BENCH-FIGURE ';

/** The benchmarks' folder. */
export const BENCH_DIR = fileURLToPath(new URL('../../bench/', import.meta.url));

/** Every benchmark: a folder of bench/ with a run.sh. */
export function benchmarkNames(): string[] {
  return readdirSync(BENCH_DIR, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(BENCH_DIR, entry.name, 'run.sh')))
    .map((entry) => entry.name)
    .sort();
}

export interface BenchmarkRun {
  readonly name: string;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly seconds: number;
  readonly figures: Figure[];
  /** The last lines it printed (stdout and stderr), for a report when it failed. */
  readonly tail: string[];
}

export interface RunOptions {
  readonly smoke: boolean;
  /** Killed (with its whole process group) past this. */
  readonly timeoutMs: number;
  readonly args?: readonly string[];
  /** Every line the benchmark prints, as it prints it. */
  readonly onLine?: (line: string) => void;
}

export function runBenchmark(name: string, options: RunOptions): Promise<BenchmarkRun> {
  const started = performance.now();
  const child = spawn('bash', [join(BENCH_DIR, name, 'run.sh'), ...(options.args ?? [])], {
    cwd: join(BENCH_DIR, '..'),
    env: { ...process.env, BENCH_SMOKE: options.smoke ? '1' : '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const figures: Figure[] = [];
  const tail: string[] = [];
  const take = (stream: NodeJS.ReadableStream) => {
    let pending = '';
    stream.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith(FIGURE_LINE_PREFIX)) {
          figures.push(JSON.parse(line.slice(FIGURE_LINE_PREFIX.length)) as Figure);
          continue;
        }
        tail.push(line);
        if (tail.length > 40) tail.shift();
        options.onLine?.(line);
      }
    });
  };
  take(child.stdout);
  take(child.stderr);
  let timedOut = false;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), 5000).unref();
  }, options.timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      // Whatever it left behind (a control plane, an operator) goes with it.
      killGroup('SIGKILL');
      resolve({
        name,
        exitCode,
        signal,
        timedOut,
        seconds: (performance.now() - started) / 1000,
        figures,
        tail,
      });
    });
  });
}

export function succeeded(run: BenchmarkRun): boolean {
  return !run.timedOut && run.exitCode === 0 && run.figures.length > 0;
}

const fixed = (value: number | undefined, digits = 3) =>
  value === undefined || !Number.isFinite(value)
    ? ''
    : Math.abs(value) >= 100
      ? value.toFixed(0)
      : value.toPrecision(digits);

/** One table of every figure: figure, value, baseline, ratio, goal. */
export function figureTable(runs: readonly BenchmarkRun[]): string {
  const rows: string[][] = [['benchmark', 'figure', 'value', 'baseline', 'ratio', 'goal']];
  for (const run of runs) {
    if (!succeeded(run)) {
      const why = run.timedOut
        ? `timed out after ${run.seconds.toFixed(0)} s`
        : `failed (exit ${run.exitCode ?? run.signal})`;
      rows.push([run.name, why, '', '', '', '']);
      continue;
    }
    for (const figure of run.figures) {
      rows.push([
        run.name,
        figure.name,
        `${fixed(figure.value)} ${figure.unit}`,
        figure.baseline
          ? `${fixed(figure.baseline.value)} ${figure.baseline.unit} (${figure.baseline.name})`
          : '',
        figure.ratio !== undefined ? `${fixed(figure.ratio)}x` : '',
        figure.goal ?? '',
      ]);
    }
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`;
  return [
    line(rows[0]!),
    `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n');
}
