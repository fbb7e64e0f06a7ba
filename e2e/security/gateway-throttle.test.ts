import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, test } from 'vitest';
import { composeAccessKey, generateAccessKey, parseAccessKey } from '../../src/identity/keys.ts';
import { call, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 3 of issue 16: failures were counted per source address with no notion of a trusted proxy
 * (behind an ingress every user shares one address), 429 was answered before a valid key was
 * verified, and wrong secrets sent with a victim's public key id locked the victim out for
 * minutes. Here the gateway trusts the proxy at 127.0.0.1 (what an ingress would be) and is also
 * reached directly on ::1 (an untrusted peer).
 */
describe('security: only failing attempts are throttled, per client behind trusted proxies', () => {
  const env = useGatewayEnv({
    gateway: {
      host: '::',
      trustedProxies: ['127.0.0.1/32'],
      authFailureLimits: {
        perSource: { failures: 5, windowSeconds: 600, blockSeconds: 600 },
        perKey: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
      },
    },
  });
  let victim: string;
  let bystander: string;

  beforeAll(async () => {
    victim = await env().user(uniqueName('victim'));
    bystander = await env().user(uniqueName('bystander'));
    // In the gateway's caches before any attack: a caller with recent failures is judged on the
    // caches alone, so a key they have not seen yet would be refused then (throttle.ts).
    await eventually(
      () =>
        env().gateway.authenticator.authenticateCached(victim).ok &&
        env().gateway.authenticator.authenticateCached(bystander).ok,
      60_000,
      "the victim's and the bystander's keys in the gateway's caches",
    );
  });

  const viaProxy = (client: string, token: string) =>
    call(`${env().base}/apis`, { token, headers: { 'X-Forwarded-For': client } });
  const wrongSecret = (key: string) => {
    const parsed = parseAccessKey(key);
    if (parsed instanceof Error) throw parsed;
    return composeAccessKey(parsed.id, generateAccessKey(randomBytes).secret);
  };

  test("wrong secrets with the victim's public id never lock the victim out", async () => {
    const codes: number[] = [];
    for (let i = 0; i < 10; i++) codes.push((await viaProxy(`10.66.0.${i}`, wrongSecret(victim))).status);
    expect(codes.slice(0, 3)).toEqual([401, 401, 401]);
    expect(codes.slice(3)).toEqual(Array(7).fill(429));
    // The victim, from anywhere, with the real secret: accepted.
    expect((await viaProxy('10.66.0.1', victim)).status).toBe(200);
    expect((await viaProxy('10.7.0.1', victim)).status).toBe(200);
  });

  test('behind the proxy, one client failing does not block others; its own failures do block it', async () => {
    const attacker = '10.99.0.1';
    const codes: number[] = [];
    for (let i = 0; i < 8; i++)
      codes.push((await viaProxy(attacker, generateAccessKey(randomBytes).key)).status);
    expect(codes.slice(0, 5)).toEqual(Array(5).fill(401));
    expect(codes.slice(5)).toEqual(Array(3).fill(429));
    // Everybody else behind the same proxy goes on as before.
    expect((await viaProxy('10.1.2.3', bystander)).status).toBe(200);
    expect((await viaProxy('10.1.2.4', generateAccessKey(randomBytes).key)).status).toBe(401);
    // The attacker's own valid key still works: only failing attempts are throttled.
    expect((await viaProxy(attacker, bystander)).status).toBe(200);
  });

  test('an untrusted peer cannot choose its address with X-Forwarded-For', async () => {
    const direct = `http://[::1]:${env().server.port}/kubernetes/management/apis`;
    const codes: number[] = [];
    for (let i = 0; i < 8; i++) {
      // A different claimed address on every attempt: counted against the peer all the same.
      const answer = await call(direct, {
        token: generateAccessKey(randomBytes).key,
        headers: { 'X-Forwarded-For': `10.55.0.${i}` },
      });
      codes.push(answer.status);
    }
    expect(codes.slice(5)).toEqual(Array(3).fill(429));
    // Clients behind the trusted proxy are not the untrusted peer.
    expect((await viaProxy('10.55.0.1', bystander)).status).toBe(200);
  });
});
