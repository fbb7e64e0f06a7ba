import ivm from 'isolated-vm';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';
import { expressionFunctionSource } from './expression.ts';
import type { Json } from './merge-patch.ts';
import { type Evaluation, type EvaluationObjects, ExpressionFailure } from './sandbox.ts';

/**
 * A sandbox that forgets: every channel we know of through which one evaluation could leave a
 * value for a later one (the attack: a Secret patch stashes the Secret's data, a later ConfigMap
 * patch reads it and throws it into an Event). Each case is a pair of expressions: `stash` gets
 * the secret as its value and tries to leave it somewhere; `read` tries to find it. A case
 * carries a value when `read` gives something else after `stash` ran than before.
 *
 * Each case is first made against a naive sandbox (an isolate whose realm nothing protects, one
 * context object shared by every evaluation, expressions called as methods of their registry),
 * where it must carry the value: so the case probes a real channel. Then against ours, where it
 * must not: in separate calls, and inside one call (the evaluations of one object).
 */

const SECRET = 'S3CRET-c2VjcmV0';

interface Channel {
  name: string;
  stash: string;
  read: string;
  /** False for what is no channel even in a naive realm (kept to show it was tried). */
  naive?: false;
}

/** Intrinsics reachable by name; each is tried as itself and through its prototype. */
const NAMED_INTRINSICS = [
  'Object',
  'Function',
  'Array',
  'Number',
  'Boolean',
  'String',
  'Symbol',
  'Date',
  'Promise',
  'RegExp',
  'Error',
  'AggregateError',
  'EvalError',
  'RangeError',
  'ReferenceError',
  'SyntaxError',
  'TypeError',
  'URIError',
  'SuppressedError',
  'ArrayBuffer',
  'Uint8Array',
  'Int8Array',
  'Uint16Array',
  'Int16Array',
  'Uint32Array',
  'Int32Array',
  'BigUint64Array',
  'BigInt64Array',
  'Uint8ClampedArray',
  'Float16Array',
  'Float32Array',
  'Float64Array',
  'DataView',
  'Map',
  'BigInt',
  'Set',
  'WeakMap',
  'WeakSet',
  'Proxy',
  'Iterator',
  'DisposableStack',
  'AsyncDisposableStack',
  'Intl.Collator',
  'Intl.DateTimeFormat',
  'Intl.DisplayNames',
  'Intl.ListFormat',
  'Intl.Locale',
  'Intl.NumberFormat',
  'Intl.PluralRules',
  'Intl.RelativeTimeFormat',
  'Intl.Segmenter',
];
const NAMED_NAMESPACES = ['JSON', 'Math', 'Reflect', 'Intl', 'globalThis'];

/** Objects no name reaches, only an expression that makes one. */
const HIDDEN_INTRINSICS: Record<string, string> = {
  '%GeneratorFunction.prototype%': 'Object.getPrototypeOf(function* () {})',
  '%GeneratorPrototype%': 'Object.getPrototypeOf(function* () {}).prototype',
  '%AsyncFunction.prototype%': 'Object.getPrototypeOf(async () => {})',
  '%AsyncGeneratorPrototype%': 'Object.getPrototypeOf(async function* () {}).prototype',
  '%AsyncIteratorPrototype%': 'Object.getPrototypeOf(Object.getPrototypeOf(async function* () {}).prototype)',
  '%ArrayIteratorPrototype%': 'Object.getPrototypeOf([][Symbol.iterator]())',
  '%MapIteratorPrototype%': 'Object.getPrototypeOf(new Map()[Symbol.iterator]())',
  '%SetIteratorPrototype%': 'Object.getPrototypeOf(new Set()[Symbol.iterator]())',
  '%StringIteratorPrototype%': "Object.getPrototypeOf(''[Symbol.iterator]())",
  '%RegExpStringIteratorPrototype%': "Object.getPrototypeOf(/a/[Symbol.matchAll](''))",
  '%IteratorHelperPrototype%': 'Object.getPrototypeOf([].values().map((x) => x))',
  '%WrapForValidIteratorPrototype%':
    'Object.getPrototypeOf(Iterator.from({ next() { return { done: true }; } }))',
  '%SegmentsPrototype%': "Object.getPrototypeOf(new Intl.Segmenter().segment(''))",
  '%SegmentIteratorPrototype%': "Object.getPrototypeOf(new Intl.Segmenter().segment('')[Symbol.iterator]())",
  '%TypedArray%': 'Object.getPrototypeOf(Int8Array)',
  "the errors' stack getter": "Object.getOwnPropertyDescriptor(new Error(), 'stack').get",
  "the errors' stack setter": "Object.getOwnPropertyDescriptor(new Error(), 'stack').set",
  'captureStackTrace getter':
    "(() => { const o = {}; Error.captureStackTrace(o); return Object.getOwnPropertyDescriptor(o, 'stack').get; })()",
  'atob (a helper)': 'atob',
  'virtualToHostDNS (a helper)': 'virtualToHostDNS',
};

