import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyMergePatch, deepEqual, type Json, mergePatchDiff } from './json.ts';

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
});

describe('deepEqual', () => {
  it('is equality of the JSON documents: an undefined value is an absent key', () => {
    expect(deepEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(deepEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(deepEqual({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(deepEqual({ a: null }, {})).toBe(false);
    expect(deepEqual([], {})).toBe(false);
  });
});
