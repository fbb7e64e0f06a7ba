import { describe, expect, test } from 'vitest';
import { AuthFailureLimiter } from './ratelimit.ts';

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
});
