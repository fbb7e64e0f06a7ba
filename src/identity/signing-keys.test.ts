import { describe, expect, it } from 'vitest';
import {
  currentSigningKey,
  DEFAULT_ROTATION_POLICY,
  type KeyFactory,
  publicJwks,
  type RotationPolicy,
  rotateKeyRing,
  type SigningKey,
} from './signing-keys.ts';

const HOUR = 3600_000;
const policy: RotationPolicy = { rotationPeriodMs: 10 * HOUR, publishLeadMs: HOUR, maxTokenTtlMs: 5 * HOUR };

function factory(): KeyFactory {
  let n = 0;
  return async () => {
    n += 1;
    return { kid: `k${n}`, privateJwk: { kty: 'EC', crv: 'P-256', x: `x${n}`, y: `y${n}`, d: `secret${n}` } };
  };
}

/** Advances hour by hour, rotating as a gateway would on each use; returns the ring at each hour. */
async function simulate(hours: number) {
  const generate = factory();
  let ring: readonly SigningKey[] = [];
  const timeline: { hour: number; signing: string | undefined; published: string[] }[] = [];
  for (let hour = 0; hour <= hours; hour++) {
    ring = await rotateKeyRing(ring, hour * HOUR, policy, generate);
    timeline.push({
      hour,
      signing: currentSigningKey(ring, hour * HOUR)?.kid,
      published: publicJwks(ring).keys.map((key) => String(key.kid ?? key.x)),
    });
  }
  return timeline;
}

describe('rotateKeyRing', () => {
  it('signs with the first key at once, publishes a successor before it signs, and keeps retired keys for the longest token', async () => {
    const timeline = await simulate(40);
    const at = (hour: number) => timeline[hour]!;
    expect(at(0).signing).toBe('k1');
    // k2 is made after the rotation period and published an hour before it signs.
    expect(at(9).published).toEqual(['x1']);
    expect(at(10).published).toEqual(['x1', 'x2']);
    expect(at(10).signing).toBe('k1');
    expect(at(11).signing).toBe('k2');
    // k1 retired at hour 11 and verifies tokens until 11 + 5.
    expect(at(15).published).toContain('x1');
    expect(at(16).published).not.toContain('x1');
    // Steady state: never more than two keys published, always one signing.
    for (const entry of timeline) {
      expect(entry.signing).toBeDefined();
      expect(entry.published.length).toBeLessThanOrEqual(2);
    }
  });

  it('every token stays verifiable until it expires', async () => {
    const generate = factory();
    let ring: readonly SigningKey[] = [];
    const issued: { kid: string; expires: number }[] = [];
    for (let t = 0; t <= 60 * HOUR; t += HOUR / 4) {
      ring = await rotateKeyRing(ring, t, policy, generate);
      const published = new Set(ring.map((key) => key.kid));
      for (const token of issued) if (token.expires > t) expect(published.has(token.kid)).toBe(true);
      issued.push({ kid: currentSigningKey(ring, t)!.kid, expires: t + policy.maxTokenTtlMs });
    }
  });

  it('returns the same ring when nothing is due (so nothing is written)', async () => {
    const generate = factory();
    const ring = await rotateKeyRing([], 0, policy, generate);
    expect(await rotateKeyRing(ring, HOUR, policy, generate)).toBe(ring);
  });

  it('by default, a successor every 30 days, published ten minutes before it signs (docs/trust.md)', async () => {
    const DAY = 24 * HOUR;
    const generate = factory();
    const first = await rotateKeyRing([], 0, DEFAULT_ROTATION_POLICY, generate);
    expect(await rotateKeyRing(first, 30 * DAY - 1, DEFAULT_ROTATION_POLICY, generate)).toBe(first);
    const rotated = await rotateKeyRing(first, 30 * DAY, DEFAULT_ROTATION_POLICY, generate);
    expect(rotated.map((key) => key.kid)).toEqual(['k1', 'k2']);
    expect(currentSigningKey(rotated, 30 * DAY + 10 * 60_000 - 1)?.kid).toBe('k1');
    expect(currentSigningKey(rotated, 30 * DAY + 10 * 60_000)?.kid).toBe('k2');
  });

  it('publishes no private key material', async () => {
    const ring = await rotateKeyRing([], 0, policy, factory());
    expect(JSON.stringify(publicJwks(ring))).not.toContain('secret');
  });
});
