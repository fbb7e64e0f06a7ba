import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type Attempt,
  DEFAULT_LOGIN_THROTTLE_LIMITS,
  LoginThrottle,
  LoginThrottled,
  type LoginThrottleLimits,
} from './throttle.ts';

const key = new Uint8Array(32).fill(3);
/** Concurrency out of the way, unless a test is about it. */
const limits: LoginThrottleLimits = {
  perSource: { failures: 4, windowSeconds: 60, blockSeconds: 60 },
  perUser: { failures: 2, windowSeconds: 60, blockSeconds: 60 },
  perDevice: { failures: 2, windowSeconds: 60, blockSeconds: 60 },
  concurrent: { total: 100, perSource: 100, perUser: 100 },
};
const random = (size: number) => randomBytes(size);

/** An attempt let through and checked, wrongly. */
async function fails(throttle: LoginThrottle, attempt: Attempt): Promise<void> {
  const admitted = await throttle.admit(attempt);
  admitted.done();
}

/** The seconds the throttle makes `attempt` wait; undefined when it is let through (and then failed). */
async function refusal(throttle: LoginThrottle, attempt: Attempt): Promise<number | undefined> {
  try {
    await fails(throttle, attempt);
    return undefined;
  } catch (err) {
    if (!(err instanceof LoginThrottled)) throw err;
    return err.retryAfterSeconds;
  }
}

