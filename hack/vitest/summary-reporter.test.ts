import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startVitest } from 'vitest/node';
import SummaryReporter, { formatSummary, type RunSummary } from './summary-reporter.ts';

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** Runs real vitest on fixture files with the reporter and returns the line it printed. */
async function run(files: string[]): Promise<{ line: string; output: string }> {
  let output = '';
  const vitest = await startVitest('test', files, {
    root: fixtures,
    config: false,
    include: ['**/*.fixture.ts'],
    reporters: [new SummaryReporter({ write: (text) => (output += text) })],
    watch: false,
  });
  await vitest.close();
  const line = output.split('\n').find((l) => l.startsWith('tests: ')) ?? '';
  return { line, output };
}

const line = (s: Pick<RunSummary, 'passed' | 'failed' | 'skipped'>) =>
  `tests: ${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped`;

describe('summary reporter', () => {
  it('counts the tests of a suite whose beforeAll throws as failed, not skipped', async () => {
    const { line: printed } = await run(['before-all-throws.fixture.ts']);
    expect(printed).toBe(line({ passed: 1, failed: 2, skipped: 1 }));
  });

  it('counts a file-level beforeAll failure against the file tests', async () => {
    const { line: printed } = await run(['file-hook-throws.fixture.ts']);
    expect(printed).toBe(line({ passed: 0, failed: 1, skipped: 0 }));
  });

  it('counts a failing afterAll once, beside the tests that passed', async () => {
    const { line: printed } = await run(['after-all-throws.fixture.ts']);
    expect(printed).toBe(line({ passed: 1, failed: 1, skipped: 0 }));
  });

  it('counts a file that fails to load', async () => {
    const { line: printed } = await run(['does-not-load.fixture.ts']);
    expect(printed).toBe(line({ passed: 0, failed: 1, skipped: 0 }));
  });

  it('names each failure with its file, test and error above the line', async () => {
    const { output } = await run(['before-all-throws.fixture.ts', 'does-not-load.fixture.ts']);
    expect(output).toMatch(/failed \(\d+\):\n/);
    expect(output).toMatch(/ {2}before-all-throws\.fixture\.ts > .+: \w*Error: /);
    expect(output).toMatch(/ {2}does-not-load\.fixture\.ts: \w*Error: /);
  });

  it('lists the slowest files above the line', async () => {
    const { output } = await run(['before-all-throws.fixture.ts', 'after-all-throws.fixture.ts']);
    expect(output).toMatch(/slowest 2 test files:\n +\d+\.\d s {2}(before|after)-all-throws\.fixture\.ts\n/);
  });

  it('lists the ten slowest files of a larger run, slowest first (README, `make test`)', () => {
    const slowest = Array.from({ length: 12 }, (_, i) => ({
      file: `f${i}.test.ts`,
      durationMs: (12 - i) * 1000,
    }));
    const printed = formatSummary({ passed: 12, failed: 0, skipped: 0, slowest, failures: [] });
    const listed = printed.split('\n').filter((l) => l.endsWith('.test.ts'));
    expect(printed).toContain('slowest 10 test files:');
    expect(listed.map((l) => l.trim().split(/\s+/).pop())).toEqual(slowest.slice(0, 10).map((f) => f.file));
  });
});
