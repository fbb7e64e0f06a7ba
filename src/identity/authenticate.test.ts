import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import {
  AccessKeyDisabled,
  AccessKeyExpired,
  AccessKeyOwnerInvalid,
  type AuthenticationContext,
  type AuthenticationResult,
  authenticateAccessKey,
  InvalidAccessKey,
  UserDisabled,
} from './authenticate.ts';
import { generateAccessKey, hashAccessKey, MalformedAccessKey } from './keys.ts';

const PEPPER = randomBytes(32);
const CREATED = '2025-01-01T00:00:00Z';
const CREATED_MS = Date.parse(CREATED);

function user(name: string, spec: Partial<User['spec']> = {}, teams: string[] = []): User {
  return {
    apiVersion: 'management.platform/v1',
    kind: 'User',
    metadata: { name, uid: `uid-${name}` },
    spec,
    status: { teams },
  } as User;
}

function team(name: string, spec: Partial<Team['spec']> = {}): Team {
  return {
    apiVersion: 'management.platform/v1',
    kind: 'Team',
    metadata: { name, uid: `uid-${name}` },
    spec,
  } as Team;
}

function accessKey(spec: Partial<OwnedAccessKey['spec']>, extra: Partial<OwnedAccessKey> = {}) {
  const generated = generateAccessKey(randomBytes);
  const object = {
    apiVersion: 'management.platform/v1',
    kind: 'OwnedAccessKey',
    metadata: { name: `key-${generated.id}`, creationTimestamp: CREATED },
    spec: { keyId: generated.id, keyHash: hashAccessKey(generated.key, PEPPER), ...spec },
    ...extra,
  } as OwnedAccessKey;
  return { token: generated.key, object };
}

function contextWith(
  keys: OwnedAccessKey[],
  options: { users?: User[]; teams?: Team[]; nowMs?: number; lookups?: string[] } = {},
): AuthenticationContext {
  const lookups = options.lookups ?? [];
  return {
    lookupKey: (id) => {
      lookups.push(id);
      return keys.filter((key) => key.spec.keyId === id);
    },
    lookupUser: (name) => options.users?.find((u) => u.metadata.name === name),
    lookupTeam: (name) => options.teams?.find((t) => t.metadata.name === name),
    pepper: PEPPER,
    now: () => new Date(options.nowMs ?? CREATED_MS + 1000),
    limits: {},
  };
}

function failureOf(result: AuthenticationResult): Error {
  if (result.ok) throw new Error('expected a failure');
  return result.failure;
}

