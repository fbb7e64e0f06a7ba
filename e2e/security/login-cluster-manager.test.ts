import { describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { type Answer, call } from '../gateway/support.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import { configureClusterManager, keyOn, standIns } from '../login/support/sign-in.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Issue 32, item 6: five bad cluster-manager keys from anyone locked every cluster-manager sign-in
 * out (one counter for all keys). Keys are now counted before they are checked, per source and
 * per token name: a caller fills only its own counters. Each test posts from addresses of its own
 * (`X-Forwarded-For`, the gateway trusts the proxy at 127.0.0.1) in 198.18.0.0/15.
 */

const LIMIT = 5;
const env = useLoginEnv({
  providers: true,
  throttle: {
    perSource: { failures: LIMIT, windowSeconds: 600, blockSeconds: 600 },
    perUser: { failures: LIMIT, windowSeconds: 600, blockSeconds: 600 },
    perDevice: { failures: LIMIT, windowSeconds: 600, blockSeconds: 600 },
  },
});

/** Posts `key` to the cluster-manager form as a browser at `source` would (the form's cookie first). */
async function postKey(key: string, source: string): Promise<Answer & { key: string | undefined }> {
  const dispatcher = env().gateway.dispatcher;
  const headers = { 'x-forwarded-for': source };
  const form = await call(`${env().platformUrl}/auth/clusterManager/login`, { headers, dispatcher });
  expect(form.status, form.text).toBe(200);
  const cookie = /(platform_login_clusterManager=[^;]+)/.exec(form.headers.get('set-cookie') ?? '')?.[1];
  expect(cookie).toBeDefined();
  const page = await call(`${env().platformUrl}/auth/clusterManager/callback`, {
    method: 'POST',
    body: new URLSearchParams({ key }).toString(),
    headers: { ...headers, cookie: cookie as string, 'content-type': 'application/x-www-form-urlencoded' },
    dispatcher,
  });
  return { ...page, key: keyOn(page.text) };
}

/** A cluster-manager user with a key of its own; its platform User name. */
function owner(id: string): { key: string; user: string } {
  const { clusterManager } = standIns(env());
  const username = uniqueName('cmowner');
  clusterManager.users.set(id, { id, username, enabled: true, groups: [] });
  return { key: clusterManager.apiKey(id), user: userNameFor(username) };
}

/** Cluster-manager calls asking who a key belongs to (one per key checked). */
const keyChecks = () =>
  standIns(env()).clusterManager.calls.filter((entry) => entry === 'GET /v3/users?me=true').length;

describe('guessing cluster-manager keys', () => {
  it('blocks the guessing address only: everyone else still signs in with their keys', async () => {
    await configureClusterManager(env());
    const real = owner('u-bystander');
    for (let i = 0; i < LIMIT; i++) {
      const refused = await postKey(`token-guess${i}:notasecret${i}`, '198.18.10.1');
      expect(refused.status, refused.text).toBe(401);
      expect(refused.text).not.toContain(`notasecret${i}`);
    }
    const checks = keyChecks();
    const blocked = await postKey(`token-guess${LIMIT}:notasecret`, '198.18.10.1');
    expect(blocked.status).toBe(429);
    expect(keyChecks()).toBe(checks);
    // Another address, another person, their own key: signed in.
    const page = await postKey(real.key, '198.18.10.2');
    expect(page.status, page.text).toBe(200);
    expect(page.key).toMatch(/^pak_/);
    expect(await env().loginKeys(real.user)).toHaveLength(1);
  });

  it('sent at once for one key name from many addresses, are checked no more often than the limit', async () => {
    await configureClusterManager(env());
    const target = owner('u-target');
    const tokenName = target.key.split(':')[0] as string;
    const checks = keyChecks();
    const guesses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => postKey(`${tokenName}:wrongsecret${i}`, `198.18.11.${i + 1}`)),
    );
    const refused = guesses.filter((guess) => guess.status === 401).length;
    const throttled = guesses.filter((guess) => guess.status === 429).length;
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThanOrEqual(LIMIT);
    expect(refused + throttled).toBe(30);
    expect(keyChecks() - checks).toBe(refused);
    // Other keys, of the same person and of others, are not held back by that name's counter.
    const bystander = owner('u-other');
    expect((await postKey(bystander.key, '198.18.11.100')).status).toBe(200);
  });
});
