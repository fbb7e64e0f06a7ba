import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashPassword, passwordProblem, verifyPassword } from './password.ts';

const random = (size: number) => randomBytes(size);
const FAST = { logN: 10, r: 8, p: 1 };

describe('password hashes', () => {
  it('stores scrypt in PHC form with its parameters and a fresh salt, never the password', async () => {
    const a = await hashPassword('correct horse battery', random);
    const b = await hashPassword('correct horse battery', random);
    expect(a).toMatch(/^\$scrypt\$ln=15,r=8,p=3\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]{43}$/);
    expect(a).not.toEqual(b);
    expect(a).not.toContain('correct');
  });

  it('accepts the password and refuses any other', async () => {
    const stored = await hashPassword('correct horse battery', random, FAST);
    expect((await verifyPassword('correct horse battery', stored)).ok).toBe(true);
    expect((await verifyPassword('correct horse batterY', stored)).ok).toBe(false);
    expect((await verifyPassword('', stored)).ok).toBe(false);
  });

  it('compares Unicode passwords by their characters (NFC), however typed', async () => {
    const stored = await hashPassword('caf\u00e9-latte-42', random, FAST);
    expect((await verifyPassword('cafe\u0301-latte-42', stored)).ok).toBe(true);
  });

  it('asks for a new hash after a match with weaker parameters than today', async () => {
    const weak = await hashPassword('correct horse battery', random, FAST);
    expect(await verifyPassword('correct horse battery', weak)).toEqual({ ok: true, rehash: true });
    expect((await verifyPassword('wrong password', weak)).rehash).toBe(false);
  });

  it('never matches a missing, malformed or work-bomb hash', async () => {
    // Each of these is checked against the dummy hash of today's parameters: FAST ones here, so the
    // test does not do four 32 MiB derivations (it timed out on a loaded machine). The work bomb
    // (N = 2^30) must still be refused unparsed: deriving with it fails past maxmem.
    for (const stored of [
      undefined,
      '',
      'plaintext',
      `$scrypt$ln=30,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$${'A'.repeat(43)}`,
    ]) {
      expect((await verifyPassword('anything at all', stored, FAST)).ok).toBe(false);
    }
  });

  it('sets only passwords of 8 to 1024 characters', () => {
    expect(passwordProblem('short')?.message).toMatch(/at least 8/);
    expect(passwordProblem('x'.repeat(1025))?.message).toMatch(/at most 1024/);
    expect(passwordProblem(42)).toBeDefined();
    expect(passwordProblem('long enough')).toBeUndefined();
  });
});