describe('authenticateAccessKey', () => {
  const alice = user('alice', { displayName: 'Alice' }, ['devs', 'gone']);
  const devs = team('devs', { users: ['alice'] });
  const admins = team('admins', { clusterRoles: [{ name: 'platform-admin' }] });

  it('authenticates a user key with the DESIGN groups', () => {
    const { token, object } = accessKey({ user: 'alice', groups: ['ci'], type: 'User' });
    const result = authenticateAccessKey(token, contextWith([object], { users: [alice], teams: [devs] }));
    expect(result).toEqual({
      ok: true,
      identity: {
        kind: 'User',
        name: 'alice',
        username: 'alice',
        uid: 'uid-alice',
        groups: ['ci', 'platform:authenticated', 'platform:team:devs', 'platform:user:alice'],
        accessKey: {
          name: object.metadata.name,
          id: object.spec.keyId,
          type: 'User',
          scope: undefined,
          expiresAt: null,
          ttlAfterLastActivity: false,
        },
      },
      record: expect.objectContaining({ key: object, name: object.metadata.name }),
    });
  });

  it("uses the user's subject as username when set", () => {
    const { token, object } = accessKey({ user: 'bob' });
    const bob = user('bob', { subject: 'bob@example.com' });
    const result = authenticateAccessKey(token, contextWith([object], { users: [bob] }));
    expect(result.ok && result.identity.username).toBe('bob@example.com');
  });

  it.each([
    ['on the user', user('carol', { clusterRoles: [{ name: 'platform-admin' }] }), true],
    ['on one of its teams', user('carol', {}, ['admins']), true],
    ['nowhere', user('carol', { clusterRoles: [{ name: 'viewer' }] }, ['devs']), false],
  ])('adds platform:admins for the platform-admin role %s', (_case, carol, admin) => {
    const { token, object } = accessKey({ user: 'carol' });
    const result = authenticateAccessKey(
      token,
      contextWith([object], { users: [carol], teams: [devs, admins] }),
    );
    expect(result.ok).toBe(true);
    expect(result.ok && result.identity.groups.includes('platform:admins')).toBe(admin);
  });

  it('lets a team key act as the team, not as any user', () => {
    const { token, object } = accessKey({ team: 'admins', groups: ['robots'] });
    const result = authenticateAccessKey(token, contextWith([object], { users: [alice], teams: [admins] }));
    expect(result.ok && result.identity).toMatchObject({
      kind: 'Team',
      name: 'admins',
      username: 'platform:team:admins',
      uid: 'uid-admins',
      groups: ['platform:admins', 'platform:authenticated', 'platform:team:admins', 'robots'],
    });
  });

  it('lets a subject key act as its subject', () => {
    const { token, object } = accessKey({ subject: 'network-peer-1', groups: ['peers'] });
    const result = authenticateAccessKey(token, contextWith([object]));
    expect(result.ok && result.identity).toMatchObject({
      kind: 'Subject',
      username: 'network-peer-1',
      groups: ['peers', 'platform:authenticated'],
    });
  });

  it('refuses a malformed token before any lookup', () => {
    const lookups: string[] = [];
    const result = authenticateAccessKey('Bearer nonsense', contextWith([], { lookups }));
    expect(failureOf(result)).toBeInstanceOf(MalformedAccessKey);
    expect(lookups).toEqual([]);
  });

  it("refuses a token of a stored key's id whose checksum is wrong as malformed, and accepts the key", () => {
    const { token, object } = accessKey({ subject: 'ci' });
    const last = token.at(-1) === '0' ? '1' : '0';
    const typo = token.slice(0, -1) + last;
    const context = contextWith([object]);
    const refused = failureOf(authenticateAccessKey(typo, context));
    expect(refused).toBeInstanceOf(MalformedAccessKey);
    expect((refused as MalformedAccessKey).problem).toBe('checksum');
    expect(authenticateAccessKey(token, context).ok).toBe(true);
  });

  it('gives equal results for an unknown id and a wrong secret', () => {
    const { object } = accessKey({ user: 'alice' });
    // Same id as the stored key, different secret: a wrong secret.
    const forged = generateAccessKey(randomBytes);
    const wrongSecretToken = generateAccessKey((size) =>
      size === 10 ? base32Decode(object.spec.keyId!) : randomBytes(size),
    ).key;
    expect(wrongSecretToken.slice(4, 20)).toBe(object.spec.keyId);
    const context = contextWith([object], { users: [alice] });
    const unknown = authenticateAccessKey(forged.key, context);
    const wrongSecret = authenticateAccessKey(wrongSecretToken, context);
    expect(failureOf(unknown)).toBeInstanceOf(InvalidAccessKey);
    expect(failureOf(wrongSecret)).toBeInstanceOf(InvalidAccessKey);
    expect({ ...unknown, keyId: undefined }).toEqual({ ...wrongSecret, keyId: undefined });
    expect(failureOf(unknown).message).toBe(failureOf(wrongSecret).message);
  });

  it('treats a key whose keyId does not match the lookup as unknown', () => {
    const { token, object } = accessKey({ user: 'alice' });
    const context = {
      ...contextWith([], { users: [alice] }),
      lookupKey: () => [{ ...object, spec: { ...object.spec, keyId: 'other' } }],
    };
    expect(failureOf(authenticateAccessKey(token, context))).toBeInstanceOf(InvalidAccessKey);
  });

  it('finds the key whose hash matches, whatever the order of objects sharing its id', () => {
    const { token, object } = accessKey({ user: 'alice' });
    // Someone else's object carrying alice's public id with a secret of their own.
    const impostor = {
      ...object,
      metadata: { ...object.metadata, name: 'impostor' },
      spec: { ...object.spec, user: 'mallory', keyHash: 'f'.repeat(64) },
    };
    for (const order of [
      [impostor, object],
      [object, impostor],
    ]) {
      const result = authenticateAccessKey(token, {
        ...contextWith([], { users: [alice] }),
        lookupKey: () => order,
      });
      expect(result.ok && result.identity.name).toBe('alice');
    }
  });

  it('refuses a disabled key and a key being deleted', () => {
    const disabled = accessKey({ user: 'alice', disabled: true });
    const deleting = accessKey({ user: 'alice' });
    deleting.object.metadata.deletionTimestamp = CREATED;
    const context = contextWith([disabled.object, deleting.object], { users: [alice] });
    expect(failureOf(authenticateAccessKey(disabled.token, context))).toBeInstanceOf(AccessKeyDisabled);
    expect(failureOf(authenticateAccessKey(deleting.token, context))).toBeInstanceOf(AccessKeyDisabled);
  });

  it('refuses a key 1 ms after its deadline and at the deadline, but not 1 ms before', () => {
    const { token, object } = accessKey({ user: 'alice', ttl: 60 });
    const deadline = CREATED_MS + 60_000;
    const at = (nowMs: number) =>
      authenticateAccessKey(token, contextWith([object], { users: [alice], nowMs }));
    expect(at(deadline - 1).ok).toBe(true);
    expect(failureOf(at(deadline))).toBeInstanceOf(AccessKeyExpired);
    const expired = failureOf(at(deadline + 1)) as AccessKeyExpired;
    expect(expired).toBeInstanceOf(AccessKeyExpired);
    expect(expired.expiredAt).toEqual(new Date(deadline));
  });

  it('judges a remembered answer again as time passes and when the config changes', () => {
    const { token, object } = accessKey({ user: 'alice', ttl: 60 });
    let nowMs = CREATED_MS + 1000;
    const context: AuthenticationContext = {
      ...contextWith([object], { users: [alice] }),
      ownersVersion: () => 1,
      now: () => new Date(nowMs),
    };
    const first = authenticateAccessKey(token, context);
    expect(first.ok).toBe(true);
    expect(authenticateAccessKey(token, context)).toBe(first);
    // A shorter global maximum (a new config: a new limits object) applies at once.
    expect(
      failureOf(authenticateAccessKey(token, { ...context, limits: { accessKeyMaxTTLSeconds: 1 } })),
    ).toBeInstanceOf(AccessKeyExpired);
    nowMs = CREATED_MS + 60_000;
    const expired = failureOf(authenticateAccessKey(token, context)) as AccessKeyExpired;
    expect(expired).toBeInstanceOf(AccessKeyExpired);
    expect(expired.expiredAt).toEqual(new Date(CREATED_MS + 60_000));
  });

  it('answers with the expiry of the config in effect, not the one a remembered answer was made with', () => {
    const { token, object } = accessKey({ user: 'alice' });
    const context: AuthenticationContext = {
      ...contextWith([object], { users: [alice] }),
      ownersVersion: () => 1,
    };
    const unlimited = authenticateAccessKey(token, context);
    expect(unlimited.ok && unlimited.identity.accessKey.expiresAt).toBeNull();
    const capped = authenticateAccessKey(token, { ...context, limits: { accessKeyMaxTTLSeconds: 3600 } });
    expect(capped.ok && capped.identity.accessKey.expiresAt).toEqual(new Date(CREATED_MS + 3_600_000));
    const again = authenticateAccessKey(token, { ...context, limits: {} });
    expect(again.ok && again.identity.accessKey.expiresAt).toBeNull();
  });

  it('counts ttlAfterLastActivity from activity the recorder has not written yet', () => {
    const { token, object } = accessKey({ user: 'alice', ttl: 60, ttlAfterLastActivity: true });
    const nowMs = CREATED_MS + 90_000;
    const context = contextWith([object], { users: [alice], nowMs });
    expect(failureOf(authenticateAccessKey(token, context))).toBeInstanceOf(AccessKeyExpired);
    const recent = new Date(CREATED_MS + 50_000);
    expect(authenticateAccessKey(token, { ...context, recentActivity: () => recent }).ok).toBe(true);
  });

  it('applies the global maximum ttl', () => {
    const { token, object } = accessKey({ user: 'alice' });
    const context = {
      ...contextWith([object], { users: [alice], nowMs: CREATED_MS + 10_000 }),
      limits: { accessKeyMaxTTLSeconds: 10 },
    };
    expect(failureOf(authenticateAccessKey(token, context))).toBeInstanceOf(AccessKeyExpired);
  });

  it('refuses a user key given to an earlier User of the same name (deleted, made again)', () => {
    const later = {
      ...alice,
      metadata: { ...alice.metadata, uid: 'uid-alice-2', creationTimestamp: CREATED },
    };
    const owner = (uid: string) => ({
      apiVersion: 'management.platform/v1',
      kind: 'User',
      name: 'alice',
      uid,
    });
    const recorded = accessKey({ user: 'alice', type: 'Login' });
    recorded.object.metadata.ownerReferences = [owner('uid-alice')];
    expect(authenticateAccessKey(recorded.token, contextWith([recorded.object], { users: [alice] })).ok).toBe(
      true,
    );
    expect(
      failureOf(authenticateAccessKey(recorded.token, contextWith([recorded.object], { users: [later] }))),
    ).toBeInstanceOf(AccessKeyOwnerInvalid);
    // A key of any type that records its User is bound to that uid.
    const apiKey = accessKey({ user: 'alice' });
    apiKey.object.metadata.ownerReferences = [owner('uid-alice')];
    expect(
      failureOf(authenticateAccessKey(apiKey.token, contextWith([apiKey.object], { users: [later] }))),
    ).toBeInstanceOf(AccessKeyOwnerInvalid);
    // A Login key without the record, created before its User was: an earlier User's.
    const unrecorded = accessKey({ user: 'alice', type: 'Login' });
    const remade = { ...later, metadata: { ...later.metadata, creationTimestamp: '2025-01-01T00:00:01Z' } };
    expect(
      failureOf(
        authenticateAccessKey(unrecorded.token, contextWith([unrecorded.object], { users: [remade] })),
      ),
    ).toMatchObject({ message: 'the access key belongs to an earlier user of this name' });
    expect(
      authenticateAccessKey(unrecorded.token, contextWith([unrecorded.object], { users: [later] })).ok,
    ).toBe(true);
    // Other keys without the record are bound by name only.
    const unrecordedApiKey = accessKey({ user: 'alice' });
    expect(
      authenticateAccessKey(
        unrecordedApiKey.token,
        contextWith([unrecordedApiKey.object], { users: [remade] }),
      ).ok,
    ).toBe(true);
  });

  it.each([
    ['a disabled user', { user: 'dave' }, UserDisabled],
    ['a missing user', { user: 'nobody' }, AccessKeyOwnerInvalid],
    ['a missing team', { team: 'nobody' }, AccessKeyOwnerInvalid],
    ['no owner', {}, AccessKeyOwnerInvalid],
    ['user and subject', { user: 'alice', subject: 'x' }, AccessKeyOwnerInvalid],
    ['a reserved group', { user: 'alice', groups: ['platform:admins'] }, AccessKeyOwnerInvalid],
    ['a system group', { user: 'alice', groups: ['system:masters'] }, AccessKeyOwnerInvalid],
    ['a reserved subject', { subject: 'system:kube-controller-manager' }, AccessKeyOwnerInvalid],
  ])('refuses a key with %s', (_case, spec, failure) => {
    const { token, object } = accessKey(spec);
    const dave = user('dave', { disabled: true });
    const result = authenticateAccessKey(
      token,
      contextWith([object], { users: [alice, dave], teams: [devs] }),
    );
    expect(failureOf(result)).toBeInstanceOf(failure);
  });

  it('never puts the token into a failure message', () => {
    const { token, object } = accessKey({ user: 'alice', disabled: true });
    const result = authenticateAccessKey(token, contextWith([object], { users: [alice] }));
    expect(failureOf(result).message).not.toContain(token.slice(21));
  });
});

