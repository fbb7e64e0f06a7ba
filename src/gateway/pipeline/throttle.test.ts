import { describe, expect, test } from 'vitest';
import { testExchange, testIdentity } from '../../../test-support/gateway-exchange.ts';
import { StatusError } from '../../api/status.ts';
import { nonResourceRequest } from '../../authz/attributes.ts';
import { AccessKeyExpired, InvalidAccessKey } from '../../identity/authenticate.ts';
import { AuthFailureLimiter, cappedWatchTimeout, holdWatchSlot, Throttle } from './throttle.ts';

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

describe('the throttle stage', () => {
  const limits = {
    perSource: { failures: 2, windowSeconds: 60, blockSeconds: 30 },
    perKey: { failures: 1, windowSeconds: 60, blockSeconds: 120 },
  };

  test('failures become 401 until a limit is crossed, then 429 with Retry-After; expiry said as such', async () => {
    const throttle = new Throttle(new AuthFailureLimiter(limits));
    expect((await throttle.refusal('1.1.1.1', new InvalidAccessKey(), undefined)).code).toBe(401);
    expect((await throttle.refusal('1.1.1.1', new AccessKeyExpired(undefined), undefined)).message).toContain(
      'expired',
    );
    const limited = await throttle.refusal('1.1.1.1', new InvalidAccessKey(), undefined);
    expect(limited.code).toBe(429);
    expect(limited.headers['Retry-After']).toBe('30');
  });

  test('only callers with recent failures are kept on the caches', async () => {
    const throttle = new Throttle(new AuthFailureLimiter(limits));
    const key = 'pak_aaaaaaaaaaaaaaaa_0000000000000000000000000000000000000000000000000';
    expect(throttle.cachedOnly('1.1.1.1', key)).toBe(false);
    await throttle.refusal('2.2.2.2', new InvalidAccessKey(), 'aaaaaaaaaaaaaaaa');
    expect(throttle.cachedOnly('1.1.1.1', 'not a key')).toBe(false);
    expect(throttle.cachedOnly('2.2.2.2', 'not a key')).toBe(true);
  });

  test('concurrent watches per identity: 429 past the limit, slots given back once', () => {
    const throttle = new Throttle(new AuthFailureLimiter(limits), { perIdentity: 2, maxTimeoutSeconds: 60 });
    const first = throttle.watchSlot('alice');
    const second = throttle.watchSlot('alice');
    expect(typeof first).toBe('function');
    expect(typeof second).toBe('function');
    const third = throttle.watchSlot('alice');
    expect(third).toBeInstanceOf(StatusError);
    expect((third as StatusError).code).toBe(429);
    expect(typeof throttle.watchSlot('bob')).toBe('function');
    (first as () => void)();
    (first as () => void)();
    expect(typeof throttle.watchSlot('alice')).toBe('function');
    expect(throttle.watchSlot('alice')).toBeInstanceOf(StatusError);
  });

  test('the stage: a watch holds a slot of its identity until its answer ends; other requests none', () => {
    const throttle = new Throttle(new AuthFailureLimiter(limits), { perIdentity: 1, maxTimeoutSeconds: 60 });
    const request = (verb: string) => {
      const exchange = testExchange({ identity: testIdentity('alice') });
      exchange.attributes = nonResourceRequest(verb, '/x');
      return exchange;
    };
    const list = request('list');
    holdWatchSlot(throttle, list);
    expect(list.release).toBeUndefined();
    const watch = request('watch');
    holdWatchSlot(throttle, watch);
    expect(watch.release).toBeTypeOf('function');
    expect(() => holdWatchSlot(throttle, request('watch'))).toThrow(expect.objectContaining({ code: 429 }));
    watch.release?.();
    expect(() => holdWatchSlot(throttle, request('watch'))).not.toThrow();
    // Without an identity (endpoints served without a key) nothing is held.
    const anonymous = testExchange();
    anonymous.attributes = nonResourceRequest('watch', '/x');
    holdWatchSlot(throttle, anonymous);
    expect(anonymous.release).toBeUndefined();
  });

  test.each([
    [null, '60'],
    ['', '60'],
    ['0', '60'],
    ['30', '30'],
    ['3600', '60'],
    ['abc', 'abc'],
  ])('timeoutSeconds %s is sent as %s (at most 60)', (requested, sent) => {
    expect(cappedWatchTimeout(requested, 60)).toBe(sent);
  });
});
