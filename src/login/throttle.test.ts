import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LoginThrottle } from './throttle.ts';

const key = new Uint8Array(32).fill(3);
const limits = {
  perSource: { failures: 4, windowSeconds: 60, blockSeconds: 60 },
  perUser: { failures: 2, windowSeconds: 60, blockSeconds: 60 },
  perDevice: { failures: 2, windowSeconds: 60, blockSeconds: 60 },
};
const random = (size: number) => randomBytes(size);

describe('login throttle', () => {
  it('blocks a user for unknown devices after its failures, from any source', async () => {
    const throttle = new LoginThrottle(key, limits);
    expect(await throttle.blockedFor({ source: 'a', user: 'alice' })).toBeUndefined();
    await throttle.failed({ source: 'a', user: 'alice' });
    expect(await throttle.blockedFor({ source: 'a', user: 'alice' })).toBeUndefined();
    await throttle.failed({ source: 'b', user: 'alice' });
    expect(await throttle.blockedFor({ source: 'c', user: 'alice' })).toBeGreaterThan(0);
    expect(await throttle.blockedFor({ source: 'c', user: 'bob' })).toBeUndefined();
  });

  it('blocks a source guessing many users', async () => {
    const throttle = new LoginThrottle(key, limits);
    for (const user of ['u1', 'u2', 'u3', 'u4']) await throttle.failed({ source: 'evil', user });
    expect(await throttle.blockedFor({ source: 'evil', user: 'u5' })).toBeGreaterThan(0);
    expect(await throttle.blockedFor({ source: 'good', user: 'u5' })).toBeUndefined();
  });

  it('lets the real user in with its device token while its name is blocked for others', async () => {
    const throttle = new LoginThrottle(key, limits);
    const token = await throttle.issueDeviceToken('alice', random);
    for (let i = 0; i < 5; i++) await throttle.failed({ source: 'evil', user: 'alice' });
    expect(await throttle.blockedFor({ source: 'evil', user: 'alice' })).toBeGreaterThan(0);
    expect(await throttle.blockedFor({ source: 'evil', user: 'alice', deviceToken: token })).toBeUndefined();
  });

  it('refuses device tokens that are forged, for another user, expired, or used to guess', async () => {
    let now = 1_000_000_000_000;
    const throttle = new LoginThrottle(key, limits, () => now);
    for (let i = 0; i < 2; i++) await throttle.failed({ source: 's', user: 'alice' });
    const token = await throttle.issueDeviceToken('alice', random);
    const forged = `${token.slice(0, -2)}AA`;
    expect(await throttle.blockedFor({ source: 's', user: 'alice', deviceToken: forged })).toBeGreaterThan(0);
    const bobs = await throttle.issueDeviceToken('bob', random);
    expect(await throttle.blockedFor({ source: 's', user: 'alice', deviceToken: bobs })).toBeGreaterThan(0);
    const other = new LoginThrottle(new Uint8Array(32).fill(4), limits, () => now);
    expect(
      await throttle.blockedFor({
        source: 's',
        user: 'alice',
        deviceToken: await other.issueDeviceToken('alice', random),
      }),
    ).toBeGreaterThan(0);
    for (let i = 0; i < 2; i++) await throttle.failed({ source: 's', user: 'alice', deviceToken: token });
    expect(await throttle.blockedFor({ source: 's', user: 'alice', deviceToken: token })).toBeGreaterThan(0);
    // An expired token exempts nothing: alice is still blocked for it.
    const old = await throttle.issueDeviceToken('alice', random);
    expect(await throttle.blockedFor({ source: 's', user: 'alice', deviceToken: old })).toBeUndefined();
    now += 91 * 24 * 3600 * 1000;
    expect(await throttle.blockedFor({ source: 's', user: 'alice', deviceToken: old })).toBeGreaterThan(0);
  });
});
