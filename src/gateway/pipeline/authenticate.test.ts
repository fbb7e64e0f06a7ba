import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { testExchange, testIdentity } from '../../../test-support/gateway-exchange.ts';
import { StatusError } from '../../api/status.ts';
import { nonResourceRequest } from '../../authz/attributes.ts';
import { AuthFailureLimiter } from '../../http/failure-limiter.ts';
import { type AuthenticationResult, InvalidAccessKey, newKeyRecord } from '../../identity/authenticate.ts';
import { AuthenticatorNotReady } from '../../identity/authenticator.ts';
import { generateAccessKey } from '../../identity/keys.ts';
import type { GatewayEndpoint } from '../endpoints/endpoint.ts';
import { authenticateToken, bearerToken, type KeyAuthenticator, keyIdOf } from '../key-authentication.ts';
import { authenticateExchange, needsKey } from './authenticate.ts';
import type { Routed } from './route.ts';
import { Throttle } from './throttle.ts';

const key = generateAccessKey((size) => randomBytes(size));
const other = generateAccessKey((size) => randomBytes(size));
const alice = testIdentity('alice');
const aliceKeyRecord = newKeyRecord({
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name: 'alice-key' },
  spec: { user: 'alice', keyId: key.id },
});

/** Knows `key` (as alice); records which way it was asked. */
class Authenticator implements KeyAuthenticator {
  readonly asked: string[] = [];
  isReady = true;
  /** Whether a read past the caches answers asynchronously. */
  slow = false;
  throws: Error | undefined;

  private decide(token: string): AuthenticationResult {
    if (this.throws) throw this.throws;
    if (token === key.key) return { ok: true, identity: alice, record: aliceKeyRecord };
    return { ok: false, failure: new InvalidAccessKey(), keyId: keyIdOf(token) };
  }

  authenticate(token: string) {
    this.asked.push('authenticate');
    const result = this.decide(token);
    return this.slow ? Promise.resolve(result) : result;
  }

  authenticateCached(token: string) {
    this.asked.push('cached');
    return this.decide(token);
  }

  ready() {
    return this.isReady;
  }
}

const limits = {
  perSource: { failures: 2, windowSeconds: 60, blockSeconds: 30 },
  perKey: { failures: 100, windowSeconds: 60, blockSeconds: 30 },
};

function world() {
  const authenticator = new Authenticator();
  const throttle = new Throttle(new AuthFailureLimiter(limits));
  return { authenticator, throttle, deps: { authenticator, throttle } };
}

const bearer = (token: string) => testExchange({ headers: { authorization: `Bearer ${token}` } });

describe('the bearer token', () => {
  test.each([
    ['Bearer abc', 'abc'],
    ['bearer   abc  ', 'abc'],
    ['BEARER abc', 'abc'],
    ['Bearer a b', ''],
    ['Basic abc', ''],
    ['Bearer', ''],
    ['', ''],
  ])('%j is %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });

  test('no header, or the header twice, is no token', () => {
    expect(bearerToken(undefined)).toBe('');
    expect(bearerToken(['Bearer a', 'Bearer b'])).toBe('');
  });

  test('the public id of a well-formed key, never for anything else', () => {
    expect(keyIdOf(key.key)).toBe(key.id);
    expect(keyIdOf('')).toBeUndefined();
    expect(keyIdOf('pak_not_a_key')).toBeUndefined();
    expect(keyIdOf(`${key.key.slice(0, -1)}${key.key.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
  });
});

describe('authenticateToken', () => {
  test('from the caches, or past them, as the caller is judged', () => {
    const { authenticator } = world();
    expect(authenticateToken(authenticator, key.key, false)).toEqual({
      ok: true,
      identity: alice,
      record: aliceKeyRecord,
    });
    expect(authenticateToken(authenticator, key.key, true)).toEqual({
      ok: true,
      identity: alice,
      record: aliceKeyRecord,
    });
    expect(authenticator.asked).toEqual(['authenticate', 'cached']);
  });

  test('503 while the authenticator cannot decide yet; other errors are not hidden', () => {
    const { authenticator } = world();
    authenticator.isReady = false;
    const refuse = () => authenticateToken(authenticator, key.key, false);
    expect(refuse).toThrow(StatusError);
    expect(() => refuse()).toThrow(expect.objectContaining({ code: 503 }));
    authenticator.isReady = true;
    authenticator.throws = new AuthenticatorNotReady();
    expect(() => authenticateToken(authenticator, key.key, false)).toThrow(
      expect.objectContaining({ code: 503 }),
    );
    authenticator.throws = new TypeError('a bug');
    expect(() => authenticateToken(authenticator, key.key, false)).toThrow(TypeError);
  });
});

describe('needsKey', () => {
  const endpoint = (authentication: GatewayEndpoint['authentication']): Routed => ({
    kind: 'endpoint',
    endpoint: {
      name: 'e',
      route: { kind: 'nonResource', paths: ['/x'] },
      authentication,
      handle: () => ({ code: 200, object: {} }),
    },
    attributes: nonResourceRequest('get', '/x'),
    resource: undefined,
  });

  test('every route needs a key but endpoints served without one; unknown paths too (they tell nothing)', () => {
    expect(needsKey(endpoint('key'))).toBe(true);
    expect(needsKey(endpoint('none'))).toBe(false);
    expect(needsKey(endpoint(() => 'none'))).toBe(false);
    expect(needsKey(endpoint(() => 'key'))).toBe(true);
    expect(
      needsKey({
        kind: 'unknown',
        attributes: nonResourceRequest('get', '/y'),
        error: new StatusError(404, 'NotFound', 'no'),
      }),
    ).toBe(true);
  });
});

describe('the authenticate stage', () => {
  test('a valid key from the caches: the identity returned synchronously, no failure', () => {
    const { deps } = world();
    const exchange = bearer(key.key);
    expect(authenticateExchange(deps, exchange)).toEqual({ identity: alice });
  });

  test('a valid key read past the caches: the identity returned when the read settles', async () => {
    const { deps, authenticator } = world();
    authenticator.slow = true;
    const exchange = bearer(key.key);
    const pending = authenticateExchange(deps, exchange);
    expect(pending).toBeInstanceOf(Promise);
    expect(await pending).toEqual({ identity: alice });
  });

  test('a failure is returned with the key id, not answered; no identity', () => {
    const { deps } = world();
    const exchange = bearer(other.key);
    const settled = authenticateExchange(deps, exchange);
    expect(settled).toMatchObject({
      failed: { ok: false, failure: expect.any(InvalidAccessKey), keyId: other.id },
    });
    expect(settled).not.toHaveProperty('identity');
  });

  test('no token at all fails like a wrong one', () => {
    const { deps } = world();
    expect(authenticateExchange(deps, testExchange())).toMatchObject({
      failed: { ok: false, failure: expect.any(InvalidAccessKey) },
    });
  });

  test('a source the throttle saw fail recently: judged on the caches alone, a valid key still accepted', async () => {
    const { deps, authenticator, throttle } = world();
    await throttle.refusal('192.0.2.1', new InvalidAccessKey(), undefined);
    const exchange = bearer(key.key);
    expect(authenticateExchange(deps, exchange)).toEqual({ identity: alice });
    // A source that failed recently is kept off the apiserver.
    expect(authenticator.asked).toEqual(['cached']);
    const elsewhere = testExchange({
      headers: { authorization: `Bearer ${key.key}` },
      source: '198.51.100.7',
    });
    authenticator.asked.length = 0;
    authenticateExchange(deps, elsewhere);
    expect(authenticator.asked).toEqual(['authenticate']);
  });
});
