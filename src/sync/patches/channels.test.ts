import ivm from 'isolated-vm';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';
import { expressionFunctionSource } from './expression.ts';
import { ExpressionFailure } from './expression-failures.ts';
import type { Json } from './merge-patch.ts';
import type { Evaluation, EvaluationObjects } from './sandbox.ts';

/**
 * A sandbox that forgets: every channel we know of through which one evaluation could leave a
 * value for a later one (the attack: a Secret patch stashes the Secret's data, a later ConfigMap
 * patch reads it and throws it into an Event). Each case is a pair of expressions: `stash` gets
 * the secret as its value and tries to leave it somewhere; `read` tries to find it. A case
 * carries a value when `read` gives something else after `stash` ran than before.
 *
 * Each case is first made against a naive sandbox (an isolate whose realm nothing protects, one
 * context object shared by every evaluation, expressions called as methods of their registry,
 * results serialized by a cached JSON.stringify), where its stash must run and its read must then
 * find the secret (or, for channels that carry no text, something else than before): so every
 * case probes a real channel and can fail. Then against ours, where it must not carry anything:
 * in separate calls, and inside one call (the evaluations of one object); there the stash must
 * have been evaluated (run, or refused by the frozen realm), never rejected before it ran.
 *
 * Tried and no channel in any realm, so not a case: a template object (frozen by the language),
 * listing the Symbol registry (the language has no way to).
 */

const SECRET = 'S3CRET-c2VjcmV0';

interface Channel {
  name: string;
  /** Runs with the secret as `value`; must not throw in the naive realm. */
  stash: string;
  read: string;
  /**
   * What the read finds in the naive realm after the stash: the secret (the default), or only a
   * change (a channel that carries state, not text: Math.random's, Error.stackTraceLimit).
   */
  carries?: 'secret' | 'change';
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
  'btoa (a helper)': 'btoa',
  'virtualToHostDNS (a helper)': 'virtualToHostDNS',
};

/** The helpers the prelude defines once per isolate: functions every evaluation calls. */
const HELPERS = ['atob', 'btoa', 'virtualToHostDNS'];
/** A function closing over the value: whoever can call it later reads the secret. */
const CLOSURE = '((kept) => () => kept)(value)';

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
  {
    name: 'Error.stackTraceLimit',
    stash: '(Error.stackTraceLimit = 7, 1)',
    read: 'Error.stackTraceLimit',
    carries: 'change',
  },
  {
    name: 'Math.random state',
    stash: '(() => { for (let i = 0; i < value.length; i++) Math.random(); return 1; })()',
    read: 'Math.random()',
    carries: 'change',
  },
  // The Symbol registry is the realm's: Symbol.for('x') gives every evaluation the same symbol.
  // The secret goes into the registry (as the key of a registered symbol) and its only handle is
  // kept under another registered symbol; the read finds both again through the registry alone.
  {
    name: 'the Symbol registry: a registered symbol kept under Symbol.for(key) on Symbol.prototype',
    stash: "(Symbol.prototype[Symbol.for('platform.stash')] = Symbol.for(value), 1)",
    read: "(() => { const kept = Symbol.for('platform.stash')[Symbol.for('platform.stash')]; return typeof kept === 'symbol' ? Symbol.keyFor(kept) : null; })()",
  },
  {
    name: 'the Symbol registry: a registered symbol kept under Symbol.for(key) on the global object',
    stash:
      "(Object.defineProperty(globalThis, Symbol.for('platform.stash'), { value: Symbol.for(value) }), 1)",
    read: "(() => { const kept = globalThis[Symbol.for('platform.stash')]; return typeof kept === 'symbol' ? Symbol.keyFor(kept) : null; })()",
  },
  {
    name: 'the Symbol registry: a closure kept on Symbol.for itself, under a registered symbol',
    stash: `(Symbol.for[Symbol.for('platform.stash')] = ${CLOSURE}, 1)`,
    read: "(() => { const kept = Symbol.for[Symbol.for('platform.stash')]; return typeof kept === 'function' ? kept() : null; })()",
  },
  // Closures over cached functions: functions the realm keeps from one evaluation to the next
  // (the helpers, the compiled expressions, the runner's own JSON.stringify) made to hold or
  // call a function that closes over the secret.
  ...HELPERS.map(
    (helper): Channel => ({
      name: `a closure kept on the cached helper ${helper}`,
      stash: `(${helper}.__keep = ${CLOSURE}, 1)`,
      read: `typeof ${helper}.__keep === 'function' ? ${helper}.__keep() : null`,
    }),
  ),
  ...HELPERS.map(
    (helper): Channel => ({
      name: `a closure behind the cached helper ${helper}'s prototype`,
      stash: `(Object.getPrototypeOf(${helper}).__keep = ${CLOSURE}, 1)`,
      read: `typeof ${helper}.__keep === 'function' ? ${helper}.__keep() : null`,
    }),
  ),
  {
    name: 'a closure kept on the cached compiled expressions (as their receiver holds them)',
    stash: `(this && this.forEach((fn) => { fn.__keep = ${CLOSURE}; }), 1)`,
    read: "(() => { const fn = this && this.find((f) => typeof f.__keep === 'function'); return fn ? fn.__keep() : null; })()",
  },
  {
    name: "a closure the runner's cached JSON.stringify calls (toJSON on Object.prototype)",
    stash: '(Object.prototype.toJSON = ((kept) => function () { return kept; })(value), 1)',
    read: '({ nothing: "here" })',
  },
  {
    name: "a closure the runner's cached JSON.stringify calls (toJSON on Array.prototype)",
    stash: '(Array.prototype.toJSON = ((kept) => function () { return kept; })(value), 1)',
    read: '["nothing here"]',
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
          globalThis.btoa = function btoa(text) { return text; };
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

  it.each(CHANNELS.map((c) => [c.name, c] as const))(
    'the naive sandbox carries a value through %s',
    (_name, channel) => {
      const naive = new NaiveSandbox();
      disposeAfter = () => naive.dispose();
      const before = outcome(() => naive.evaluate(channel.read, 'read'));
      expect(before).not.toContain('S3CRET');
      // The stash runs (so the case is one an unprotected realm falls for)...
      expect(() => naive.evaluate(channel.stash, SECRET)).not.toThrow();
      // ...and the read, in a later evaluation, finds what it left.
      const after = outcome(() => naive.evaluate(channel.read, 'read'));
      if ((channel.carries ?? 'secret') === 'secret') expect(after).toContain('S3CRET');
      else expect(after).not.toBe(before);
    },
  );

  it.each(CHANNELS.map((c) => [c.name, c] as const))('ours carries nothing through %s', (_name, channel) => {
    // Generous limits: no case loops, so none may fail by the machine's load.
    const sandbox = createSandbox(ctx, { timeoutMs: 5000, objectTimeoutMs: 5000 });
    disposeAfter = () => sandbox.dispose();
    const read = () => sandbox.evaluateAll([evaluation(channel.read, 'read')], objects)[0]!;
    const value = (r: ReturnType<typeof read>) => (r.removed ? null : r.value);
    const before = outcome(() => value(read()));
    // The stash is evaluated: it runs without effect, or the realm refuses it (frozen, its
    // promise job failing); it is never turned away before it ran (it compiles).
    let stashed: string;
    try {
      stashed = JSON.stringify(value(sandbox.evaluateAll([evaluation(channel.stash, SECRET)], objects)[0]!));
    } catch (err) {
      expect(err).toBeInstanceOf(ExpressionFailure);
      stashed = (err as Error).message;
    }
    expect(stashed).not.toMatch(/SyntaxError|not a single expression/);
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
