import { describe, expect, it } from 'vitest';
import { createMergePatch } from './apply.ts';

describe('createMergePatch', () => {
  it('is undefined when nothing changed, so patchStatus skips the request', () => {
    expect(createMergePatch({ a: 1, list: [{ x: 1 }] }, { list: [{ x: 1 }], a: 1 })).toBeUndefined();
  });

  it('sets changed keys, nulls removed ones, and replaces arrays whole', () => {
    expect(
      createMergePatch(
        { a: 1, gone: 'x', nested: { keep: 1, drop: 2 }, list: [1, 2] },
        { a: 2, nested: { keep: 1 }, list: [2] },
      ),
    ).toEqual({
      a: 2,
      gone: null,
      nested: { drop: null },
      list: [2],
    });
  });
});
