import { describe, expect, test } from 'vitest';
import { judgeClaim, STALE_CLAIM_MS } from './key-id-claims.ts';

describe('key id claims', () => {
  const key = { name: 'mine', uid: 'uid-mine', keyId: 'aaaaaaaaaaaaaaaa' };
  const now = Date.parse('2030-01-01T00:10:00Z');
  const claim = (ownerUid: string, createdAgoMs: number) => ({
    metadata: {
      uid: 'lease',
      creationTimestamp: new Date(now - createdAgoMs).toISOString(),
      ownerReferences: [{ uid: ownerUid, name: 'other' }],
    },
  });

  test("a claim of the key itself is the key's (a retried admission)", () => {
    expect(judgeClaim(claim('uid-mine', 0), key, false, now)).toBe('ours');
  });

  test("another key's claim stands while that key exists, or may still be on its way", () => {
    expect(judgeClaim(claim('uid-other', STALE_CLAIM_MS * 10), key, true, now)).toBe('taken');
    expect(judgeClaim(claim('uid-other', 1000), key, false, now)).toBe('taken');
  });

  test('a claim whose key never came, or is gone, is stale after a while', () => {
    expect(judgeClaim(claim('uid-other', STALE_CLAIM_MS), key, false, now)).toBe('stale');
    const acquired = {
      ...claim('uid-other', 0),
      spec: { acquireTime: new Date(now - STALE_CLAIM_MS).toISOString() },
    };
    expect(judgeClaim(acquired, key, false, now)).toBe('stale');
    expect(judgeClaim({ metadata: {} }, key, false, now)).toBe('taken');
  });
});