const propertyChannel = (name: string, target: string): Channel => ({
  name,
  stash: `((${target}).__stash = value, 1)`,
  read: `(${target}).__stash`,
});

const CHANNELS: Channel[] = [
  {
    name: 'RegExp legacy statics, by matching',
    stash: '/(.+)/.test(value)',
    read: `[RegExp.input, RegExp.$1, RegExp.lastMatch, RegExp.lastParen, RegExp.leftContext, RegExp.rightContext, RegExp['$_'], RegExp['$&'], RegExp['$+'], RegExp['$\`'], RegExp["$'"]].join('|')`,
  },
  { name: 'RegExp.input, assigned', stash: '(RegExp.input = value, 1)', read: 'RegExp.input' },
  { name: 'a global variable', stash: '(globalThis.stash = value, 1)', read: 'globalThis.stash' },
  {
    name: 'a var declared by indirect eval',
    stash: '((0, eval)("var stash = " + JSON.stringify(value)), 1)',
    read: '(0, eval)("typeof stash === \\"undefined\\" ? null : stash")',
  },
  {
    name: 'a global declared by the Function constructor',
    stash: 'Function("v", "stash2 = v")(value)',
    read: 'Function("return typeof stash2 === \\"undefined\\" ? null : stash2")()',
  },
  {
    name: 'Error.prepareStackTrace',
    stash: '(Error.prepareStackTrace = () => value, 1)',
    read: 'new Error("x").stack',
  },
  { name: 'Error.stackTraceLimit', stash: '(Error.stackTraceLimit = 7, 1)', read: 'Error.stackTraceLimit' },
  {
    name: 'Math.random state',
    stash: '(() => { for (let i = 0; i < value.length; i++) Math.random(); return 1; })()',
    read: 'Math.random()',
  },
  {
    name: 'Symbol.for registry (no way to list it)',
    stash: '(Symbol.for(value), 1)',
    read: 'Object.getOwnPropertySymbols(Symbol).map(String).join()',
    naive: false,
  },
  {
    name: 'WeakMap.prototype.get replaced',
    stash: '(WeakMap.prototype.get = function () { return "S3CRET-" + "c2VjcmV0"; }, 1)',
    read: 'new WeakMap().get({})',
  },
  {
    name: 'a WeakMap keyed by an intrinsic, kept on it',
    stash: '(Object.prototype.constructor.__map = new WeakMap([[Object, value]]), 1)',
    read: 'Object.__map && Object.__map.get(Object)',
  },
  {
    name: "the expression's receiver (this)",
    stash: '(this && (this.__stash = value), 1)',
    read: 'this && this.__stash',
  },
  { name: 'the context object', stash: '(context.__stash = value, 1)', read: 'context.__stash' },
  {
    name: 'context.vcluster.config',
    stash: '(context.vcluster.config.__stash = value, 1)',
    read: 'context.vcluster.config.__stash',
  },
  {
    name: 'context.hostObject',
    stash: '(context.hostObject.metadata.__stash = value, 1)',
    read: 'context.hostObject.metadata.__stash',
  },
  {
    name: 'a promise job writing where the next evaluation reads',
    stash: '(Promise.resolve().then(() => { Object.prototype.__job = value; }), 1)',
    read: '({}).__job',
  },
  {
    name: 'a template object (frozen by the language)',
    stash: '((t) => (t.__stash = value, 1))(((s) => s)`x`)',
    read: '((s) => s)`x`.__stash',
    naive: false,
  },
  ...NAMED_INTRINSICS.flatMap((name) => [
    propertyChannel(name, name),
    // Proxy has no prototype.
    ...(name === 'Proxy' ? [] : [propertyChannel(`${name}.prototype`, `${name}.prototype`)]),
  ]),
  ...NAMED_NAMESPACES.map((name) => propertyChannel(name, name)),
  ...Object.entries(HIDDEN_INTRINSICS).map(([name, expression]) => propertyChannel(name, expression)),
];

type Outcome = string;

/** What a read gave, as text ("threw <Class>" when it threw). */
function outcome(read: () => Json | undefined): Outcome {
  try {
    return JSON.stringify(read() ?? null);
  } catch (err) {
    return `threw ${err instanceof Error ? err.name : typeof err}`;
  }
}

