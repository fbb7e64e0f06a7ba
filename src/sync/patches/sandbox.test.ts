// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${name}` placeholders and template-literal expressions under test
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';
import { type SyncContext, virtualToHostDns } from '../translate.ts';
import {
  ExpressionCpuBudgetExceeded,
  ExpressionError,
  ExpressionMemoryLimit,
  ExpressionOutputTooLarge,
  ExpressionTimeout,
  Sandbox,
  SandboxDisposed,
} from './sandbox.ts';

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
const sandbox = createSandbox(ctx);
const multiSandbox = createSandbox(multiCtx);
afterAll(() => {
  sandbox.dispose();
  multiSandbox.dispose();
});

const input = (value: unknown) => ({
  value: value as never,
  path: 'spec.x',
  hostObject: { metadata: { name: 'h' } },
  virtualObject: { metadata: { name: 'v' } },
});
const evaluate = (expression: string, value: unknown = 'hello', sb = sandbox) =>
  sb.evaluate('p[0].expression', expression, input(value));
const resultOf = async (expression: string, value?: unknown, sb?: Sandbox) => {
  const r = await evaluate(expression, value, sb);
  return r.removed ? 'REMOVED' : r.value;
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
  ])('%s on %j', async (expression, value, expected) => {
    expect(await resultOf(expression, value)).toEqual(expected);
  });

  it('a thrown error is an ExpressionError naming the patch', async () => {
    const err = await evaluate('value.nope.deeper').catch((e: unknown) => e);
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
  ])('btoa(%j) and back', async (text, encoded) => {
    expect(await resultOf('btoa(value)', text)).toBe(encoded);
    expect(await resultOf('atob(value)', encoded)).toBe(text);
  });

  it('atob rejects malformed input', async () => {
    await expect(evaluate('atob(value)', 'a$b=')).rejects.toBeInstanceOf(ExpressionError);
    await expect(evaluate('atob(value)', 'abcde')).rejects.toBeInstanceOf(ExpressionError);
  });

  it('btoa/atob match Buffer for any string', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'binary' }), async (text) => {
        const expected = Buffer.from(text, 'utf8').toString('base64');
        expect(await resultOf('btoa(value)', text)).toBe(expected === '' ? '' : expected);
        expect(await resultOf('atob(value)', expected)).toBe(
          Buffer.from(expected, 'base64').toString('utf8'),
        );
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
  ])('virtualToHostDNS(%j)', async (text, expected) => {
    expect(await resultOf('virtualToHostDNS(value)', text)).toBe(expected);
    expect(virtualToHostDns(ctx, text)).toBe(expected);
  });

  it('virtualToHostDNS in multi-namespace mode keeps the name and maps the namespace', async () => {
    expect(await resultOf('virtualToHostDNS(value)', 'db.team.svc', multiSandbox)).toBe(
      'db.host-team.svc.cluster.local',
    );
    expect(await resultOf('virtualToHostDNS(value)', 'db.app-x.svc', multiSandbox)).toBe(
      'db.vc-app-x.svc.cluster.local',
    );
  });

  it('the isolate copy of virtualToHostDNS equals the TypeScript one', async () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$/);
    await fc.assert(
      fc.asyncProperty(
        label,
        fc.oneof(label, fc.constantFrom('team', 'app-one')),
        fc.constantFrom('', '.cluster.local', '.x.y'),
        async (name, ns, suffix) => {
          const text = `${name}.${ns}.svc${suffix}`;
          expect(await resultOf('virtualToHostDNS(value)', text)).toBe(virtualToHostDns(ctx, text));
          expect(await resultOf('virtualToHostDNS(value)', text, multiSandbox)).toBe(
            virtualToHostDns(multiCtx, text),
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('hostile expressions', () => {
  it('an endless loop times out and the next evaluation works', async () => {
    await expect(evaluate('(() => { for (;;) {} })()')).rejects.toBeInstanceOf(ExpressionTimeout);
    expect(await resultOf('value + 1', 'x')).toBe('x1');
  });

  it('reaches no host capability', async () => {
    await expect(evaluate('this.constructor.constructor("return process")()')).rejects.toBeInstanceOf(
      ExpressionError,
    );
    expect(await resultOf('Function("return this")().process')).toBe('REMOVED');
    expect(await resultOf('typeof require + typeof process + typeof globalThis.setTimeout')).toBe(
      'undefinedundefinedundefined',
    );
    expect(await resultOf('value.constructor.constructor("return typeof process")()', {})).toBe('undefined');
    expect(await resultOf('typeof WebAssembly')).toBe('undefined');
  });

  it('prototype pollution through the given values is refused and leaves no trace', async () => {
    await expect(evaluate('(value.__proto__.polluted = "yes")', {})).rejects.toBeInstanceOf(ExpressionError);
    await expect(evaluate('(Object.prototype.toString = () => "pwned")')).rejects.toBeInstanceOf(
      ExpressionError,
    );
    await expect(evaluate('(Array.prototype.push = null)')).rejects.toBeInstanceOf(ExpressionError);
    await expect(evaluate('(context.vcluster.name = "other")')).rejects.toBeInstanceOf(ExpressionError);
    expect(await resultOf('({}).polluted ?? String({})', {})).toBe('[object Object]');
    expect(await resultOf('context.vcluster.name')).toBe('vcluster');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('helpers cannot be redefined for later evaluations', async () => {
    await expect(evaluate('(globalThis.btoa = () => "fake")')).rejects.toBeInstanceOf(ExpressionError);
    expect(await resultOf('btoa("a")')).toBe('YQ==');
  });

  it('a huge output is refused', async () => {
    await expect(evaluate('"x".repeat(2 * 1024 * 1024)')).rejects.toBeInstanceOf(ExpressionOutputTooLarge);
    expect(await resultOf('value', 'ok')).toBe('ok');
  });

  it('a memory bomb kills only its isolate, which is rebuilt', async () => {
    const own = createSandbox(ctx, { timeoutMs: 10_000 });
    try {
      expect(await resultOf('value', 'before', own)).toBe('before');
      const bomb = '(() => { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e6).fill(i)); })()';
      await expect(evaluate(bomb, 'x', own)).rejects.toBeInstanceOf(ExpressionMemoryLimit);
      expect(await resultOf('value + "!"', 'after', own)).toBe('after!');
      expect(own.isolatesBuilt).toBe(2);
    } finally {
      own.dispose();
    }
  });

  it('the CPU budget per virtual cluster stops evaluations until the window passes', async () => {
    let now = 0;
    const own = createSandbox(ctx, {
      timeoutMs: 30,
      cpuBudget: { budgetMs: 20, windowMs: 1000 },
      now: () => now,
    });
    try {
      await expect(evaluate('(() => { for (;;) {} })()', 'x', own)).rejects.toBeInstanceOf(ExpressionTimeout);
      await expect(evaluate('1', 'x', own)).rejects.toBeInstanceOf(ExpressionCpuBudgetExceeded);
      now += 1001;
      expect(await resultOf('1', 'x', own)).toBe(1);
    } finally {
      own.dispose();
    }
  });

  it('a disposed sandbox refuses work', async () => {
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
    await expect(own.evaluate('p', '1', input(1))).rejects.toBeInstanceOf(SandboxDisposed);
  });
});
