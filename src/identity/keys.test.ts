import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ACCESS_KEY_LENGTH,
  accessKeyIdOf,
  composeAccessKey,
  generateAccessKey,
  hashAccessKey,
  MalformedAccessKey,
  parseAccessKey,
  parseAccessKeyShape,
  type RandomBytes,
  ShortRandomBytes,
  UNMATCHABLE_ACCESS_KEY_HASH,
  verifyAccessKey,
  WeakPepper,
} from './keys.ts';

const PEPPER = 'p'.repeat(32);
const OTHER_PEPPER = 'q'.repeat(32);

/** Deterministic random source: hands out `bytes` in order. */
function fixedRandom(bytes: Uint8Array): RandomBytes {
  let offset = 0;
  return (size) => {
    const chunk = bytes.subarray(offset, offset + size);
    offset += size;
    return chunk;
  };
}

const zeros = () => fixedRandom(new Uint8Array(42));
const ones = () => fixedRandom(new Uint8Array(42).fill(0xff));

describe('generateAccessKey', () => {
  it('has the documented shape for the lowest and highest random values', () => {
    const low = generateAccessKey(zeros());
    expect(low.key).toMatch(/^pak_a{16}_0{43}[0-9A-Za-z]{6}$/);
    const high = generateAccessKey(ones());
    expect(high.id).toBe('7'.repeat(16));
    expect(high.key).toHaveLength(ACCESS_KEY_LENGTH);
    expect(high.key).toMatch(/^pak_[a-z2-7]{16}_[0-9A-Za-z]{49}$/);
  });

  it('round-trips through parseAccessKey for any random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 42, maxLength: 42 }), (bytes) => {
        const generated = generateAccessKey(fixedRandom(bytes));
        expect(generated.key).toHaveLength(70);
        expect(parseAccessKey(generated.key)).toEqual({ id: generated.id, secret: generated.secret });
      }),
    );
  });

  it('gives distinct keys for distinct secrets', () => {
    const a = generateAccessKey(fixedRandom(new Uint8Array(42)));
    const bytes = new Uint8Array(42);
    bytes[41] = 1;
    const b = generateAccessKey(fixedRandom(bytes));
    expect(a.id).toBe(b.id);
    expect(a.secret).not.toBe(b.secret);
  });

  it('refuses a random source that returns too few bytes', () => {
    expect(() => generateAccessKey(fixedRandom(new Uint8Array(20)))).toThrow(ShortRandomBytes);
  });
});

describe('parseAccessKey', () => {
  const valid = generateAccessKey(randomBytes).key;
  const replaceAt = (text: string, index: number, char: string) =>
    text.slice(0, index) + char + text.slice(index + 1);

  it.each([
    ['empty', '', 'length'],
    ['one character short', valid.slice(0, -1), 'length'],
    ['one character long', `${valid}0`, 'length'],
    ['wrong prefix', `pax${valid.slice(3)}`, 'shape'],
    ['uppercase in id', replaceAt(valid, 4, 'A'), 'shape'],
    ['base32-excluded digit in id', replaceAt(valid, 4, '1'), 'shape'],
    ['underscore in secret', replaceAt(valid, 30, '_'), 'shape'],
    ['missing separator', replaceAt(valid, 20, 'a'), 'shape'],
    ['non-ASCII character', replaceAt(valid, 40, 'é'), 'shape'],
    ['secret above 2^256', `pak_${'a'.repeat(16)}_${'z'.repeat(43)}000000`, 'shape'],
  ])('refuses %s', (_case, text, problem) => {
    const result = parseAccessKey(text);
    expect(result).toBeInstanceOf(MalformedAccessKey);
    expect((result as MalformedAccessKey).problem).toBe(problem);
  });

  it('refuses every single-character change that keeps the shape (checksum)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: ACCESS_KEY_LENGTH - 1 }),
        fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz234567'),
        (index, char) => {
          fc.pre(index !== 20 && valid[index] !== char);
          const changed = replaceAt(valid, index, char);
          expect(parseAccessKey(changed)).toBeInstanceOf(MalformedAccessKey);
        },
      ),
    );
  });

  it('never quotes the key in the error message', () => {
    const result = parseAccessKey(replaceAt(valid, 69, valid[69] === '0' ? '1' : '0'));
    expect(result).toBeInstanceOf(MalformedAccessKey);
    expect((result as Error).message).not.toContain(valid.slice(21, 50));
  });
});