describe('login throttle', () => {
  it('limit N: N failed attempts are checked, the next one is refused, as the gateway counts', async () => {
    for (const failures of [1, 3]) {
      const throttle = new LoginThrottle(key, {
        ...limits,
        perSource: { failures, windowSeconds: 60, blockSeconds: 30 },
      });
      for (let i = 0; i < failures; i++) await fails(throttle, { source: '192.0.2.1' });
      expect(await refusal(throttle, { source: '192.0.2.1' })).toBe(30);
      expect(await refusal(throttle, { source: '192.0.2.2' })).toBeUndefined();
    }
  });

  it('counts an attempt before its check: attempts running at once are not all let through', async () => {
    const throttle = new LoginThrottle(key, limits);
    // Two attempts for alice are being checked (none has failed yet); a third is refused.
    const first = await throttle.admit({ source: '192.0.2.1', user: 'alice' });
    const second = await throttle.admit({ source: '192.0.2.2', user: 'alice' });
    await expect(throttle.admit({ source: '192.0.2.3', user: 'alice' })).rejects.toBeInstanceOf(
      LoginThrottled,
    );
    first.done();
    second.done();
  });

  it('gives a successful attempt its count back', async () => {
    const throttle = new LoginThrottle(key, limits);
    for (let i = 0; i < 10; i++) {
      const admitted = await throttle.admit({ source: '192.0.2.1', user: 'alice' });
      await admitted.succeeded();
      admitted.done();
    }
    await fails(throttle, { source: '192.0.2.1', user: 'alice' });
    expect(await refusal(throttle, { source: '192.0.2.1', user: 'alice' })).toBeUndefined();
  });

  it('blocks a user for unknown devices after its failures, from any source', async () => {
    const throttle = new LoginThrottle(key, limits);
    await fails(throttle, { source: '192.0.2.1', user: 'alice' });
    await fails(throttle, { source: '192.0.2.2', user: 'alice' });
    expect(await refusal(throttle, { source: '192.0.2.3', user: 'alice' })).toBeGreaterThan(0);
    expect(await refusal(throttle, { source: '192.0.2.3', user: 'bob' })).toBeUndefined();
  });

  it('blocks a source guessing many users, and counts attempts naming no user per source only', async () => {
    const throttle = new LoginThrottle(key, limits);
    for (const user of ['u1', 'u2', 'u3']) await fails(throttle, { source: 'evil', user });
    await fails(throttle, { source: 'evil' });
    expect(await refusal(throttle, { source: 'evil', user: 'u5' })).toBeGreaterThan(0);
    expect(await refusal(throttle, { source: 'good', user: 'u5' })).toBeUndefined();
    // Attempts naming no user fill no user's counter.
    const other = new LoginThrottle(key, limits);
    for (let i = 0; i < 4; i++) await fails(other, { source: `192.0.2.${i}` });
    expect(await refusal(other, { source: '192.0.2.9', user: 'anyone' })).toBeUndefined();
  });

  it('counts an IPv6 /64 as one source, IPv4-mapped addresses as their IPv4 address', async () => {
    const throttle = new LoginThrottle(key, limits);
    for (let i = 1; i <= 4; i++) await fails(throttle, { source: `2001:db8:5:6::${i}`, user: `u${i}` });
    expect(await refusal(throttle, { source: '2001:db8:5:6:ffff::1', user: 'u9' })).toBeGreaterThan(0);
    expect(await refusal(throttle, { source: '2001:db8:5:7::1', user: 'u9' })).toBeUndefined();
    for (const source of ['198.51.100.4', '::ffff:198.51.100.4', '::ffff:c633:6404', '198.51.100.4'])
      await fails(throttle, { source });
    expect(await refusal(throttle, { source: '198.51.100.4' })).toBeGreaterThan(0);
    expect(await refusal(throttle, { source: '198.51.100.5' })).toBeUndefined();
  });

  it('caps the checks running at once per source, per user and in all, refusing at once for 1 second', async () => {
    const throttle = new LoginThrottle(key, {
      ...limits,
      concurrent: { total: 3, perSource: 2, perUser: 1 },
    });
    const a = await throttle.admit({ source: '192.0.2.1', user: 'u1' });
    const b = await throttle.admit({ source: '192.0.2.1', user: 'u2' });
    // Source full, then user full.
    expect(await refusal(throttle, { source: '192.0.2.1', user: 'u3' })).toBe(1);
    expect(await refusal(throttle, { source: '192.0.2.9', user: 'u1' })).toBe(1);
    const c = await throttle.admit({ source: '192.0.2.2', user: 'u3' });
    // All full.
    expect(await refusal(throttle, { source: '192.0.2.3', user: 'u4' })).toBe(1);
    expect(throttle.running.count('*')).toBe(3);
    a.done();
    a.done();
    expect(throttle.running.count('*')).toBe(2);
    const d = await throttle.admit({ source: '192.0.2.3', user: 'u4' });
    for (const admitted of [b, c, d]) admitted.done();
    expect(throttle.running.count('*')).toBe(0);
    expect(throttle.running.count('s:192.0.2.1')).toBe(0);
    // Refusals for running checks are not counted as failures.
    expect(await refusal(throttle, { source: '192.0.2.1', user: 'u1' })).toBeUndefined();
  });

  it('by default (docs/login.md) runs 2 checks per source, 2 per user or device and 4 in all at once', async () => {
    const throttle = new LoginThrottle(key, DEFAULT_LOGIN_THROTTLE_LIMITS);
    // Checks held open (admitted, not done) until the end, as slow scrypt checks would be.
    const held = [
      await throttle.admit({ source: '192.0.2.1', user: 'u1' }),
      await throttle.admit({ source: '192.0.2.1', user: 'u2' }),
    ];
    expect(await refusal(throttle, { source: '192.0.2.1', user: 'u3' })).toBe(1);
    held.push(await throttle.admit({ source: '192.0.2.2', user: 'u1' }));
    expect(await refusal(throttle, { source: '192.0.2.3', user: 'u1' })).toBe(1);
    held.push(await throttle.admit({ source: '192.0.2.4', user: 'u4' }));
    expect(throttle.running.count('*')).toBe(4);
    expect(await refusal(throttle, { source: '192.0.2.5', user: 'u5' })).toBe(1);
    for (const admitted of held.splice(0)) admitted.done();

    // A device: its token's attempts count per device, 2 at once, whatever their sources.
    const token = await throttle.issueDeviceToken('u6', random);
    held.push(await throttle.admit({ source: '192.0.2.6', user: 'u6', deviceToken: token }));
    held.push(await throttle.admit({ source: '192.0.2.7', user: 'u6', deviceToken: token }));
    expect(await refusal(throttle, { source: '192.0.2.8', user: 'u6', deviceToken: token })).toBe(1);
    // The same user without the token is another subject: let through.
    expect(await refusal(throttle, { source: '192.0.2.8', user: 'u6' })).toBeUndefined();
    for (const admitted of held) admitted.done();
    expect(throttle.running.count('*')).toBe(0);
  });

  it('lets the real user in with its device token while its name is blocked for others', async () => {
    const throttle = new LoginThrottle(key, limits);
    const token = await throttle.issueDeviceToken('alice', random);
    for (let i = 0; i < 5; i++) await refusal(throttle, { source: 'evil', user: 'alice' });
    expect(await refusal(throttle, { source: 'evil', user: 'alice' })).toBeGreaterThan(0);
    expect(await refusal(throttle, { source: 'evil', user: 'alice', deviceToken: token })).toBeUndefined();
  });

  it('refuses device tokens that are forged, for another user, expired, or used to guess', async () => {
    let now = 1_000_000_000_000;
    const throttle = new LoginThrottle(key, limits, () => now);
    for (let i = 0; i < 2; i++) await fails(throttle, { source: 's', user: 'alice' });
    const token = await throttle.issueDeviceToken('alice', random);
    const forged = `${token.slice(0, -2)}AA`;
    expect(await refusal(throttle, { source: 's', user: 'alice', deviceToken: forged })).toBeGreaterThan(0);
    const bobs = await throttle.issueDeviceToken('bob', random);
    expect(await refusal(throttle, { source: 's', user: 'alice', deviceToken: bobs })).toBeGreaterThan(0);
    const other = new LoginThrottle(new Uint8Array(32).fill(4), limits, () => now);
    expect(
      await refusal(throttle, {
        source: 's',
        user: 'alice',
        deviceToken: await other.issueDeviceToken('alice', random),
      }),
    ).toBeGreaterThan(0);
    for (let i = 0; i < 2; i++) await fails(throttle, { source: 's', user: 'alice', deviceToken: token });
    expect(await refusal(throttle, { source: 's', user: 'alice', deviceToken: token })).toBeGreaterThan(0);
    // An expired token exempts nothing: alice is still blocked for it.
    const old = await throttle.issueDeviceToken('alice', random);
    expect(await refusal(throttle, { source: 's', user: 'alice', deviceToken: old })).toBeUndefined();
    now += 91 * 24 * 3600 * 1000;
    expect(await refusal(throttle, { source: 's', user: 'alice', deviceToken: old })).toBeGreaterThan(0);
  });
});
