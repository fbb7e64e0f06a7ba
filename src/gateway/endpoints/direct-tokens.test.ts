import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test-support/fake-clock.ts';
import { parseConfig } from '../../api/config.ts';
import type { User } from '../../api/identity.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { StatusError } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { SigningKeyRing } from '../../identity/signing-key-ring.ts';
import { DEFAULT_ROTATION_POLICY, generateSigningKey, rotateKeyRing } from '../../identity/signing-keys.ts';
import {
  directTokensEndpoint,
  JWKS_PATH,
  OPENID_CONFIGURATION_PATH,
  oidcEndpoints,
} from './direct-tokens.ts';
import type { GatewayRequest } from './endpoint.ts';

/** A public document as its endpoint serves it. */
async function oidcDocument(path: string, issuer: string, ring: SigningKeyRing): Promise<unknown> {
  const endpoint = oidcEndpoints('', () => issuer, ring).find(
    (candidate) => candidate.route.kind === 'path' && candidate.route.path === path,
  );
  const answer = await endpoint?.handle({} as GatewayRequest);
  return answer && 'body' in answer ? JSON.parse(String(answer.body)) : undefined;
}

const ISSUER = 'https://platform.example';

/** The caller's key object and User, as the authenticator's caches hold them. */
const cachedKey = { metadata: { name: 'k', uid: 'uid-k' }, spec: { user: 'alice' } } as OwnedAccessKey;
const cachedUser = { metadata: { name: 'alice', uid: 'uid-a' }, spec: { tokenGeneration: 4 } } as User;

async function setup(
  scope?: AuthenticatedIdentity['accessKey']['scope'],
  expiresAt: Date | null = null,
  caches: { key?: OwnedAccessKey; liveKey?: OwnedAccessKey } = { key: cachedKey },
) {
  const clock = new FakeClock();
  const ring = await rotateKeyRing([], clock.now(), DEFAULT_ROTATION_POLICY, generateSigningKey);
  // The ring as its informer holds it (its watching and rotation: e2e/identity/signing-key-ring).
  const keyRing: SigningKeyRing = { current: async () => ring };
  const handler = directTokensEndpoint({
    ring: keyRing,
    clock,
    issuer: () => ISSUER,
    config: () => parseConfig('auth:\n  accessKeyMaxTTLSeconds: 600\n'),
    owners: {
      key: (name) => (name === caches.key?.metadata.name ? caches.key : undefined),
      user: (name) => (name === 'alice' ? cachedUser : undefined),
      team: () => undefined,
    },
    readKey: async (name) => (name === caches.liveKey?.metadata.name ? caches.liveKey : undefined),
  });
  const identity: AuthenticatedIdentity = {
    kind: 'User',
    name: 'alice',
    username: 'alice',
    groups: ['platform:authenticated', 'platform:user:alice'],
    uid: 'uid-a',
    accessKey: { name: 'k', id: 'i', type: 'User', scope, expiresAt, ttlAfterLastActivity: false },
  };
  const call = async (body: unknown) => {
    const answer = await handler.handle({ identity, object: () => body } as unknown as GatewayRequest);
    if (!('object' in answer)) throw new Error('not an object answer');
    return { code: answer.code, body: answer.object };
  };
  return { clock, handler, call, keyRing, ring };
}

