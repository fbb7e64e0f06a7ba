import { describe, expect, it } from 'vitest';
import type { SigningKey } from '../../identity/signing-keys.ts';
import { providerJwks } from './configuration.ts';
import {
  REFRESH_TOKEN_PAYLOAD_ANNOTATION,
  refreshTokenKey,
  refreshTokenKeyName,
  refreshTokenPayload,
} from './store.ts';

const HASH = 'a'.repeat(64);
const TOKEN = 'the-refresh-token-value';
const payload = {
  jti: TOKEN,
  kind: 'RefreshToken',
  accountId: 'alice',
  clientId: 'argocd',
  grantId: 'grant-1',
  nonce: 'n-1',
  scope: 'openid email offline_access',
  iat: 1000,
  exp: 2000,
};

describe('refresh tokens as OwnedAccessKeys', () => {
  const key = refreshTokenKey({
    tokenHash: HASH,
    payload,
    expiresInSeconds: 1209600,
    user: { name: 'alice', uid: 'uid-1' },
  });

  it('keeps the keyed hash, the user, the client and the lifetime; never the token', () => {
    expect(key.metadata.name).toBe(refreshTokenKeyName(HASH));
    expect(key.metadata.ownerReferences).toEqual([
      { apiVersion: 'management.platform/v1', kind: 'User', name: 'alice', uid: 'uid-1' },
    ]);
    expect(key.spec).toMatchObject({
      user: 'alice',
      type: 'OIDCRefreshToken',
      keyHash: HASH,
      ttl: 1209600,
      oidcProvider: { clientId: 'argocd', nonce: 'n-1', scopes: 'openid email offline_access' },
    });
    // Longer than any access key's public id (16): no pak_ key is ever looked up under it.
    expect(key.spec.keyId?.length).toBeGreaterThan(16);
    expect(JSON.stringify(key)).not.toContain(TOKEN);
  });

  it('gives the payload back, with the token, only for an enabled key of the same hash', () => {
    expect(refreshTokenPayload(key, TOKEN, HASH)).toEqual(payload);
    expect(
      refreshTokenPayload({ ...key, spec: { ...key.spec, disabled: true } }, TOKEN, HASH),
    ).toBeUndefined();
    expect(refreshTokenPayload(key, TOKEN, 'b'.repeat(64))).toBeUndefined();
    expect(
      refreshTokenPayload({ ...key, spec: { ...key.spec, type: 'Login' } }, TOKEN, HASH),
    ).toBeUndefined();
    const broken = {
      ...key,
      metadata: { ...key.metadata, annotations: { [REFRESH_TOKEN_PAYLOAD_ANNOTATION]: '[' } },
    };
    expect(refreshTokenPayload(broken, TOKEN, HASH)).toBeUndefined();
  });
});

describe('the JWKS of the provider', () => {
  const key = (kid: string, signsFrom: string): SigningKey => ({
    kid,
    alg: 'ES256',
    privateJwk: { kty: 'EC', crv: 'P-256', x: 'x', y: 'y', d: 'd', kid },
    createdAt: signsFrom,
    signsFrom,
  });

  it('puts the key signing now first (oidc-provider signs with it), published successors after', () => {
    const ring = [
      key('old', '2026-01-01T00:00:00Z'),
      key('current', '2026-02-01T00:00:00Z'),
      key('next', '2026-03-01T00:00:00Z'),
    ];
    const jwks = providerJwks(ring, Date.parse('2026-02-15T00:00:00Z'));
    expect(jwks.keys.map((jwk) => jwk.kid)).toEqual(['current', 'old', 'next']);
    expect(jwks.keys.every((jwk) => jwk.alg === 'ES256' && jwk.use === 'sig')).toBe(true);
  });
});
