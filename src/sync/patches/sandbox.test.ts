// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${name}` placeholders and template-literal expressions under test
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { virtualToHostDns } from '../object-refs.ts';
import { createSandbox } from '../sync.ts';
import type { SyncContext } from '../sync-context.ts';
import {
  ExpressionCpuBudgetExceeded,
  ExpressionError,
  ExpressionFailure,
  ExpressionMemoryLimit,
  ExpressionOutputTooLarge,
  ExpressionTimeout,
  SandboxDisposed,
  SandboxMemoryBudgetExceeded,
} from './expression-failures.ts';
import {
  defaultSandboxMemoryBudgetMiB,
  MEMORY_BUDGET_ENV,
  processBudgetMiB,
  SandboxMemoryBudget,
} from './memory-budget.ts';
import type { Json } from './merge-patch.ts';
import { type Evaluation, Sandbox } from './sandbox.ts';

const ctx: SyncContext = {
  vclusterName: 'vcluster',
  hostNamespace: 'vcluster-ns',
  config: loadSyncConfig(''),
};
const multiCtx: SyncContext = {
  vclusterName: 'vc',
  hostNamespace: 'vc-ns',
  config: loadSyncConfig({
    sync: {
      toHost: {
        namespaces: { enabled: true, mappings: { byName: { team: 'host-team', 'app-*': '${name}-app-*' } } },
      },
    },
  }),
};
/** Limits no expression of these tests comes near, whatever the machine's load. */
const RELAXED = { timeoutMs: 2000, objectTimeoutMs: 4000 };
const sandbox = createSandbox(ctx, RELAXED);
const multiSandbox = createSandbox(multiCtx, RELAXED);
/** For expressions that never end: any limit is reached; a short one keeps the test short. */
const quick = createSandbox(ctx, { timeoutMs: 50 });
afterAll(() => {
  sandbox.dispose();
  multiSandbox.dispose();
  quick.dispose();
});

describe('the default limits (docs/sync-patches.md, "The sandbox and its limits")', () => {
  it('50 ms per evaluation, 250 ms per object, a 32 MiB heap, 1 MiB of JSON per result', () => {
    const defaults = createSandbox(ctx);
    try {
      expect(defaults).toMatchObject({
        timeoutMs: 50,
        objectTimeoutMs: 250,
        memoryLimitMiB: 32,
        maxOutputChars: 1024 * 1024,
      });
    } finally {
      defaults.dispose();
    }
  });
});

const input = (value: unknown) => ({
  value: value as never,
  path: 'spec.x',
  hostObject: { metadata: { name: 'h' } },
  virtualObject: { metadata: { name: 'v' } },
});
const evaluate = (expression: string, value: unknown = 'hello', sb = sandbox) =>
  sb.evaluate('p[0].expression', expression, input(value));
const resultOf = (expression: string, value?: unknown, sb?: Sandbox) => {
  const r = evaluate(expression, value, sb);
  return r.removed ? 'REMOVED' : r.value;
};
/** The error an evaluation throws (fails the test if it returns). */
const failureOf = (expression: string, value?: unknown, sb?: Sandbox): unknown => {
  try {
    evaluate(expression, value, sb);
  } catch (err) {
    return err;
  }
  throw new Error(`${expression} did not fail`);
};

describe('expression results', () => {
  it.each<[string, unknown, unknown]>([
    ['"my-value"', 'x', 'my-value'],
    ["'single'", 'x', 'single'],
    ['[]', ['a'], []],
    ['({a: [1, true]})', 'x', { a: [1, true] }],
    ['42', 'x', 42],
    ['false', 'x', false],
    ['null', 'x', 'REMOVED'],
    ['undefined', 'x', 'REMOVED'],
    ['value', { a: 1 }, { a: 1 }],
    ['value + "-suffix"', 'v', 'v-suffix'],
    ['`${value}-${context.path}`', 'v', 'v-spec.x'],
    ['value?.missing ?? "default"', {}, 'default'],
    ['context.vcluster.name + "/" + context.vcluster.namespace', 'x', 'vcluster/vcluster-ns'],
    ['context.vcluster.config.networking.advanced.clusterDomain', 'x', 'cluster.local'],
    ['context.vcluster.config.sync.toHost.endpoints.enabled', 'x', true],
    ['context.hostObject.metadata.name + context.virtualObject.metadata.name', 'x', 'hv'],
    ['(() => { const parts = value.split("."); return parts.length; })()', 'a.b.c', 3],
    // the JS pitfall from upstream issue 3580: `in` tests indexes, not membership
    ["value in ['a', 'b']", '0', true],
    ["value in ['a', 'b']", 'a', false],
    ['() => 1', 'x', 'REMOVED'],
  ])('%s on %j', (expression, value, expected) => {
    expect(resultOf(expression, value)).toEqual(expected);
  });

  it('a thrown error is an ExpressionError naming the patch', () => {
    const err = failureOf('value.nope.deeper');
    expect(err).toBeInstanceOf(ExpressionError);
    expect((err as Error).message).toMatch(/^p\[0\]\.expression: TypeError/);
  });
});

