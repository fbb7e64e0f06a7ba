import { decodeJwt, decodeProtectedHeader } from 'jose';
import { beforeAll, describe, expect, test } from 'vitest';
import { call, reviewToken, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Attacks on revocable DirectClusterEndpointTokens (issue 30). Mallory is a tenant with a key of
 * her own; alice is another user. Mallory must not be able to end alice's tokens, to bring her own
 * revoked tokens back (by lowering her generation, or by re-using a revoked token as a key), or to
 * make a token the platform accepts out of one it refused (edited claims, another signature). The
 * platform's refusals never say why: a revoked token and a forged one get the same answer.
 */
describe('security: direct cluster endpoint token revocation', () => {
  const env = useGatewayEnv({ controllers: [] });
  const mallory = uniqueName('mallory');
  const alice = uniqueName('alice');
  let malloryKey: string;
  let aliceKey: string;
  let admin: string;
  let reviewer: string;

  const users = { group: 'management.platform', version: 'v1', plural: 'users' };
  const ownedAccessKeys = { group: 'management.platform', version: 'v1', plural: 'ownedaccesskeys' };

  const mint = (key: string) =>
    call(`${env().api}/directclusterendpointtokens`, {
      method: 'POST',
      token: key,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { scope: { clusters: [{ cluster: 'edge' }] } } }),
    });
  const minted = async (key: string) => {
    const answer = await mint(key);
    expect(answer.status, answer.text).toBe(201);
    return answer.json.status.token as string;
  };
  const review = async (token: string) => {
    const answer = await reviewToken(env(), token, reviewer);
    expect(answer.status, answer.text).toBe(200);
    return answer.json.status as { authenticated: boolean; error?: string; user?: unknown };
  };
  const revokeAll = (user: string, key: string) =>
    call(`${env().api}/users/${user}/tokenrevocation`, {
      method: 'POST',
      token: key,
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
  const generationOf = async (user: string) =>
    (
      (await env().custom.getClusterCustomObject({ ...users, name: user })) as {
        spec: { tokenGeneration?: number };
      }
    ).spec.tokenGeneration ?? 0;

  beforeAll(async () => {
    malloryKey = await env().user(mallory);
    aliceKey = await env().user(alice);
    admin = await env().user(uniqueName('root'), { admin: true });
    reviewer = await env().reviewer({ cluster: 'edge' });
  });

  test("a tenant cannot end another user's tokens, nor tell whether that user exists", async () => {
    const aliceToken = await minted(aliceKey);
    expect((await review(aliceToken)).authenticated).toBe(true);
    const attempt = await revokeAll(alice, malloryKey);
    expect(attempt.status, attempt.text).toBe(403);
    const nobody = await revokeAll(uniqueName('nobody'), malloryKey);
    expect(nobody.status).toBe(403);
    expect(nobody.json.message).not.toContain('not found');
    // Nor through the User object itself.
    const patched = await call(`${env().api}/users/${alice}`, {
      method: 'PATCH',
      token: malloryKey,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { tokenGeneration: 7 } }),
    });
    expect(patched.status, patched.text).toBe(403);
    expect(await generationOf(alice)).toBe(0);
    expect((await review(aliceToken)).authenticated).toBe(true);
  });

  test('a tenant whose tokens were revoked cannot lower her generation to bring them back', async () => {
    const token = await minted(malloryKey);
    const revoked = await revokeAll(mallory, admin);
    expect(revoked.status, revoked.text).toBe(201);
    expect((await review(token)).authenticated).toBe(false);
    const lowered = await call(`${env().api}/users/${mallory}`, {
      method: 'PATCH',
      token: malloryKey,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { tokenGeneration: 0 } }),
    });
    expect(lowered.status, lowered.text).toBe(403);
    expect(await generationOf(mallory)).toBe(1);
    expect((await review(token)).authenticated).toBe(false);
  });

  test('a token of a disabled key can neither mint nor authenticate anywhere the platform checks', async () => {
    const name = uniqueName('mallory-key');
    const key = await env().key({ user: mallory }, name);
    await env().accepted(key);
    const token = await minted(key);
    expect((await review(token)).authenticated).toBe(true);
    await env().custom.patchClusterCustomObject({
      ...ownedAccessKeys,
      name,
      body: [{ op: 'add', path: '/spec/disabled', value: true }],
    });
    await eventually(async () => !(await review(token)).authenticated, 20_000, 'the token to be refused');
    // The disabled key mints nothing; its token is no key for the management API either.
    expect((await mint(key)).status).toBe(401);
    expect((await mint(token)).status).toBe(401);
    expect((await call(`${env().base}/apis`, { token })).status).toBe(401);
    // Nor does a review with the token as the reviewer credential get anywhere.
    const asReviewer = await reviewToken(env(), token, token);
    expect(asReviewer.status).toBe(401);
  });

  test("edited claims or another signature do not make a revoked token, or alice's identity, accepted", async () => {
    const fresh = await minted(malloryKey);
    const revoked = await minted(malloryKey);
    const current = await generationOf(mallory);
    // Revoke, then mint a token of the new generation to borrow its claims from.
    expect((await revokeAll(mallory, malloryKey)).status).toBe(201);
    const valid = await minted(malloryKey);
    expect((await review(valid)).authenticated).toBe(true);
    expect((await review(fresh)).authenticated).toBe(false);
    const [header, , signature] = revoked.split('.');
    const claims = decodeJwt(revoked);
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    // The revoked token with the current generation, keeping its signature.
    const regenerated = `${header}.${encode({
      ...claims,
      'management.platform': { ...(claims['management.platform'] as object), gen: current + 1 },
    })}.${signature}`;
    // Mallory's valid token claiming to be alice.
    const [validHeader, , validSignature] = valid.split('.');
    const validClaims = decodeJwt(valid);
    const asAlice = `${validHeader}.${encode({ ...validClaims, sub: alice, groups: [`platform:user:${alice}`] })}.${validSignature}`;
    // No signature at all.
    const unsigned = `${encode({ ...decodeProtectedHeader(valid), alg: 'none' })}.${encode(validClaims)}.`;
    const refusals = await Promise.all([revoked, regenerated, asAlice, unsigned].map(review));
    for (const refusal of refusals) {
      expect(refusal.authenticated).toBe(false);
      expect(refusal.user).toBeUndefined();
    }
    // One answer for every refusal: nothing tells a revoked token from a forged one.
    expect(new Set(refusals.map((refusal) => JSON.stringify(refusal))).size).toBe(1);
  });
});
