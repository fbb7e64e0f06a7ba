import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';
import { ExpressionTimeout } from './expression-failures.ts';
import { Sandbox } from './sandbox.ts';

/**
 * docs/sync-patches.md, "The sandbox and its limits", beside the limits `sandbox.test.ts` shows:
 * the CPU budget of a virtual cluster by default, and the retries of a call that reached a time
 * limit (wall clock: made again, twice at most, so an expression fails only when it runs out of
 * time three times in a row). The calls into the isolate are counted on the class.
 */
const sandbox = createSandbox(
  { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') },
  { timeoutMs: 50 },
);
afterAll(() => sandbox.dispose());
afterEach(() => {
  vi.restoreAllMocks();
});

const input = { value: 'x', path: 'spec.x', hostObject: null, virtualObject: null };
// `call` is the one call into the isolate that evaluateAll retries.
const callsIntoTheIsolate = () => vi.spyOn(Sandbox.prototype as never as { call(): unknown }, 'call');

describe('the CPU budget', () => {
  it('is 2 s in any 10 s window by default', () => {
    expect(sandbox).toMatchObject({ cpuBudget: { budgetMs: 2000, windowMs: 10_000 } });
  });
});

describe('timeouts are retried, twice at most', () => {
  it('an expression that never ends is called three times, then its timeout is reported', () => {
    const calls = callsIntoTheIsolate();
    expect(() => sandbox.evaluate('p[0].expression', '(() => { for (;;) {} })()', input)).toThrow(
      ExpressionTimeout,
    );
    expect(calls).toHaveBeenCalledTimes(3);
  });

  it('an expression that ends is called once, and so is one that throws', () => {
    const calls = callsIntoTheIsolate();
    expect(sandbox.evaluate('p[0].expression', 'value + "!"', input)).toMatchObject({ value: 'x!' });
    expect(() => sandbox.evaluate('p[0].expression', 'value.a.b', input)).toThrow();
    expect(calls).toHaveBeenCalledTimes(2);
  });
});
