import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test-support/fake-clock.ts';
import type { KubeApi, RequestOptions } from '../../runtime/kube-api.ts';
import { renewalTime, ServiceAccountTokens, TOKEN_LIFETIME_SECONDS, tokenAction } from './token.ts';

describe('renewal schedule', () => {
  it('renews after 80% of the lifetime, and when there is no token', () => {
    const token = { token: 't', issuedAtMs: 1000, expiresAtMs: 11_000 };
    expect(renewalTime(token)).toBe(9000);
    expect(tokenAction(token, 8999)).toBe('use');
    expect(tokenAction(token, 9000)).toBe('renew');
    expect(tokenAction(undefined, 0)).toBe('renew');
  });
});

/** Answers TokenRequests as the apiserver does (a token, an expiry one lifetime ahead), or fails. */
function tokenRequests(clock: FakeClock) {
  const requests: RequestOptions[] = [];
  let failing = false;
  const api = {
    async request(options: RequestOptions) {
      requests.push(options);
      if (failing) throw new Error('apiserver unavailable');
      const seconds = (options.body as { spec: { expirationSeconds: number } }).spec.expirationSeconds;
      return {
        status: {
          token: `token-${requests.length}`,
          expirationTimestamp: new Date(clock.now() + seconds * 1000).toISOString(),
        },
      };
    },
  } as unknown as KubeApi;
  return { api, requests, fail: (value: boolean) => (failing = value) };
}

describe('ServiceAccountTokens', () => {
  const lifetimeMs = TOKEN_LIFETIME_SECONDS * 1000;

  it('asks once for the ServiceAccount, uses the token until its renewal time, then a new one', async () => {
    const clock = new FakeClock();
    const { api, requests } = tokenRequests(clock);
    const tokens = new ServiceAccountTokens({ api, namespace: 'p-team', serviceAccount: 'sa', clock });
    const first = await Promise.all([tokens.current(), tokens.current(), tokens.current()]);
    expect(first).toEqual(['token-1', 'token-1', 'token-1']);
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      method: 'POST',
      path: '/api/v1/namespaces/p-team/serviceaccounts/sa/token',
      // One hour, as docs/security.md says of the syncers' tokens.
      body: { kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    });
    await clock.advance(lifetimeMs * 0.8 - 1);
    expect(await tokens.current()).toBe('token-1');
    await clock.advance(1);
    expect(await tokens.current()).toBe('token-2');
    expect(requests).toHaveLength(2);
  });

  it('a failed renewal keeps the still valid token; an expired one is never presented', async () => {
    const clock = new FakeClock();
    const { api, requests, fail } = tokenRequests(clock);
    const tokens = new ServiceAccountTokens({ api, namespace: 'n', serviceAccount: 'sa', clock });
    await tokens.current();
    fail(true);
    await clock.advance(lifetimeMs * 0.9);
    expect(await tokens.current()).toBe('token-1');
    await clock.advance(lifetimeMs * 0.1);
    await expect(tokens.current()).rejects.toThrow('apiserver unavailable');
    fail(false);
    expect(await tokens.current()).toBe(`token-${requests.length}`);
  });
});
