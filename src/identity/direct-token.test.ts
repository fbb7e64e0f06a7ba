import { createLocalJWKSet, decodeProtectedHeader, importJWK, jwtVerify, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import {
  DEFAULT_DIRECT_TOKEN_TTL_SECONDS,
  type DirectTokenOwners,
  directTokenAudience,
  directTokenRevocation,
  directTokenScope,
  directTokenTtlSeconds,
  looksLikeJwt,
  MAX_DIRECT_TOKEN_TTL_SECONDS,
  mintDirectClusterEndpointToken,
  PLATFORM_AUDIENCE,
  type PlatformClaim,
  ScopeWidens,
  verifyDirectClusterEndpointToken,
} from './direct-token.ts';
import {
  currentSigningKey,
  DEFAULT_ROTATION_POLICY,
  generateSigningKey,
  publicJwks,
  rotateKeyRing,
} from './signing-keys.ts';

const subject = {
  username: 'alice',
  groups: ['platform:authenticated', 'platform:user:alice'],
  uid: 'uid-alice',
  name: 'alice',
  kind: 'User' as const,
};

describe('directTokenTtlSeconds', () => {
  it.each([
    [undefined, undefined, DEFAULT_DIRECT_TOKEN_TTL_SECONDS],
    [0, undefined, DEFAULT_DIRECT_TOKEN_TTL_SECONDS],
    [600, undefined, 600],
    [600, 300, 300],
    [600, 0, 600],
    [0, 60, 60],
    [10 ** 9, undefined, MAX_DIRECT_TOKEN_TTL_SECONDS],
  ])('ttl %s with accessKeyMaxTTLSeconds %s gives %s', (ttl, max, expected) => {
    expect(directTokenTtlSeconds(ttl, max)).toBe(expected);
  });
});

describe('directTokenScope and audience', () => {
  const clusters = (...names: string[]) => ({ clusters: names.map((cluster) => ({ cluster })) });
  it('inherits the key scope, or takes the request when the key is unscoped', () => {
    expect(directTokenScope(clusters('a'), undefined)).toEqual(clusters('a'));
    expect(directTokenScope(undefined, clusters('b'))).toEqual(clusters('b'));
    expect(directTokenScope({}, clusters('b'))).toEqual(clusters('b'));
  });
  it('narrows within the key scope and refuses to widen it', () => {
    expect(directTokenScope(clusters('a', 'b'), clusters('b'))).toEqual(clusters('b'));
    expect(() => directTokenScope(clusters('a'), clusters('b'))).toThrow(ScopeWidens);
    expect(() => directTokenScope(clusters('a'), clusters('*'))).toThrow(ScopeWidens);
    expect(() => directTokenScope(clusters('a'), { projects: [{ project: 'p' }] })).toThrow(ScopeWidens);
    const vc = { virtualClusters: [{ project: 'p', virtualCluster: 'v' }] };
    expect(directTokenScope({ projects: [{ project: 'p' }] }, vc)).toEqual(vc);
    expect(() => directTokenScope({ projects: [{ project: 'q' }] }, vc)).toThrow(ScopeWidens);
  });
  it('names the clusters in aud, or the platform audience', () => {
    expect(directTokenAudience(undefined)).toEqual([PLATFORM_AUDIENCE]);
    expect(directTokenAudience(clusters('b', 'a', 'a'))).toEqual(['a', 'b']);
    expect(directTokenAudience({ virtualClusters: [{ project: 'p', virtualCluster: 'v' }] })).toEqual([
      'p/v',
    ]);
    expect(directTokenAudience(clusters('a', '*'))).toEqual([PLATFORM_AUDIENCE]);
  });
});

describe('mintDirectClusterEndpointToken', () => {
  it('signs a JWT that verifies against the published JWKS with every documented claim', async () => {
    const ring = await rotateKeyRing([], Date.now(), DEFAULT_ROTATION_POLICY, generateSigningKey);
    const key = currentSigningKey(ring, Date.now())!;
    const scope = { clusters: [{ cluster: 'east' }] };
    const now = Date.now();
    const token = await mintDirectClusterEndpointToken({
      subject,
      generation: 3,
      accessKey: { name: 'alice-key', uid: 'uid-key' },
      scope,
      ttlSeconds: 600,
      issuer: 'https://platform.example',
      key,
      now,
    });
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'ES256', kid: key.kid });
    const { payload } = await jwtVerify(token, createLocalJWKSet(publicJwks(ring)), {
      issuer: 'https://platform.example',
      audience: 'east',
    });
    const iat = Math.floor(now / 1000);
    expect(payload).toMatchObject({
      sub: 'alice',
      aud: ['east'],
      groups: subject.groups,
      iat,
      nbf: iat,
      exp: iat + 600,
      'management.platform': {
        uid: 'uid-alice',
        name: 'alice',
        kind: 'User',
        gen: 3,
        accessKey: { name: 'alice-key', uid: 'uid-key' },
        scope,
      },
    });
    await expect(
      jwtVerify(token, createLocalJWKSet(publicJwks(ring)), { audience: 'west' }),
    ).rejects.toThrow();
  });
});

