import { ApiException } from '@kubernetes/client-node';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createWithGeneratedName,
  GENERATE_NAME_ATTEMPTS,
  GeneratedNameConflict,
  generateName,
  isAlreadyExists,
  MAX_GENERATED_NAME_LENGTH,
  MAX_PREFIX_LENGTH,
  SUFFIX_ALPHABET,
} from './names.ts';

/** Always the same bytes: every generated name collides with the previous one. */
const constantRandom = (byte: number) => (size: number) => new Uint8Array(size).fill(byte);

/** Bytes from a list, in order, cycling. */
function scriptedRandom(bytes: number[]) {
  let next = 0;
  return (size: number) => Uint8Array.from({ length: size }, () => bytes[next++ % bytes.length]!);
}

const alreadyExists = () =>
  new ApiException(409, 'Conflict', { kind: 'Status', code: 409, reason: 'AlreadyExists' }, {});

describe('generateName', () => {
  it('appends five characters of the apiserver alphabet to a short prefix', () => {
    expect(generateName('key-', constantRandom(0))).toBe('key-bbbbb');
    expect(generateName('key-', constantRandom(26))).toBe('key-99999');
  });

  it('cuts a long prefix to 58 characters so the name stays within 63', () => {
    const prefix = 'a'.repeat(100);
    const name = generateName(prefix, constantRandom(1));
    expect(name).toBe(`${'a'.repeat(MAX_PREFIX_LENGTH)}ccccc`);
    expect(name).toHaveLength(MAX_GENERATED_NAME_LENGTH);
  });

  it('redraws bytes that would bias the alphabet (at or above 243)', () => {
    expect(generateName('x-', scriptedRandom([250, 243, 0, 1, 2, 3, 4]))).toBe('x-bcdfg');
  });

  it('always yields the prefix (truncated) plus five alphabet characters', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 120 }),
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        (prefix, bytes) => {
          const name = generateName(prefix, scriptedRandom([...bytes, 0]));
          const kept = prefix.slice(0, MAX_PREFIX_LENGTH);
          expect(name.startsWith(kept)).toBe(true);
          const suffix = name.slice(kept.length);
          expect(suffix).toHaveLength(5);
          for (const c of suffix) expect(SUFFIX_ALPHABET).toContain(c);
        },
      ),
    );
  });
});

describe('createWithGeneratedName', () => {
  it('retries on AlreadyExists and returns the first create that succeeds', async () => {
    const existing = new Set(['key-bbbbb', 'key-ccccc']);
    const tried: string[] = [];
    const random = scriptedRandom([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]);
    const created = await createWithGeneratedName(
      'key-',
      async (name) => {
        tried.push(name);
        if (existing.has(name)) throw alreadyExists();
        return name;
      },
      { random },
    );
    expect(tried).toEqual(['key-bbbbb', 'key-ccccc', 'key-ddddd']);
    expect(created).toBe('key-ddddd');
  });

  it('answers 409 AlreadyExists when every generated name collides', async () => {
    let calls = 0;
    const attempt = createWithGeneratedName(
      'key-',
      async () => {
        calls++;
        throw alreadyExists();
      },
      { random: constantRandom(3) },
    );
    await expect(attempt).rejects.toBeInstanceOf(GeneratedNameConflict);
    await expect(attempt).rejects.toMatchObject({ code: 409, reason: 'AlreadyExists' });
    expect(calls).toBe(GENERATE_NAME_ATTEMPTS);
  });

  it('passes other errors through without retrying', async () => {
    let calls = 0;
    const forbidden = new ApiException(403, 'Forbidden', { reason: 'Forbidden' }, {});
    const attempt = createWithGeneratedName(
      'key-',
      async () => {
        calls++;
        throw forbidden;
      },
      { random: constantRandom(3) },
    );
    await expect(attempt).rejects.toBe(forbidden);
    expect(calls).toBe(1);
  });

  it('treats a resourceVersion conflict as a conflict, not a taken name', () => {
    expect(isAlreadyExists(alreadyExists())).toBe(true);
    expect(isAlreadyExists(new ApiException(409, 'Conflict', { reason: 'Conflict' }, {}))).toBe(false);
    expect(isAlreadyExists(new Error('409'))).toBe(false);
  });
});
