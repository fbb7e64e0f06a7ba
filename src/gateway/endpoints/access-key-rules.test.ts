import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { parseAccessKey } from '../../identity/keys.ts';
import {
  capKeyLifetime,
  checkOwnKeyChange,
  checkOwnKeyCreate,
  ownerAccessKeys,
  ownerFieldSelector,
  ownsKey,
  prepareKeyCreate,
} from './access-key-rules.ts';

const alice: AuthenticatedIdentity = {
  kind: 'User',
  name: 'alice',
  username: 'alice',
  groups: ['ci', 'platform:authenticated', 'platform:user:alice'],
  uid: 'u1',
  accessKey: {
    name: 'k',
    id: 'x',
    type: 'User',
    scope: undefined,
    expiresAt: null,
    ttlAfterLastActivity: false,
  },
};
const scoped = (scope: AuthenticatedIdentity['accessKey']['scope'], expiresAt: Date | null = null) => ({
  ...alice,
  accessKey: { ...alice.accessKey, scope, expiresAt },
});
const random = (n: number) => new Uint8Array(n).fill(3);
const key = (spec: Record<string, unknown>) => ({
  metadata: { name: 'k1', creationTimestamp: '2030-01-01T00:00:00Z' },
  spec: { user: 'alice', type: 'User', ...spec },
});

describe('creating keys', () => {
  test('create mints a key, fills the owner and the type, names from a prefix', () => {
    const prepared = prepareKeyCreate(
      { metadata: { generateName: 'ci-' }, spec: { displayName: 'CI' } },
      alice,
      random,
    );
    if (prepared instanceof StatusError) throw prepared;
    expect(parseAccessKey(prepared.plaintext)).not.toBeInstanceOf(Error);
    expect(prepared.object.spec).toMatchObject({
      user: 'alice',
      type: 'User',
      key: prepared.plaintext,
      displayName: 'CI',
    });
    expect(prepared.object.metadata).toEqual({ generateName: 'ci-' });
    expect(checkOwnKeyCreate(alice, prepared.object)).toBeUndefined();
    const unnamed = prepareKeyCreate({}, alice, random);
    if (unnamed instanceof StatusError) throw unnamed;
    expect(unnamed.object.metadata).toEqual({ generateName: 'key-' });
  });

  test('create refuses hashes, bad keys and other kinds', () => {
    expect((prepareKeyCreate({ spec: { keyHash: 'a' } }, alice, random) as StatusError).code).toBe(422);
    expect((prepareKeyCreate({ spec: { key: 'nope' } }, alice, random) as StatusError).code).toBe(422);
    expect((prepareKeyCreate({ kind: 'SharedSecret' }, alice, random) as StatusError).code).toBe(400);
    expect((prepareKeyCreate({ spec: [] }, alice, random) as StatusError).code).toBe(400);
  });

  test('non-admins create their own keys only: no identity, no groups, no wider scope', () => {
    expect(ownsKey(alice, { spec: { user: 'alice' } })).toBe(true);
    expect(ownsKey(alice, { spec: { user: 'bob' } })).toBe(false);
    expect(ownsKey(alice, { spec: { user: 'alice', team: 'ops' } })).toBe(false);
    expect(checkOwnKeyCreate(alice, { spec: { user: 'bob' } })?.code).toBe(403);
    expect(checkOwnKeyCreate(alice, { spec: { user: 'alice', groups: ['ci'] } })?.code).toBe(403);
    expect(checkOwnKeyCreate(alice, { spec: { user: 'alice', identity: { groups: ['ops'] } } })?.code).toBe(
      403,
    );
    expect(checkOwnKeyCreate(alice, { spec: { user: 'alice', type: 'Login' } })?.code).toBe(403);
    const web = scoped({ projects: [{ project: 'web' }] });
    expect(checkOwnKeyCreate(web, { spec: { user: 'alice' } })?.code).toBe(403);
    expect(
      checkOwnKeyCreate(web, { spec: { user: 'alice', scope: { projects: [{ project: 'db' }] } } })?.code,
    ).toBe(403);
    expect(
      checkOwnKeyCreate(web, { spec: { user: 'alice', scope: { projects: [{ project: 'web' }] } } }),
    ).toBeUndefined();
    expect(ownerFieldSelector(alice, null)).toBe('spec.user=alice');
    expect(ownerFieldSelector(alice, 'metadata.name=a')).toBe('metadata.name=a,spec.user=alice');
  });

  test('a minted key ends no later than the key that minted it', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(capKeyLifetime({ ttl: 60 }, null, now)).toEqual({ spec: { ttl: 60 }, warning: undefined });
    const ends = new Date(now + 3600_000);
    expect(capKeyLifetime({ ttl: 60 }, ends, now)).toEqual({ spec: { ttl: 60 }, warning: undefined });
    expect(capKeyLifetime({}, ends, now).spec).toEqual({ ttl: 3600, ttlAfterLastActivity: false });
    expect(capKeyLifetime({ ttl: 7200 }, ends, now).spec.ttl).toBe(3600);
    const activity = capKeyLifetime({ ttl: 60, ttlAfterLastActivity: true }, ends, now);
    expect(activity.spec).toEqual({ ttl: 60, ttlAfterLastActivity: false });
    expect(activity.warning).toContain('no later than the key that created it');
  });
});

