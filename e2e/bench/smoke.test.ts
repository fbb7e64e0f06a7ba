import { describe, expect, test } from 'vitest';
import { benchmarkNames, runBenchmark } from '../support/benchmarks.ts';

/**
 * Every benchmark in its smoke form (BENCH_SMOKE=1: small N, seconds), so none can rot unnoticed:
 * it must finish within its bound, exit 0 and print its figures. No figure is judged here (the
 * machines are shared and noisy); `make bench` runs them at full size.
 */
const SMOKE_BOUND_MS = 240_000;

describe('benchmarks (smoke)', () => {
  test.each(benchmarkNames())(
    'bench/%s completes and prints its figures',
    async (name) => {
      const run = await runBenchmark(name, { smoke: true, timeoutMs: SMOKE_BOUND_MS });
      const report = `bench/${name}${run.timedOut ? ' timed out' : ''}, exit ${run.exitCode ?? run.signal}:\n${run.tail.join('\n')}`;
      expect(run.timedOut, report).toBe(false);
      expect(run.exitCode, report).toBe(0);
      expect(run.figures.length, report).toBeGreaterThan(0);
      for (const figure of run.figures) expect(Number.isFinite(figure.value), report).toBe(true);
    },
    SMOKE_BOUND_MS + 30_000,
  );
});
