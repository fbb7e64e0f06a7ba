import { describe, expect, test } from 'vitest';
import { AuthFailureLimiter } from './throttle.ts';

describe('failed authentication limits', () => {
  test('per source and per key id, with the wait', async () => {
    const limiter = new AuthFailureLimiter({
      perSource: { failures: 3, windowSeconds: 60, blockSeconds: 30 },
      perKey: { failures: 2, windowSeconds: 60, blockSeconds: 120 },
    });
    expect(await limiter.blockedFor('1.2.3.4', undefined)).toBeUndefined();
    for (let i = 0; i < 3; i++) await limiter.failed('1.2.3.4', undefined);
    expect(await limiter.blockedFor('1.2.3.4', undefined)).toBeUndefined();
    expect(await limiter.failed('1.2.3.4', undefined)).toBe(30);
    expect(await limiter.blockedFor('1.2.3.4', undefined)).toBe(30);
    expect(await limiter.blockedFor('5.6.7.8', undefined)).toBeUndefined();
    for (let i = 0; i < 3; i++) await limiter.failed(`10.0.0.${i}`, 'key');
    expect(await limiter.blockedFor('9.9.9.9', 'key')).toBe(120);
    expect(await limiter.blockedFor('9.9.9.9', 'other')).toBeUndefined();
  });

  test('the synchronous pre-check: no limiter call while nobody failed recently', async () => {
    let now = 1_000_000;
    const limiter = new AuthFailureLimiter(
      {
        perSource: { failures: 1, windowSeconds: 10, blockSeconds: 20 },
        perKey: { failures: 1, windowSeconds: 10, blockSeconds: 50 },
      },
      () => now,
    );
    expect(limiter.watching()).toBe(false);
    expect(limiter.mayBeBlocked('1.2.3.4', 'key')).toBe(false);
    await limiter.failed('1.2.3.4', 'key');
    expect(limiter.watching()).toBe(true);
    expect(limiter.mayBeBlocked('1.2.3.4', undefined)).toBe(true);
    expect(limiter.mayBeBlocked('9.9.9.9', 'key')).toBe(true);
    expect(limiter.mayBeBlocked('9.9.9.9', 'other')).toBe(false);
    // Window plus block after the last failure, nothing can be held any more.
    now += 30_000;
    expect(limiter.mayBeBlocked('1.2.3.4', undefined)).toBe(false);
    expect(limiter.mayBeBlocked('9.9.9.9', 'key')).toBe(true);
    now += 30_000;
    expect(limiter.mayBeBlocked('9.9.9.9', 'key')).toBe(false);
    expect(limiter.watching()).toBe(false);
  });

  test('whatever blockedFor reports blocked, mayBeBlocked reports too', async () => {
    const limiter = new AuthFailureLimiter({
      perSource: { failures: 2, windowSeconds: 60, blockSeconds: 30 },
      perKey: { failures: 1, windowSeconds: 60, blockSeconds: 120 },
    });
    for (let i = 0; i < 3; i++) await limiter.failed('1.2.3.4', `key-${i}`);
    for (const [source, key] of [
      ['1.2.3.4', undefined],
      ['5.6.7.8', 'key-0'],
      ['5.6.7.8', 'key-9'],
    ] as const) {
      if ((await limiter.blockedFor(source, key)) !== undefined) {
        expect(limiter.mayBeBlocked(source, key)).toBe(true);
      }
    }
    expect(await limiter.blockedFor('1.2.3.4', undefined)).toBe(30);
  });
});
