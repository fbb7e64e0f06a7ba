import fc from 'fast-check';
import type { Json, JsonObject } from '../src/runtime/json.ts';

/**
 * Property-test arbitraries whose keys always include names that `Object.prototype` has (and
 * `__proto__`, a valid ConfigMap or Secret data key): code that reads `obj[key]` as "absent" or
 * assigns `obj[key] = v` gets them wrong. Every record these arbitraries produce holds at least
 * one of them, so a regression fails in every run, not when the generator happens to hit one.
 * Test support only: nothing in production imports this module.
 */

/** Keys that an object literal inherits or that assignment treats specially. */
export const PROTOTYPE_KEYS = [
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__lookupGetter__',
] as const;

/** The prototype keys that are also valid label and annotation keys (`__proto__` and `__*__` are not). */
export const PROTOTYPE_LABEL_KEYS = PROTOTYPE_KEYS.filter((key) => !key.startsWith('_'));

/** One of the prototype keys. */
export function prototypeKey(keys: readonly string[] = PROTOTYPE_KEYS): fc.Arbitrary<string> {
  return fc.constantFrom(...keys);
}

/** A key: a prototype key half of the time, else one of `others`. */
export function objectKey(
  others: fc.Arbitrary<string> = fc.string({ maxLength: 4 }),
  keys: readonly string[] = PROTOTYPE_KEYS,
): fc.Arbitrary<string> {
  return fc.oneof(prototypeKey(keys), others);
}

export interface RecordOptions {
  /** Keys besides the prototype ones (default: short strings). */
  otherKeys?: fc.Arbitrary<string>;
  /** The prototype keys to use (default {@link PROTOTYPE_KEYS}). */
  prototypeKeys?: readonly string[];
  /** Most keys besides the one prototype key every record has (default 4). */
  maxKeys?: number;
}

/**
 * Records that always hold at least one prototype key, with own properties only (built with
 * `Object.fromEntries`, as `JSON.parse` builds them: `__proto__` is a key, not the prototype).
 */
export function recordWithPrototypeKeys<T>(
  value: fc.Arbitrary<T>,
  options: RecordOptions = {},
): fc.Arbitrary<Record<string, T>> {
  const keys = options.prototypeKeys ?? PROTOTYPE_KEYS;
  const entry = fc.tuple(objectKey(options.otherKeys, keys), value);
  return fc
    .tuple(
      fc.tuple(prototypeKey(keys), value),
      fc.uniqueArray(entry, { selector: ([key]) => key, maxLength: options.maxKeys ?? 4 }),
    )
    .map(([first, rest]) => Object.fromEntries([first, ...rest]));
}

/**
 * JSON values whose objects (at every depth) hold at least one prototype key. `null` only where
 * `withNull` says so: merge patches cannot carry a null value.
 */
export function jsonWithPrototypeKeys(options: { withNull?: boolean; maxDepth?: number } = {}): {
  value: fc.Arbitrary<Json>;
  object: fc.Arbitrary<JsonObject>;
} {
  const scalar: fc.Arbitrary<Json> = fc.oneof(
    fc.boolean(),
    fc.integer(),
    fc.string({ maxLength: 4 }),
    ...(options.withNull ? [fc.constant(null)] : []),
  );
  const { value, object } = fc.letrec<{ value: Json; object: JsonObject }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', maxDepth: options.maxDepth ?? 3 },
      scalar,
      fc.array(tie('value'), { maxLength: 2 }),
      tie('object'),
    ),
    object: recordWithPrototypeKeys(tie('value'), { maxKeys: 3 }),
  }));
  return { value, object };
}