describe('directTokenRevocation', () => {
  const key = (
    spec: Partial<OwnedAccessKey['spec']> = {},
    metadata: Partial<OwnedAccessKey['metadata']> = {},
  ) =>
    ({
      metadata: { name: 'k', uid: 'uid-k', ...metadata },
      spec: { user: 'alice', ...spec },
    }) as OwnedAccessKey;
  const user = (spec: Partial<User['spec']> = {}, uid = 'uid-alice') =>
    ({ metadata: { name: 'alice', uid }, spec }) as User;
  const owners = (found: { key?: OwnedAccessKey; user?: User; team?: Team }): DirectTokenOwners => ({
    key: (name) => (found.key?.metadata.name === name ? found.key : undefined),
    user: (name) => (found.user?.metadata.name === name ? found.user : undefined),
    team: (name) => (found.team?.metadata.name === name ? found.team : undefined),
  });
  const claim = (overrides: Partial<PlatformClaim> = {}): PlatformClaim => ({
    uid: 'uid-alice',
    name: 'alice',
    kind: 'User',
    gen: 2,
    accessKey: { name: 'k', uid: 'uid-k' },
    ...overrides,
  });
  const inForce = { key: key(), user: user({ tokenGeneration: 2 }) };

  it('keeps a token whose key, user and generation are the ones it was minted with', () => {
    expect(directTokenRevocation(claim(), owners(inForce))).toBeUndefined();
    // A user who never raised the generation: 0.
    expect(directTokenRevocation(claim({ gen: 0 }), owners({ key: key(), user: user() }))).toBeUndefined();
  });

  it.each([
    ['the key is gone', { ...inForce, key: undefined }, 'its access key is gone'],
    [
      'another key object has the name',
      { ...inForce, key: key({}, { uid: 'uid-other' }) },
      'its access key is gone',
    ],
    ['the key is disabled', { ...inForce, key: key({ disabled: true }) }, 'its access key is disabled'],
    [
      'the key is being deleted',
      { ...inForce, key: key({}, { deletionTimestamp: '2026-01-01T00:00:00Z' }) },
      'its access key is disabled',
    ],
    [
      'the key now acts for another user',
      { ...inForce, key: key({ user: 'bob' }) },
      'its access key acts for someone else',
    ],
    ['the user is gone', { key: key() }, 'its user is gone'],
    [
      'another User has the name',
      { key: key(), user: user({ tokenGeneration: 2 }, 'uid-new') },
      'its user is gone',
    ],
    [
      'the user is disabled',
      { key: key(), user: user({ tokenGeneration: 2, disabled: true }) },
      'its user is disabled',
    ],
    [
      'the generation was raised',
      { key: key(), user: user({ tokenGeneration: 3 }) },
      "its user's tokens were revoked",
    ],
    [
      'the generation was lowered',
      { key: key(), user: user({ tokenGeneration: 1 }) },
      "its user's tokens were revoked",
    ],
  ])('refuses a token when %s', (_, found, reason) => {
    expect(directTokenRevocation(claim(), owners(found))).toBe(reason);
  });

  it('ends a team token with its team and key, and a subject token with its key', () => {
    const teamKey = key({ user: undefined, team: 'ops' });
    const team = { metadata: { name: 'ops', uid: 'uid-ops' }, spec: {} } as Team;
    const teamClaim = claim({ kind: 'Team', name: 'ops', uid: 'uid-ops', gen: 0 });
    expect(directTokenRevocation(teamClaim, owners({ key: teamKey, team }))).toBeUndefined();
    expect(directTokenRevocation(teamClaim, owners({ key: teamKey }))).toBe('its team is gone');
    expect(directTokenRevocation({ ...teamClaim, gen: 1 }, owners({ key: teamKey, team }))).toBe(
      'its generation is unknown',
    );
    const subjectKey = key({ user: undefined, subject: 'ci' });
    const subjectClaim = claim({ kind: 'Subject', name: 'ci', uid: '', gen: 0 });
    expect(directTokenRevocation(subjectClaim, owners({ key: subjectKey }))).toBeUndefined();
    expect(
      directTokenRevocation(
        subjectClaim,
        owners({ key: key({ user: undefined, subject: 'ci', disabled: true }) }),
      ),
    ).toBe('its access key is disabled');
  });
});