describe('directTokensEndpoint', () => {
  it("names the minting key (name and uid) and carries the user's token generation", async () => {
    const { call } = await setup();
    const response = await call({ spec: { scope: { clusters: [{ cluster: 'east' }] } } });
    const token = (response.body as { status: { token: string } }).status.token;
    expect(decodeJwt(token)['management.platform']).toMatchObject({
      uid: 'uid-a',
      name: 'alice',
      kind: 'User',
      gen: 4,
      accessKey: { name: 'k', uid: 'uid-k' },
    });
  });

  it('reads a key the caches do not hold yet, and answers 503 when it cannot be read', async () => {
    const live = { ...cachedKey, metadata: { name: 'k', uid: 'uid-live' } } as OwnedAccessKey;
    const fresh = await setup(undefined, null, { liveKey: live });
    const minted = await fresh.call({ spec: {} });
    const token = (minted.body as { status: { token: string } }).status.token;
    expect(decodeJwt(token)['management.platform']).toMatchObject({
      accessKey: { name: 'k', uid: 'uid-live' },
    });
    const unreadable = await setup(undefined, null, {});
    await expect(unreadable.call({ spec: {} })).rejects.toMatchObject({ code: 503 });
  });

  it('answers 201 with a token that verifies against the published JWKS, ttl capped by the config', async () => {
    const { call, keyRing, clock } = await setup();
    const response = await call({ spec: { ttl: 3600, scope: { clusters: [{ cluster: 'east' }] } } });
    expect(response.code).toBe(201);
    const token = (response.body as { status: { token: string } }).status.token;
    const jwks = (await oidcDocument(JWKS_PATH, ISSUER, keyRing)) as unknown as Parameters<
      typeof createLocalJWKSet
    >[0];
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer: ISSUER,
      audience: 'east',
      currentDate: new Date(clock.now()),
    });
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(600);
    expect(await oidcDocument(OPENID_CONFIGURATION_PATH, ISSUER, keyRing)).toMatchObject({
      issuer: ISSUER,
      jwks_uri: `${ISSUER}${JWKS_PATH}`,
    });
  });

  it('ends no later than the caller key', async () => {
    const clock = new FakeClock();
    const { call, keyRing } = await setup(undefined, new Date(clock.now() + 120_000));
    const response = await call({ spec: { ttl: 3600 } });
    const token = (response.body as { status: { token: string } }).status.token;
    const jwks = (await oidcDocument(JWKS_PATH, ISSUER, keyRing)) as Parameters<typeof createLocalJWKSet>[0];
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer: ISSUER,
      currentDate: new Date(clock.now()),
    });
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(120);
  });

  it('refuses a wildcard inside a name: it would widen the audience to the whole platform', async () => {
    const { call } = await setup();
    await expect(call({ spec: { scope: { clusters: [{ cluster: 'x*' }] } } })).rejects.toMatchObject({
      code: 403,
    });
    await expect(
      call({ spec: { scope: { virtualClusters: [{ project: 'p', virtualCluster: 'd*v' }] } } }),
    ).rejects.toMatchObject({ code: 403 });
  });

  it('refuses a scope wider than the key, and an invalid body, as Status errors', async () => {
    const { call } = await setup({ clusters: [{ cluster: 'east' }] });
    await expect(call({ spec: { scope: { clusters: [{ cluster: 'west' }] } } })).rejects.toMatchObject({
      code: 403,
    });
    const invalid = await call({ spec: { ttl: -1 } }).catch((err: unknown) => err);
    expect(invalid).toBeInstanceOf(StatusError);
    expect((invalid as StatusError).code).toBe(422);
  });

  it('refuses a body with a key __proto__ anywhere, naming its path, instead of reading it as absent (issue 29)', async () => {
    const { call } = await setup();
    // As the gateway decodes a JSON body: __proto__ is a key of its own, which zod would drop.
    const body = JSON.parse(
      '{"__proto__":{},"metadata":{"labels":{"__proto__":"x","constructor":"c"}},"spec":{"scope":{"__proto__":{"clusters":[{"cluster":"east"}]}}}}',
    );
    const refused = await call(body).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StatusError);
    expect((refused as StatusError).code).toBe(422);
    expect((refused as StatusError).details?.causes).toEqual([
      {
        reason: 'FieldValueNotSupported',
        field: '__proto__',
        message: 'the key "__proto__" is not supported',
      },
      {
        reason: 'FieldValueNotSupported',
        field: 'metadata.labels.__proto__',
        message: 'the key "__proto__" is not supported',
      },
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.scope.__proto__',
        message: 'the key "__proto__" is not supported',
      },
    ]);
    // The other names of Object.prototype's members are keys as any other.
    await expect(call({ metadata: { labels: { constructor: 'c', toString: 't' } } })).resolves.toBeDefined();
  });
});
