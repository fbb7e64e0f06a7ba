import type { Reporter, TestCase, TestModule, TestSuite } from 'vitest/node';

export interface RunSummary {
  passed: number;
  failed: number;
  skipped: number;
  /** Test files by wall-clock duration, slowest first. */
  slowest: { file: string; durationMs: number }[];
  /** What failed, as `file > suite > test: first line of the error`, in run order. */
  failures: string[];
}

type Node = TestModule | TestSuite | TestCase;

/**
 * Counts a run's tests. A test that never ran because a hook of its suite or file failed
 * (`beforeAll` throwing, a file that did not load) counts as failed, not skipped; a suite whose
 * hook failed after all its tests passed (`afterAll`) adds one failure. Only tests skipped on
 * purpose (`it.skip`, `todo`, `ctx.skip()` in a healthy suite) count as skipped.
 */
export function summarize(modules: ReadonlyArray<TestModule>): RunSummary {
  const summary: RunSummary = { passed: 0, failed: 0, skipped: 0, slowest: [], failures: [] };
  const visit = (node: Node, ancestorErrored: boolean): number => {
    if (node.type === 'test') {
      const result = node.result();
      const state = result.state;
      if (state === 'passed') summary.passed++;
      else if (state === 'failed') {
        summary.failed++;
        summary.failures.push(describeFailure(node, result.errors ?? []));
      } else if (ancestorErrored && node.options.mode !== 'skip' && node.options.mode !== 'todo') {
        summary.failed++;
      } else {
        summary.skipped++;
        return 0;
      }
      return state === 'passed' ? 0 : 1;
    }
    const errored = node.errors().length > 0;
    let failuresBelow = 0;
    for (const child of node.children) failuresBelow += visit(child, ancestorErrored || errored);
    // The hook failed but nothing below was counted for it (no tests, or all had passed).
    if (errored) summary.failures.push(describeFailure(node, node.errors()));
    if (errored && failuresBelow === 0) {
      summary.failed++;
      failuresBelow = 1;
    }
    return failuresBelow;
  };
  for (const module of modules) {
    visit(module, false);
    summary.slowest.push({ file: module.relativeModuleId, durationMs: module.diagnostic().duration });
  }
  summary.slowest.sort((a, b) => b.durationMs - a.durationMs);
  return summary;
}

type ErrorLike = { message?: string; name?: string };

function describeFailure(node: Node, errors: ReadonlyArray<ErrorLike>): string {
  const module = node.type === 'module' ? node : node.module;
  const where =
    node.type === 'module' ? module.relativeModuleId : `${module.relativeModuleId} > ${node.fullName}`;
  const first = errors[0];
  const text = first ? `${first.name ?? 'Error'}: ${first.message ?? ''}` : 'failed';
  const firstLine = text.split('\n', 1)[0] ?? '';
  return `${where}: ${firstLine.length > 300 ? `${firstLine.slice(0, 300)}…` : firstLine}`;
}

export function formatSummary(summary: RunSummary, slowestCount = 10): string {
  const lines = [''];
  const slowest = summary.slowest.slice(0, slowestCount).filter((f) => f.durationMs > 0);
  if (slowest.length > 0) {
    lines.push(`slowest ${slowest.length} test files:`);
    for (const { file, durationMs } of slowest) {
      lines.push(`  ${(durationMs / 1000).toFixed(1).padStart(7)} s  ${file}`);
    }
  }
  if (summary.failures.length > 0) {
    lines.push(`failed (${summary.failures.length}):`);
    for (const failure of summary.failures) lines.push(`  ${failure}`);
  }
  lines.push(`tests: ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped`);
  return `${lines.join('\n')}\n`;
}

/**
 * Ends every run with the ten slowest test files, what failed (file, test and the error's first
 * line, so that the tail of a CI log names it), and one plain line,
 * `tests: N passed, N failed, N skipped`, which CI tools that do not know vitest's own summary
 * can read.
 */
export default class SummaryReporter implements Reporter {
  private readonly write: (text: string) => void;

  /** vitest constructs reporters named in the config with their options object (or none). */
  constructor(options: { write?: (text: string) => void } = {}) {
    this.write = options.write ?? ((text) => process.stdout.write(text));
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    this.write(formatSummary(summarize(testModules)));
  }
}