describe('changing keys: judged on the object that would be stored', () => {
  const limits = {};
  test('identity, groups and the owner never change', () => {
    const current = key({ identity: { groups: [] }, groups: [] });
    expect(
      checkOwnKeyChange(
        alice,
        current,
        key({ identity: { groups: [] }, groups: [], disabled: true }),
        limits,
      ),
    ).toBeUndefined();
    expect(
      checkOwnKeyChange(alice, current, key({ identity: { groups: ['ops'] }, groups: [] }), limits)?.code,
    ).toBe(403);
    expect(
      checkOwnKeyChange(alice, current, key({ identity: { groups: [] }, groups: ['ops'] }), limits)?.code,
    ).toBe(403);
    expect(checkOwnKeyChange(alice, current, { ...key({}), spec: { user: 'bob' } }, limits)?.code).toBe(403);
  });

  test('compared as stored JSON: a field holding undefined is no change', () => {
    const current = key({ identity: { connector: 'corp' }, scope: { projects: [{ project: 'web' }] } });
    const same = key({
      identity: { connector: 'corp', connectorData: undefined },
      groups: undefined,
      scope: { projects: [{ project: 'web', roles: undefined }] },
    });
    expect(checkOwnKeyChange(alice, current, same, limits)).toBeUndefined();
  });

  test('a scope only narrows, never beyond the caller', () => {
    const current = key({ scope: { projects: [{ project: 'web' }, { project: 'db' }] } });
    expect(
      checkOwnKeyChange(alice, current, key({ scope: { projects: [{ project: 'web' }] } }), limits),
    ).toBeUndefined();
    expect(
      checkOwnKeyChange(alice, current, key({ scope: { projects: [{ project: '*' }] } }), limits)?.code,
    ).toBe(403);
    expect(checkOwnKeyChange(alice, current, key({}), limits)?.code).toBe(403);
    const dbOnly = scoped({ projects: [{ project: 'db' }] });
    expect(
      checkOwnKeyChange(dbOnly, current, key({ scope: { projects: [{ project: 'web' }] } }), limits)?.code,
    ).toBe(403);
  });

  test('a changed lifetime ends no later than the caller', () => {
    const soon = scoped(undefined, new Date('2030-01-01T01:00:00Z'));
    const current = key({ ttl: 60 });
    expect(checkOwnKeyChange(soon, current, key({ ttl: 600 }), limits)).toBeUndefined();
    expect(checkOwnKeyChange(soon, current, key({ ttl: 7200 }), limits)?.code).toBe(403);
    expect(checkOwnKeyChange(soon, current, key({}), limits)?.code).toBe(403);
    expect(checkOwnKeyChange(soon, current, key({ ttl: 60, ttlAfterLastActivity: true }), limits)?.code).toBe(
      403,
    );
    expect(checkOwnKeyChange(alice, current, key({}), limits)).toBeUndefined();
  });
});

describe('owner key lists', () => {
  test('only the owner, redacted, by name', () => {
    const keys = [
      { metadata: { name: 'b' }, spec: { user: 'alice', identity: { connectorData: 'x', connector: 'c' } } },
      { metadata: { name: 'a' }, spec: { user: 'alice' } },
      { metadata: { name: 'c' }, spec: { user: 'bob' } },
    ] as never[];
    const list = ownerAccessKeys('UserAccessKeys', 'alice', keys) as {
      accessKeys: { metadata: { name: string }; spec: unknown }[];
    };
    expect(list.accessKeys.map((k) => k.metadata.name)).toEqual(['a', 'b']);
    expect(JSON.stringify(list)).not.toContain('connectorData');
  });
});
