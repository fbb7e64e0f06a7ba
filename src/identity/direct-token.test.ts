import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_DIRECT_TOKEN_TTL_SECONDS,
  directTokenAudience,
  directTokenScope,
  directTokenTtlSeconds,
  MAX_DIRECT_TOKEN_TTL_SECONDS,
  mintDirectClusterEndpointToken,
  PLATFORM_AUDIENCE,
  ScopeWidens,
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
      'management.platform': { uid: 'uid-alice', name: 'alice', kind: 'User', gen: 0, scope },
    });
    await expect(
      jwtVerify(token, createLocalJWKSet(publicJwks(ring)), { audience: 'west' }),
    ).rejects.toThrow();
  });
});