/** Inverse of the id encoding, to forge a key with a known id and a different secret. */
function base32Decode(text: string): Uint8Array {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bytes: number[] = [];
  let value = 0;
  let bits = 0;
  for (const char of text) {
    value = (value << 5) | alphabet.indexOf(char);
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Uint8Array.from(bytes);
}

describe('the owner remembered per key object', () => {
  const groupsOf = (result: AuthenticationResult) => (result.ok ? result.identity.groups : []);

  it('follows a changed User or Team object on the next call, with and without a caches version', () => {
    for (const versioned of [false, true]) {
      const { token, object } = accessKey({ user: 'bob' });
      let bob = user('bob', {}, ['devs']);
      let devs = team('devs');
      let version = 1;
      const context: AuthenticationContext = {
        ...contextWith([object]),
        lookupUser: (name) => (name === 'bob' ? bob : undefined),
        lookupTeam: (name) => (name === 'devs' ? devs : undefined),
        ...(versioned ? { ownersVersion: () => version } : {}),
      };
      expect(groupsOf(authenticateAccessKey(token, context))).not.toContain('platform:admins');
      // The same answer while nothing changed.
      expect(groupsOf(authenticateAccessKey(token, context))).toEqual(
        groupsOf(authenticateAccessKey(token, context)),
      );

      devs = team('devs', { clusterRoles: [{ name: 'platform-admin' }] });
      version++;
      expect(groupsOf(authenticateAccessKey(token, context))).toContain('platform:admins');

      bob = user('bob', { disabled: true }, ['devs']);
      version++;
      expect(failureOf(authenticateAccessKey(token, context))).toBeInstanceOf(UserDisabled);

      bob = user('bob', {}, []);
      version++;
      expect(groupsOf(authenticateAccessKey(token, context))).not.toContain('platform:team:devs');
    }
  });

  it('never reuses a failed resolution', () => {
    const { token, object } = accessKey({ user: 'carol' });
    let carol: User | undefined;
    const context: AuthenticationContext = {
      ...contextWith([object]),
      lookupUser: (name) => (name === 'carol' ? carol : undefined),
      ownersVersion: () => 1, // a version that never moves: only successes are remembered
    };
    expect(failureOf(authenticateAccessKey(token, context))).toBeInstanceOf(AccessKeyOwnerInvalid);
    carol = user('carol');
    expect(authenticateAccessKey(token, context).ok).toBe(true);
  });
});
