import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AccessKeyLifetimeFields,
  AccessKeyWithoutCreationTimestamp,
  accessKeyExpiry,
} from './expiry.ts';

const CREATED = '2025-01-01T00:00:00Z';
const T0 = Date.parse(CREATED);
const iso = (ms: number) => new Date(ms).toISOString();
const DAY = 86_400;

function key(spec: AccessKeyLifetimeFields['spec'], lastActivityMs?: number): AccessKeyLifetimeFields {
  return {
    metadata: { creationTimestamp: CREATED },
    spec,
    status: lastActivityMs === undefined ? {} : { lastActivity: iso(lastActivityMs) },
  };
}

describe('accessKeyExpiry', () => {
  it.each([
    ['no ttl, no max', key({}), {}, null],
    ['ttl 0 means none', key({ ttl: 0 }), {}, null],
    ['ttl from creation', key({ ttl: 60 }, T0 + 30_000), {}, T0 + 60_000],
    ['ttl from last activity', key({ ttl: 60, ttlAfterLastActivity: true }, T0 + 30_000), {}, T0 + 90_000],
    ['activity falls back to creation', key({ ttl: 60, ttlAfterLastActivity: true }), {}, T0 + 60_000],
    [
      'activity before creation is ignored',
      key({ ttl: 60, ttlAfterLastActivity: true }, T0 - 50_000),
      {},
      T0 + 60_000,
    ],
    ['max alone', key({}), { accessKeyMaxTTLSeconds: 100 }, T0 + 100_000],
    ['max 0 means none', key({ ttl: 60 }), { accessKeyMaxTTLSeconds: 0 }, T0 + 60_000],
    ['max shorter than ttl', key({ ttl: 600 }), { accessKeyMaxTTLSeconds: 100 }, T0 + 100_000],
    [
      'max caps activity',
      key({ ttl: 60, ttlAfterLastActivity: true }, T0 + 90_000),
      { accessKeyMaxTTLSeconds: 100 },
      T0 + 100_000,
    ],
    ['login key default 20 days', key({ type: 'Login' }), {}, T0 + 20 * DAY * 1000],
    ['login key configured ttl', key({ type: 'Login' }), { loginAccessKeyTTLSeconds: 60 }, T0 + 60_000],
    ['login key ttl 0 means none', key({ type: 'Login' }), { loginAccessKeyTTLSeconds: 0 }, null],
    [
      'login key own ttl wins',
      key({ type: 'Login', ttl: 30 }),
      { loginAccessKeyTTLSeconds: 60 },
      T0 + 30_000,
    ],
    ['login ttl only for Login keys', key({ type: 'User' }), { loginAccessKeyTTLSeconds: 60 }, null],
    [
      'login ttl counts from activity',
      key({ type: 'Login', ttlAfterLastActivity: true }, T0 + 5_000),
      { loginAccessKeyTTLSeconds: 60 },
      T0 + 65_000,
    ],
  ] as const)('%s', (_case, lifetime, limits, expected) => {
    expect(accessKeyExpiry(lifetime, limits)).toEqual(expected === null ? null : new Date(expected));
  });

  it('uses recent unwritten activity when it is later than the stored one', () => {
    const lifetime = key({ ttl: 60, ttlAfterLastActivity: true }, T0 + 10_000);
    expect(accessKeyExpiry(lifetime, {}, new Date(T0 + 20_000))).toEqual(new Date(T0 + 80_000));
    expect(accessKeyExpiry(lifetime, {}, new Date(T0 + 5_000))).toEqual(new Date(T0 + 70_000));
  });

  it('fails closed without a creation timestamp when a limit applies', () => {
    expect(() => accessKeyExpiry({ spec: { ttl: 1 } }, {})).toThrow(AccessKeyWithoutCreationTimestamp);
    expect(accessKeyExpiry({ spec: {} }, {})).toBeNull();
  });

  const lifetimes = fc.record({
    ttl: fc.option(fc.integer({ min: 0, max: 10 * DAY }), { nil: undefined }),
    ttlAfterLastActivity: fc.option(fc.boolean(), { nil: undefined }),
    type: fc.option(fc.constantFrom('Login' as const, 'User' as const, '' as const), { nil: undefined }),
  });
  const activity = fc.option(fc.integer({ min: -DAY * 1000, max: 30 * DAY * 1000 }), { nil: undefined });
  const loginTTL = fc.option(fc.integer({ min: 0, max: 30 * DAY }), { nil: undefined });

  it('is never later than creation + max when a max is set', () => {
    fc.assert(
      fc.property(
        lifetimes,
        activity,
        loginTTL,
        fc.integer({ min: 1, max: 30 * DAY }),
        (spec, offset, login, max) => {
          const expiry = accessKeyExpiry(key(spec, offset === undefined ? undefined : T0 + offset), {
            accessKeyMaxTTLSeconds: max,
            loginAccessKeyTTLSeconds: login,
          });
          expect(expiry).not.toBeNull();
          expect(expiry!.getTime()).toBeLessThanOrEqual(T0 + max * 1000);
        },
      ),
    );
  });

  it('is monotone in the last activity with ttlAfterLastActivity', () => {
    fc.assert(
      fc.property(
        lifetimes,
        fc.integer({ min: 0, max: 30 * DAY * 1000 }),
        fc.integer({ min: 0, max: 30 * DAY * 1000 }),
        fc.option(fc.integer({ min: 0, max: 30 * DAY }), { nil: undefined }),
        (spec, a, b, max) => {
          const withActivity = { ...spec, ttlAfterLastActivity: true };
          const limits = { accessKeyMaxTTLSeconds: max };
          const earlier = accessKeyExpiry(key(withActivity, T0 + Math.min(a, b)), limits);
          const later = accessKeyExpiry(key(withActivity, T0 + Math.max(a, b)), limits);
          if (earlier === null) expect(later).toBeNull();
          else expect(later === null || later.getTime() >= earlier.getTime()).toBe(true);
        },
      ),
    );
  });
});