describe('helpers', () => {
  it.each([
    ['my-value', 'bXktdmFsdWU='],
    ['', ''],
    ['a', 'YQ=='],
    ['ab', 'YWI='],
    ['héllo ✓ 😀', Buffer.from('héllo ✓ 😀', 'utf8').toString('base64')],
  ])('btoa(%j) and back', (text, encoded) => {
    expect(resultOf('btoa(value)', text)).toBe(encoded);
    expect(resultOf('atob(value)', encoded)).toBe(text);
  });

  it('atob rejects malformed input', () => {
    expect(failureOf('atob(value)', 'a$b=')).toBeInstanceOf(ExpressionError);
    expect(failureOf('atob(value)', 'abcde')).toBeInstanceOf(ExpressionError);
  });

  it('btoa/atob match Buffer for any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        const expected = Buffer.from(text, 'utf8').toString('base64');
        expect(resultOf('btoa(value)', text)).toBe(expected === '' ? '' : expected);
        expect(resultOf('atob(value)', expected)).toBe(Buffer.from(expected, 'base64').toString('utf8'));
      }),
      { numRuns: 50 },
    );
  });

  it.each([
    ['nginx.default.svc.cluster.local', 'nginx-x-default-x-vcluster.vcluster-ns.svc.cluster.local'],
    ['nginx.default.svc', 'nginx-x-default-x-vcluster.vcluster-ns.svc.cluster.local'],
    ['nginx.default.svc.corp.example', 'nginx-x-default-x-vcluster.vcluster-ns.svc.corp.example'],
    ['nginx', 'nginx'],
    ['nginx.default', 'nginx.default'],
    ['nginx.default.pod.cluster.local', 'nginx.default.pod.cluster.local'],
    ['.default.svc', '.default.svc'],
  ])('virtualToHostDNS(%j)', (text, expected) => {
    expect(resultOf('virtualToHostDNS(value)', text)).toBe(expected);
    expect(virtualToHostDns(ctx, text)).toBe(expected);
  });

  it('virtualToHostDNS in multi-namespace mode keeps the name and maps the namespace', () => {
    expect(resultOf('virtualToHostDNS(value)', 'db.team.svc', multiSandbox)).toBe(
      'db.host-team.svc.cluster.local',
    );
    expect(resultOf('virtualToHostDNS(value)', 'db.app-x.svc', multiSandbox)).toBe(
      'db.vc-app-x.svc.cluster.local',
    );
  });

  it('the isolate copy of virtualToHostDNS equals the TypeScript one', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$/);
    fc.assert(
      fc.property(
        label,
        fc.oneof(label, fc.constantFrom('team', 'app-one')),
        fc.constantFrom('', '.cluster.local', '.x.y'),
        (name, ns, suffix) => {
          const text = `${name}.${ns}.svc${suffix}`;
          expect(resultOf('virtualToHostDNS(value)', text)).toBe(virtualToHostDns(ctx, text));
          expect(resultOf('virtualToHostDNS(value)', text, multiSandbox)).toBe(
            virtualToHostDns(multiCtx, text),
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('hostile expressions', () => {
  it('an endless loop times out and the next evaluation works', () => {
    expect(failureOf('(() => { for (;;) {} })()', 'x', quick)).toBeInstanceOf(ExpressionTimeout);
    expect(resultOf('value + 1', 'x', quick)).toBe('x1');
  });

  it('reaches no host capability', () => {
    expect(failureOf('this.constructor.constructor("return process")()')).toBeInstanceOf(ExpressionError);
    expect(resultOf('Function("return this")().process')).toBe('REMOVED');
    expect(resultOf('typeof require + typeof process + typeof globalThis.setTimeout')).toBe(
      'undefinedundefinedundefined',
    );
    expect(resultOf('value.constructor.constructor("return typeof process")()', {})).toBe('undefined');
    expect(
      resultOf(
        '[typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics, typeof FinalizationRegistry, typeof WeakRef, typeof console].join()',
      ),
    ).toBe('undefined,undefined,undefined,undefined,undefined,undefined');
  });

  it('prototype pollution through the given values is refused and leaves no trace', () => {
    expect(failureOf('(value.__proto__.polluted = "yes")', {})).toBeInstanceOf(ExpressionError);
    expect(failureOf('(Object.prototype.toString = () => "pwned")')).toBeInstanceOf(ExpressionError);
    expect(failureOf('(Array.prototype.push = null)')).toBeInstanceOf(ExpressionError);
    expect(failureOf('(context.vcluster.name = "other")')).toBeInstanceOf(ExpressionError);
    expect(resultOf('({}).polluted ?? String({})', {})).toBe('[object Object]');
    expect(resultOf('context.vcluster.name')).toBe('vcluster');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('helpers cannot be redefined for later evaluations', () => {
    expect(failureOf('(globalThis.btoa = () => "fake")')).toBeInstanceOf(ExpressionError);
    expect(resultOf('btoa("a")')).toBe('YQ==');
  });

  it('a huge output is refused', () => {
    expect(failureOf('"x".repeat(2 * 1024 * 1024)')).toBeInstanceOf(ExpressionOutputTooLarge);
    expect(resultOf('value', 'ok')).toBe('ok');
  });

  it('a memory bomb kills only its isolate, which is rebuilt', () => {
    const own = createSandbox(ctx, { timeoutMs: 10_000, objectTimeoutMs: 10_000 });
    try {
      expect(resultOf('value', 'before', own)).toBe('before');
      const bomb = '(() => { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e6).fill(i)); })()';
      expect(failureOf(bomb, 'x', own)).toBeInstanceOf(ExpressionMemoryLimit);
      expect(resultOf('value + "!"', 'after', own)).toBe('after!');
      expect(own.isolatesBuilt).toBe(2);
    } finally {
      own.dispose();
    }
  });

  it('the CPU budget per virtual cluster stops evaluations until the window passes', () => {
    let now = 0;
    const own = createSandbox(ctx, {
      timeoutMs: 200,
      cpuBudget: { budgetMs: 100, windowMs: 1000 },
      now: () => now,
    });
    try {
      expect(failureOf('(() => { for (;;) {} })()', 'x', own)).toBeInstanceOf(ExpressionTimeout);
      expect(failureOf('1', 'x', own)).toBeInstanceOf(ExpressionCpuBudgetExceeded);
      now += 1001;
      expect(resultOf('1', 'x', own)).toBe(1);
    } finally {
      own.dispose();
    }
  });

  it('a disposed sandbox refuses work', () => {
    const own = new Sandbox({
      settings: {
        vclusterName: 'a',
        hostNamespace: 'b',
        clusterDomain: 'c',
        namespaceRules: null,
        mappingsOnly: false,
        vcluster: {},
      },
    });
    own.dispose();
    expect(() => own.evaluate('p', '1', input(1))).toThrow(SandboxDisposed);
  });
});

describe('all evaluations of an object in one call', () => {
  const objects = { hostJson: JSON.stringify({ metadata: { name: 'h' } }), virtualJson: null };
  const e = (patch: string, expression: string, value: Json = 'v', path = 'spec.x'): Evaluation => ({
    patch,
    expression,
    value,
    path,
  });

  it('gives every result in order and compiles each expression once', () => {
    const own = createSandbox(ctx, RELAXED);
    try {
      const results = own.evaluateAll(
        [
          e('p[0]', 'value + "-" + context.path', 'a', 'spec.a'),
          e('p[0]', 'value + "-" + context.path', 'b', 'spec.b'),
          e('p[1]', 'null'),
          e('p[2]', '({ ...value, host: context.hostObject.metadata.name })', { k: 1 }),
        ],
        objects,
      );
      expect(results).toEqual([
        { removed: false, value: 'a-spec.a' },
        { removed: false, value: 'b-spec.b' },
        { removed: true },
        { removed: false, value: { k: 1, host: 'h' } },
      ]);
      expect(own.isolatesBuilt).toBe(1);
    } finally {
      own.dispose();
    }
  });

  const failing = (own: Sandbox, evaluations: Evaluation[]): ExpressionFailure => {
    try {
      own.evaluateAll(evaluations, objects);
    } catch (err) {
      if (err instanceof ExpressionFailure) return err;
      throw err;
    }
    throw new Error('the batch did not fail');
  };

  it('a failure names the one patch that failed, whatever its place in the call', () => {
    const own = createSandbox(ctx, { timeoutMs: 500 });
    try {
      const thrown = failing(own, [e('p[0]', 'value'), e('p[1]', 'value.x.y'), e('p[2]', 'value')]);
      expect(thrown).toBeInstanceOf(ExpressionError);
      expect(thrown.patch).toBe('p[1]');
      const endless = failing(own, [
        e('p[0]', 'value'),
        e('p[1]', 'value'),
        e('p[7]', '(() => { for (;;) {} })()'),
      ]);
      expect(endless).toBeInstanceOf(ExpressionTimeout);
      expect(endless.patch).toBe('p[7]');
      expect(endless.message).toBe('p[7]: took longer than 500ms');
      const big = failing(own, [e('p[0]', 'value'), e('p[3]', '"x".repeat(2 * 1024 * 1024)')]);
      expect(big).toBeInstanceOf(ExpressionOutputTooLarge);
      expect(big.patch).toBe('p[3]');
    } finally {
      own.dispose();
    }
  });

  it('an evaluation that returns after its own limit fails, even inside a longer call', () => {
    const own = createSandbox(ctx, { timeoutMs: 200, objectTimeoutMs: 5000 });
    try {
      const slow = '(() => { const end = Date.now() + 600; while (Date.now() < end) {} return value; })()';
      const thrown = failing(own, [
        e('p[0]', 'value'),
        e('p[4]', slow),
        e('p[5]', 'value'),
        e('p[6]', 'value'),
      ]);
      expect(thrown).toBeInstanceOf(ExpressionTimeout);
      expect(thrown.patch).toBe('p[4]');
    } finally {
      own.dispose();
    }
  });

  it('many evaluations under their own limit but too long together: the call limit, said as such', () => {
    // The limits are wall clock, so the margins are what make this hold on a loaded machine: each
    // evaluation waits 1-2 ms of wall time against its own limit of 1000 ms (only a stall of about
    // a second inside the one evaluation in flight at the interrupt could blame it alone), and the
    // 3000 of them take at least 3 s of wall time whatever the machine's speed, far past the call's
    // 1200 ms. A CPU budget the first call uses up makes its timeout final: the retries of a
    // timed-out call are not under test here, and the test lasts one call limit instead of three.
    const own = createSandbox(ctx, {
      timeoutMs: 1000,
      objectTimeoutMs: 1200,
      cpuBudget: { budgetMs: 1, windowMs: 60_000 },
    });
    try {
      const busy = '(() => { const end = Date.now() + 2; while (Date.now() < end) {} return value; })()';
      const thrown = failing(
        own,
        Array.from({ length: 3000 }, (_, i) => e(`p[${i}]`, busy)),
      );
      expect(thrown).toBeInstanceOf(ExpressionTimeout);
      expect(thrown.message).toMatch(/the patches of this object together took longer than 1200ms$/);
    } finally {
      own.dispose();
    }
  });

  it('a promise job that never ends is blamed on the patch that queued it; nothing of it runs later', () => {
    // A CPU budget the retries of the endless job do not use up: the budget is not under test.
    const own = createSandbox(ctx, { timeoutMs: 300, cpuBudget: { budgetMs: 60_000, windowMs: 60_000 } });
    try {
      const queued = '(Promise.resolve().then(() => { for (;;) {} }), value)';
      const thrown = failing(own, [e('p[0]', 'value'), e('p[2]', queued), e('p[3]', 'value')]);
      expect(thrown).toBeInstanceOf(ExpressionTimeout);
      expect(thrown.patch).toBe('p[2]');
      // The job was dropped with its isolate: the next call does not run into it.
      expect(own.evaluateAll([e('p[0]', 'value + 1', 1)], objects)).toEqual([{ removed: false, value: 2 }]);
    } finally {
      own.dispose();
    }
  });

  it('running out of memory names the patch in flight', () => {
    const own = createSandbox(ctx, { timeoutMs: 10_000, objectTimeoutMs: 10_000 });
    try {
      const bomb = '(() => { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e6).fill(i)); })()';
      const thrown = failing(own, [e('p[0]', 'value'), e('p[1]', bomb), e('p[2]', 'value')]);
      expect(thrown).toBeInstanceOf(ExpressionMemoryLimit);
      expect(thrown.patch).toBe('p[1]');
    } finally {
      own.dispose();
    }
  });
});

describe('one memory budget for every sandbox of the process', () => {
  const evaluation: Evaluation = { patch: 'p[0].expression', expression: 'value', value: 1, path: 'x' };
  const none = { hostJson: null, virtualJson: null };

  it('past the budget a new sandbox is refused, clearly; room made by another is used', () => {
    const budget = new SandboxMemoryBudget(40);
    const first = createSandbox(ctx, { ...RELAXED, memoryLimitMiB: 32, memoryBudget: budget });
    const second = createSandbox(ctx, { ...RELAXED, memoryLimitMiB: 32, memoryBudget: budget });
    try {
      expect(first.evaluateAll([evaluation], none)).toEqual([{ removed: false, value: 1 }]);
      expect(budget.reservedMiB).toBe(32);
      let refused: unknown;
      try {
        second.evaluateAll([evaluation], none);
      } catch (err) {
        refused = err;
      }
      expect(refused).toBeInstanceOf(SandboxMemoryBudgetExceeded);
      expect((refused as Error).message).toBe(
        "p[0].expression: the sandboxes of this process already hold 32 MiB of their 40 MiB memory budget; this virtual cluster's (32 MiB) is refused until others stop",
      );
      first.dispose();
      expect(budget.reservedMiB).toBe(0);
      expect(second.evaluateAll([evaluation], none)).toEqual([{ removed: false, value: 1 }]);
      expect(budget.reservedMiB).toBe(32);
    } finally {
      first.dispose();
      second.dispose();
    }
    expect(budget.reservedMiB).toBe(0);
  });

  it('an isolate that died gives its reservation back before its replacement takes one', () => {
    const budget = new SandboxMemoryBudget(32);
    const own = createSandbox(ctx, {
      memoryLimitMiB: 32,
      memoryBudget: budget,
      timeoutMs: 10_000,
      objectTimeoutMs: 10_000,
    });
    try {
      const bomb = '(() => { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e6).fill(i)); })()';
      expect(() => own.evaluateAll([{ ...evaluation, expression: bomb }], none)).toThrow(
        ExpressionMemoryLimit,
      );
      expect(budget.reservedMiB).toBe(0);
      expect(own.evaluateAll([evaluation], none)).toEqual([{ removed: false, value: 1 }]);
      expect(budget.reservedMiB).toBe(32);
    } finally {
      own.dispose();
    }
  });

  it('the default budget is a quarter of the memory, between 64 MiB and 1 GiB; the environment may set it', () => {
    expect(defaultSandboxMemoryBudgetMiB(2 * 1024 ** 3)).toBe(512);
    expect(defaultSandboxMemoryBudgetMiB(64 * 1024 ** 3)).toBe(1024);
    expect(defaultSandboxMemoryBudgetMiB(128 * 1024 ** 2)).toBe(64);
    expect(processBudgetMiB({ [MEMORY_BUDGET_ENV]: '96' }, 2 * 1024 ** 3)).toBe(96);
    expect(processBudgetMiB({ [MEMORY_BUDGET_ENV]: 'lots' }, 2 * 1024 ** 3)).toBe(512);
    expect(processBudgetMiB({}, 2 * 1024 ** 3)).toBe(512);
  });
});
