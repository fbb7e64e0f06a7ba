import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';

/**
 * docs/sync-patches.md, "The sandbox and its limits": the time per object is "the object's
 * evaluations × 50 ms, at most 250 ms (at least 50 ms)". The limit is the `timeout` isolated-vm
 * is given for the one call that carries the object's evaluations; it is read off that call, not
 * measured, so the test holds on a busy machine. The sandbox has the default limits.
 */
const sandbox = createSandbox({ vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') });
afterAll(() => sandbox.dispose());

const objects = { hostJson: null, virtualJson: null };
const evaluations = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    patch: `p[${i}].expression`,
    expression: 'value + "!"',
    value: 'x',
    path: 'spec.x',
  }));

interface Runner {
  applySync(receiver: unknown, args: unknown[], options: { timeout: number }): unknown;
  release(): void;
}

/**
 * The `timeout` of each call into the isolate from now on. The call goes through the isolate's
 * runner (`live.run`, private to the sandbox; isolated-vm's own methods cannot be spied on), so
 * the runner of the sandbox's isolate is wrapped: it records the option and makes the call.
 * A call that stalled past its limit on a busy machine is made again with the same limit.
 */
function callTimeouts(): number[] {
  sandbox.prepare('p[0].expression', 'value');
  const live = (sandbox as never as { live: { run: Runner } }).live;
  const runner = live.run;
  const timeouts: number[] = [];
  live.run = {
    applySync: (receiver, args, options) => {
      timeouts.push(options.timeout);
      return runner.applySync(receiver, args, options);
    },
    release: () => runner.release(),
  };
  return timeouts;
}

describe('the time per object', () => {
  it.each([
    [1, 50],
    [2, 100],
    [3, 150],
    [5, 250],
    [6, 250],
    [40, 250],
  ])('for %i evaluations is %i ms', (count, expectedMs) => {
    const timeouts = callTimeouts();
    expect(sandbox.evaluateAll(evaluations(count), objects)).toHaveLength(count);
    expect(timeouts.length).toBeGreaterThan(0);
    expect(new Set(timeouts)).toEqual(new Set([expectedMs]));
  });
});
