import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonWithPrototypeKeys, PROTOTYPE_KEYS } from '../../test-support/prototype-keys.ts';
import { applyMergePatch, cloneJson, deepEqual, type Json, mergePatchDiff } from './json.ts';

/** What an apiserver would send: own keys only, `__proto__` among them. */
const parsed = (text: string) => JSON.parse(text) as { [key: string]: Json };

describe('mergePatchDiff', () => {
  it('is empty when nothing changed (key order and undefined values do not count)', () => {
    expect(mergePatchDiff({ a: 1, list: [{ x: 1 }] }, { list: [{ x: 1 }], a: 1, b: undefined })).toEqual({});
  });

  it('sets changed keys, nulls removed and undefined ones, and replaces arrays whole', () => {
    expect(
      mergePatchDiff(
        { a: 1, gone: 'x', unset: 'y', nested: { keep: 1, drop: 2 }, list: [1, 2] },
        { a: 2, unset: undefined, nested: { keep: 1 }, list: [2] },
      ),
    ).toEqual({ a: 2, gone: null, unset: null, nested: { drop: null }, list: [2] });
  });

  // Merge patches cannot carry a null value (null deletes), so the documents hold none.
  const withoutNulls = (v: Json): Json | undefined => {
    if (v === null) return undefined;
    if (Array.isArray(v)) return v.map(withoutNulls).filter((x): x is Json => x !== undefined);
    if (typeof v === 'object')
      return Object.fromEntries(
        Object.entries(v)
          .map(([k, x]) => [k, withoutNulls(x)] as const)
          .filter((e): e is readonly [string, Json] => e[1] !== undefined),
      );
    return v;
  };
  const jsonObject = fc
    .dictionary(fc.constantFrom('a', 'b', 'c'), fc.jsonValue() as fc.Arbitrary<Json>)
    .map((o) => withoutNulls(o) as { [key: string]: Json });

  it('applied to `before`, the patch gives `after`', () => {
    fc.assert(
      fc.property(jsonObject, jsonObject, (before, after) => {
        expect(applyMergePatch(before, mergePatchDiff(before, after))).toEqual(after);
      }),
    );
  });

  // Keys named like Object.prototype's members are ordinary keys: every generated object holds
  // at least one, and the examples are the cases a regression broke (issue 29).
  const withPrototypeKeys = jsonWithPrototypeKeys().object;
  const prototypeKeyExamples: [{ [key: string]: Json }, { [key: string]: Json }][] = [
    [{ c: { valueOf: 0 } }, { c: {} }],
    [parsed('{"__proto__": {"a": 1}, "constructor": "x", "toString": "y", "plain": "z"}'), { a: '1' }],
    [{ a: '1' }, parsed('{"__proto__": "p", "constructor": {"b": 2}, "hasOwnProperty": 3}')],
    [parsed('{"__proto__": {"a": 1}}'), parsed('{"__proto__": {"a": 2}}')],
  ];

  it('is exact for keys named like Object.prototype members, `__proto__` included', () => {
    fc.assert(
      fc.property(withPrototypeKeys, withPrototypeKeys, (before, after) => {
        const patch = mergePatchDiff(before, after);
        const applied = applyMergePatch(before, patch);
        // Through JSON, as the apiserver receives the patch and sends the object back.
        expect(JSON.stringify(sortedKeys(applied))).toBe(JSON.stringify(sortedKeys(after)));
        const sent = applyMergePatch(parsed(JSON.stringify(before)), parsed(JSON.stringify(patch)));
        expect(JSON.stringify(sortedKeys(sent))).toBe(JSON.stringify(sortedKeys(after)));
      }),
      { examples: prototypeKeyExamples },
    );
  });

  it('deletes a removed `constructor`, `toString` or `__proto__` key and writes an added one', () => {
    expect(mergePatchDiff({ c: { valueOf: 0 } }, { c: {} })).toEqual({ c: { valueOf: null } });
    const patch = mergePatchDiff(parsed('{"__proto__": "1", "constructor": "2", "toString": "3"}'), {});
    expect(JSON.parse(JSON.stringify(patch))).toEqual(
      parsed('{"__proto__": null, "constructor": null, "toString": null}'),
    );
    expect(JSON.stringify(mergePatchDiff({}, parsed('{"__proto__": "1"}')))).toBe('{"__proto__":"1"}');
    expect(Object.getPrototypeOf(applyMergePatch({}, parsed('{"__proto__": {"polluted": 1}}')))).toBe(
      Object.prototype,
    );
  });
});

/** A JSON value with object keys in one order, so JSON texts compare as documents. */
function sortedKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys(value[key] as Json)]),
  );
}

describe('cloneJson', () => {
  it('copies every own key, `__proto__` as a key and not as the prototype', () => {
    fc.assert(
      fc.property(jsonWithPrototypeKeys({ withNull: true }).value, (value) => {
        const copy = cloneJson(value);
        expect(JSON.stringify(copy)).toBe(JSON.stringify(value));
      }),
    );
    const copy = cloneJson(parsed('{"__proto__": {"polluted": true}}'));
    expect(Object.keys(copy)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
  });
});

describe('deepEqual', () => {
  it('is equality of the JSON documents: an undefined value is an absent key', () => {
    expect(deepEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(deepEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(deepEqual({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(deepEqual({ a: null }, {})).toBe(false);
    expect(deepEqual([], {})).toBe(false);
  });

  it('is equality of the JSON texts (keys sorted), for objects that always hold prototype-named keys', () => {
    const { value } = jsonWithPrototypeKeys({ withNull: true });
    fc.assert(
      fc.property(value, value, (a, b) => {
        expect(deepEqual(a, parsed(JSON.stringify({ v: a })).v)).toBe(true);
        expect(deepEqual(a, b)).toBe(JSON.stringify(sortedKeys(a)) === JSON.stringify(sortedKeys(b)));
      }),
      { examples: [[parsed('{"constructor": {}}'), parsed('{"toString": {}}')]] },
    );
  });

  it('tells apart objects that differ only in keys named like Object.prototype members', () => {
    for (const key of PROTOTYPE_KEYS) {
      expect(deepEqual(parsed(`{"${key}": 1}`), { other: 1 })).toBe(false);
      expect(deepEqual({ other: 1 }, parsed(`{"${key}": 1}`))).toBe(false);
      expect(deepEqual(parsed(`{"${key}": {}}`), parsed(`{"${key}": {}}`))).toBe(true);
    }
  });
});