describe('accessKeyIdOf (the request path parse)', () => {
  const highest = generateAccessKey(ones());
  const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  /**
   * The format's definition, as the module comment of keys.ts writes it (checksum aside): the key
   * shape, and a secret that 32 bytes can give (at most 2^256 - 1).
   */
  const SHAPE = /^pak_([a-z2-7]{16})_([0-9A-Za-z]{43})[0-9A-Za-z]{6}$/;
  const fromBase62 = (digits: string) =>
    [...digits].reduce((n, d) => n * 62n + BigInt(BASE62.indexOf(d)), 0n);
  const idByDefinition = (text: string) => {
    const shape = SHAPE.exec(text);
    return shape && fromBase62(shape[2]!) < 1n << 256n ? shape[1]! : undefined;
  };

  it('answers the id of exactly the texts of the key shape', () => {
    fc.assert(
      fc.property(
        // The key is drawn too (not crypto.randomBytes), so that a failure's seed replays it.
        fc.uint8Array({ minLength: 42, maxLength: 42 }),
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: ACCESS_KEY_LENGTH - 1 }),
            fc.constantFrom(...'pakx_Aa27190zZé\u0000'),
          ),
          { maxLength: 3 },
        ),
        (bytes, changes) => {
          let text = generateAccessKey(fixedRandom(bytes)).key;
          for (const [index, char] of changes) text = text.slice(0, index) + char + text.slice(index + 1);
          const id = accessKeyIdOf(text);
          const expected = idByDefinition(text);
          if (expected !== undefined) expect(id).toBe(expected);
          else expect(id).toBeInstanceOf(MalformedAccessKey);
          const full = parseAccessKeyShape(text);
          expect(full instanceof MalformedAccessKey ? full : full.id).toEqual(id);
        },
      ),
    );
  });

  it('takes the highest secret 32 bytes can give and refuses every secret above it', () => {
    expect(accessKeyIdOf(highest.key)).toBe(highest.id);
    for (let i = 0; i < highest.secret.length; i++) {
      const digit = BASE62.indexOf(highest.secret[i]!);
      for (const [next, refused] of [
        [digit + 1, true],
        [digit - 1, false],
      ] as const) {
        if (next < 0 || next >= BASE62.length) continue;
        const secret = highest.secret.slice(0, i) + BASE62[next] + highest.secret.slice(i + 1);
        const result = accessKeyIdOf(composeAccessKey(highest.id, secret));
        if (refused) expect((result as MalformedAccessKey).problem, `secret digit ${i} up`).toBe('shape');
        else expect(result, `secret digit ${i} down`).toBe(highest.id);
      }
    }
  });
});

describe('hashAccessKey / verifyAccessKey', () => {
  const key = generateAccessKey(randomBytes).key;
  const other = generateAccessKey(randomBytes).key;

  it('stores a tagged, deterministic HMAC that does not contain the key', () => {
    const hash = hashAccessKey(key, PEPPER);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hashAccessKey(key, PEPPER)).toBe(hash);
    expect(hash).not.toContain(key.slice(21, 64));
    expect(hashAccessKey(key, OTHER_PEPPER)).not.toBe(hash);
  });

  it('verifies the right key and pepper only', () => {
    const hash = hashAccessKey(key, PEPPER);
    expect(verifyAccessKey(key, hash, PEPPER)).toBe(true);
    expect(verifyAccessKey(other, hash, PEPPER)).toBe(false);
    expect(verifyAccessKey(key, hash, OTHER_PEPPER)).toBe(false);
    expect(verifyAccessKey(key, UNMATCHABLE_ACCESS_KEY_HASH, PEPPER)).toBe(false);
  });

  it.each([
    ['tagged', () => `hmac-sha256:${hashAccessKey(key, PEPPER)}`],
    ['uppercase hex', () => hashAccessKey(key, PEPPER).toUpperCase()],
    ['truncated', () => hashAccessKey(key, PEPPER).slice(0, -2)],
    ['extended', () => `${hashAccessKey(key, PEPPER)}00`],
    ['empty', () => ''],
  ])('refuses a stored hash that is %s', (_case, stored) => {
    expect(verifyAccessKey(key, stored(), PEPPER)).toBe(false);
  });

  it('refuses a pepper shorter than 32 bytes', () => {
    expect(() => hashAccessKey(key, 'short')).toThrow(WeakPepper);
    expect(() => verifyAccessKey(key, UNMATCHABLE_ACCESS_KEY_HASH, new Uint8Array(31))).toThrow(WeakPepper);
  });
});