describe('verifyDirectClusterEndpointToken', () => {
  const issuer = 'https://platform.example';

  it('reads back what was minted; refuses other issuers, expired tokens, unknown keys and tokens without their key', async () => {
    const now = Date.now();
    const ring = await rotateKeyRing([], now, DEFAULT_ROTATION_POLICY, generateSigningKey);
    const key = currentSigningKey(ring, now)!;
    const scope = { clusters: [{ cluster: 'east' }] };
    const token = await mintDirectClusterEndpointToken({
      subject,
      generation: 1,
      accessKey: { name: 'k', uid: 'uid-k' },
      scope,
      ttlSeconds: 600,
      issuer,
      key,
      now,
    });
    expect(looksLikeJwt(token)).toBe(true);
    expect(await verifyDirectClusterEndpointToken(token, { issuer, keys: ring, now })).toEqual({
      username: 'alice',
      groups: subject.groups,
      audiences: ['east'],
      claim: {
        uid: 'uid-alice',
        name: 'alice',
        kind: 'User',
        gen: 1,
        accessKey: { name: 'k', uid: 'uid-k' },
        scope,
      },
    });
    expect(
      await verifyDirectClusterEndpointToken(token, { issuer: 'https://other.example', keys: ring, now }),
    ).toBeUndefined();
    expect(
      await verifyDirectClusterEndpointToken(token, { issuer, keys: ring, now: now + 601_000 }),
    ).toBeUndefined();
    const otherRing = await rotateKeyRing([], now, DEFAULT_ROTATION_POLICY, generateSigningKey);
    expect(await verifyDirectClusterEndpointToken(token, { issuer, keys: otherRing, now })).toBeUndefined();
    // A token as minted before tokens named their key (gen 0, no accessKey) is not in force anywhere.
    const legacy = await new SignJWT({
      groups: subject.groups,
      'management.platform': { uid: 'uid-alice', name: 'alice', kind: 'User', gen: 0 },
    })
      .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject('alice')
      .setAudience(['east'])
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(now / 1000) + 600)
      .sign(await importJWK(key.privateJwk, 'ES256'));
    expect(await verifyDirectClusterEndpointToken(legacy, { issuer, keys: ring, now })).toBeUndefined();
    expect(looksLikeJwt('pak_abc')).toBe(false);
  });
});