/** The naive sandbox: nothing frozen or removed, one shared context, expressions called as methods. */
class NaiveSandbox {
  private readonly isolate = new ivm.Isolate({ memoryLimit: 32 });
  private readonly context = this.isolate.createContextSync();
  private readonly run: ivm.Reference<(source: string, value: string) => string>;
  constructor() {
    this.run = this.isolate
      .compileScriptSync(
        `(() => {
          globalThis.atob = function atob(text) { return text; };
          globalThis.virtualToHostDNS = function virtualToHostDNS(text) { return text; };
          const compiled = [];
          const shared = { vcluster: { name: 'vc', config: {} }, hostObject: { metadata: { name: 'h' } }, virtualObject: null, path: 'x' };
          return (fn, value) => { compiled.push(fn); return JSON.stringify(compiled[compiled.length - 1](JSON.parse(value), true, shared)); };
        })()`,
      )
      .runSync(this.context, { reference: true });
  }
  evaluate(expression: string, value: Json): Json | undefined {
    const fn = this.isolate.compileScriptSync(expressionFunctionSource(expression)).runSync(this.context, {
      reference: true,
    }) as ivm.Reference;
    const text = this.run.applySync(undefined, [fn.derefInto(), JSON.stringify(value)], { timeout: 1000 });
    return text === undefined ? undefined : (JSON.parse(text) as Json);
  }
  dispose() {
    this.isolate.dispose();
  }
}

const ctx = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') };
const objects: EvaluationObjects = {
  hostJson: JSON.stringify({ metadata: { name: 'h' } }),
  virtualJson: null,
};
const evaluation = (expression: string, value: Json): Evaluation => ({
  patch: 'p',
  expression,
  value,
  path: 'x',
});

describe('no evaluation leaves anything for a later one', () => {
  // One sandbox per case (each case starts from a new isolate), disposed after it.
  let disposeAfter: (() => void) | undefined;
  afterEach(() => {
    disposeAfter?.();
    disposeAfter = undefined;
  });

  it.each(CHANNELS.filter((c) => c.naive !== false).map((c) => [c.name, c] as const))(
    'the naive sandbox carries a value through %s',
    (_name, channel) => {
      const naive = new NaiveSandbox();
      disposeAfter = () => naive.dispose();
      const before = outcome(() => naive.evaluate(channel.read, 'read'));
      naive.evaluate(channel.stash, SECRET);
      const after = outcome(() => naive.evaluate(channel.read, 'read'));
      expect(after).not.toBe(before);
    },
  );

  it.each(CHANNELS.map((c) => [c.name, c] as const))('ours carries nothing through %s', (_name, channel) => {
    // Generous limits: no case loops, so none may fail by the machine's load.
    const sandbox = createSandbox(ctx, { timeoutMs: 5000, objectTimeoutMs: 5000 });
    disposeAfter = () => sandbox.dispose();
    const read = () => sandbox.evaluateAll([evaluation(channel.read, 'read')], objects)[0]!;
    const value = (r: ReturnType<typeof read>) => (r.removed ? null : r.value);
    const before = outcome(() => value(read()));
    // The stash may be refused (frozen, its promise job failing), or run without effect.
    outcome(() => value(sandbox.evaluateAll([evaluation(channel.stash, SECRET)], objects)[0]!));
    const after = outcome(() => value(read()));
    expect(after).toBe(before);
    expect(after).not.toContain('S3CRET');
    // Inside one call (the evaluations of one object): read, stash, read. Errors are caught in
    // the expressions, so that a refused stash does not end the call.
    const caught = (expression: string) =>
      `(() => { try { return ${expression}; } catch (e) { return "threw " + e.name; } })()`;
    let inOneCall: string[] | null = null;
    try {
      inOneCall = sandbox
        .evaluateAll(
          [
            evaluation(caught(channel.read), 'read'),
            evaluation(caught(channel.stash), SECRET),
            evaluation(caught(channel.read), 'read'),
          ],
          objects,
        )
        .map((r) => JSON.stringify(r.removed ? null : r.value));
    } catch (err) {
      // A refused promise job fails the whole call: nothing of it is returned.
      expect(err).toBeInstanceOf(ExpressionFailure);
    }
    if (inOneCall !== null) {
      expect(inOneCall[2]).toBe(inOneCall[0]);
      expect(inOneCall[2]).not.toContain('S3CRET');
    }
    expect(outcome(() => value(read()))).toBe(before);
  });
});
