import { describe, expect, test } from 'vitest';
import { FakeClock } from '../../../test-support/fake-clock.ts';
import { testExchange, testIdentity } from '../../../test-support/gateway-exchange.ts';
import { CREATED, KeyCaches, testUser } from '../../../test-support/key-caches.ts';
import { StatusError } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { AuthFailureLimiter } from '../../http/failure-limiter.ts';
import {
  AccessKeyExpired,
  type AuthenticatedIdentity,
  InvalidAccessKey,
} from '../../identity/authenticate.ts';
import { KeySessions } from '../sessions.ts';
import { holdWatchSlot, Throttle } from './throttle.ts';

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
    const holdAs = (identity: AuthenticatedIdentity | undefined, verb: string) =>
      holdWatchSlot(throttle, testExchange(), { identity, attributes: nonResourceRequest(verb, '/x') });
    const hold = (verb: string) => holdAs(testIdentity('alice'), verb);
    expect(hold('list')).toBeUndefined();
    const release = hold('watch');
    expect(release).toBeTypeOf('function');
    expect(() => hold('watch')).toThrow(expect.objectContaining({ code: 429 }));
    release?.();
    expect(() => hold('watch')).not.toThrow();
    // Without an identity (endpoints served without a key) nothing is held.
    expect(holdAs(undefined, 'watch')).toBeUndefined();
  });

  const podRequest = (verb: string, subresource: string): RequestAttributes => ({
    ...nonResourceRequest(verb, '/api/v1/namespaces/a/pods/p'),
    target: 'Cluster',
    cluster: 'prod',
    resourceRequest: true,
    resource: 'pods',
    namespace: 'a',
    name: 'p',
    subresource,
  });

  test('watches, upgraded connections and followed logs hold a slot; a log read without follow none', () => {
    const throttle = new Throttle(new AuthFailureLimiter(limits), { perIdentity: 10, maxTimeoutSeconds: 60 });
    const held = (url: string, attributes: RequestAttributes, headers = {}) => {
      const exchange = testExchange({ url, headers });
      return holdWatchSlot(throttle, exchange, { identity: testIdentity('alice'), attributes }) !== undefined;
    };
    expect(held('/x?watch=1', podRequest('watch', ''))).toBe(true);
    expect(held('/x', podRequest('create', 'exec'), { connection: 'Upgrade', upgrade: 'websocket' })).toBe(
      true,
    );
    expect(held('/x?follow=true', podRequest('get', 'log'))).toBe(true);
    expect(held('/x?follow=false', podRequest('get', 'log'))).toBe(false);
    expect(held('/x', podRequest('get', 'log'))).toBe(false);
    expect(held('/x', podRequest('get', ''))).toBe(false);
    expect(throttle.watchSlot('alice')).toBeTypeOf('function');
  });

  test('a held connection is cut (its response destroyed) when its key is disabled, and gives its slot back', () => {
    const clock = new FakeClock(Date.parse(CREATED) + 1000);
    const caches = new KeyCaches(clock);
    caches.putUser(testUser('alice'));
    const sessions = new KeySessions({ authority: caches, clock });
    const throttle = new Throttle(
      new AuthFailureLimiter(limits),
      { perIdentity: 1, maxTimeoutSeconds: 60 },
      sessions,
    );
    const key = caches.addKey({ user: 'alice' });
    const watch = testExchange();
    const release = holdWatchSlot(throttle, watch, {
      identity: key.identity,
      attributes: nonResourceRequest('watch', '/x'),
    });
    expect(sessions.count()).toBe(1);
    expect(watch.response.destroyed).toBe(false);
    caches.putKey({ ...key.object, spec: { ...key.object.spec, disabled: true } });
    expect(watch.response.destroyed).toBe(true);
    expect(sessions.count()).toBe(0);
    // The end of the answer gives the slot back (encode calls release once the response closed).
    release?.();
    expect(throttle.watchSlot(key.identity.username)).toBeTypeOf('function');
  });

  test('an upgraded connection is cut by the cut it passes', () => {
    const clock = new FakeClock(Date.parse(CREATED) + 1000);
    const caches = new KeyCaches(clock);
    caches.putUser(testUser('alice'));
    const sessions = new KeySessions({ authority: caches, clock });
    const throttle = new Throttle(new AuthFailureLimiter(limits), undefined, sessions);
    const key = caches.addKey({ user: 'alice' });
    const exec = testExchange({ headers: { upgrade: 'SPDY/3.1' } });
    let socketCut = 0;
    const held = { identity: key.identity, attributes: podRequest('create', 'exec') };
    holdWatchSlot(throttle, exec, held, () => socketCut++);
    caches.deleteKey(key.object.metadata.name ?? '');
    expect(socketCut).toBe(1);
    expect(exec.response.destroyed).toBe(false);
  });
});
