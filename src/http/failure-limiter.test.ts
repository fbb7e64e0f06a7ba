import { describe, expect, test } from 'vitest';
import { AuthFailureLimiter, FailureCounter } from './failure-limiter.ts';

describe('a failure counter', () => {
  test('limit N: N failures counted without a wait, the next one past the limit until the block ends', async () => {
    const counter = new FailureCounter({ failures: 2, windowSeconds: 60, blockSeconds: 30 }, 'test');
    expect(await counter.count('a')).toBeUndefined();
    expect(await counter.blockedFor('a')).toBeUndefined();
    expect(await counter.count('a')).toBeUndefined();
    expect(await counter.blockedFor('a')).toBeUndefined();
    expect(await counter.count('a')).toBe(30);
    expect(await counter.blockedFor('a')).toBe(30);
    expect(await counter.blockedFor('b')).toBeUndefined();
  });

  test('a count given back (a check that succeeded) is no failure; nothing to give back is no error', async () => {
    const counter = new FailureCounter({ failures: 1, windowSeconds: 60, blockSeconds: 30 }, 'test');
    await counter.giveBack('a');
    expect(await counter.count('a')).toBeUndefined();
    await counter.giveBack('a');
    expect(await counter.count('a')).toBeUndefined();
    expect(await counter.count('a')).toBe(30);
  });
});

describe('failed authentication limits', () => {
  test('limit N: N failures are answered as failures, the next one is refused', async () => {
    for (const failures of [1, 3]) {
      const limiter = new AuthFailureLimiter({
        perSource: { failures, windowSeconds: 60, blockSeconds: 30 },
        perKey: { failures: 100, windowSeconds: 60, blockSeconds: 30 },
      });
      for (let i = 0; i < failures; i++) {
        expect(await limiter.blockedFor('192.0.2.1', undefined)).toBeUndefined();
        expect(await limiter.failed('192.0.2.1', undefined)).toBeUndefined();
      }
      expect(await limiter.failed('192.0.2.1', undefined)).toBe(30);
      expect(await limiter.blockedFor('192.0.2.1', undefined)).toBe(30);
    }
  });

  test('an IPv6 /64 is one source; IPv4-mapped addresses count as IPv4', async () => {
    const limiter = new AuthFailureLimiter({
      perSource: { failures: 2, windowSeconds: 60, blockSeconds: 30 },
      perKey: { failures: 100, windowSeconds: 60, blockSeconds: 30 },
    });
    for (const address of ['2001:db8:7:7::1', '2001:db8:7:7::2', '2001:db8:7:7:ffff::3'])
      await limiter.failed(address, undefined);
    expect(await limiter.blockedFor('2001:db8:7:7:1:2:3:4', undefined)).toBe(30);
    expect(limiter.mayBeBlocked('2001:db8:7:7::99', undefined)).toBe(true);
    expect(await limiter.blockedFor('2001:db8:7:8::1', undefined)).toBeUndefined();
    for (const address of ['198.51.100.1', '::ffff:198.51.100.1', '::ffff:c633:6401'])
      await limiter.failed(address, undefined);
    expect(await limiter.blockedFor('198.51.100.1', undefined)).toBe(30);
    expect(await limiter.blockedFor('198.51.100.2', undefined)).toBeUndefined();
  });

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
