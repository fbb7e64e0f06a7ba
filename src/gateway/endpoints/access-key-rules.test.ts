import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { parseAccessKey } from '../../identity/keys.ts';
import {
  checkOwnKeyWrite,
  ownerFieldSelector,
  ownsKey,
  prepareKeyCreate,
  sanitizeKey,
  sanitizeKeys,
} from './access-key-rules.ts';

const alice: AuthenticatedIdentity = {
  kind: 'User',
  name: 'alice',
  username: 'alice',
  groups: ['ci', 'platform:authenticated', 'platform:user:alice'],
  uid: 'u1',
  accessKey: { name: 'k', id: 'x', type: 'User', scope: undefined, expiresAt: null },
};
const random = (n: number) => new Uint8Array(n).fill(3);

describe('owned access keys', () => {
  test('create mints a key, fills the owner and the type', () => {
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
    expect(prepared.generateName).toBe('ci-');
    expect(checkOwnKeyWrite(alice, prepared.object)).toBeUndefined();
  });

  test('create refuses hashes, bad keys and other kinds', () => {
    expect((prepareKeyCreate({ spec: { keyHash: 'a' } }, alice, random) as StatusError).code).toBe(422);
    expect((prepareKeyCreate({ spec: { key: 'nope' } }, alice, random) as StatusError).code).toBe(422);
    expect((prepareKeyCreate({ kind: 'SharedSecret' }, alice, random) as StatusError).code).toBe(400);
    expect((prepareKeyCreate({ spec: [] }, alice, random) as StatusError).code).toBe(400);
  });

  test('non-admins own their keys only and cannot hand out groups they lack', () => {
    expect(ownsKey(alice, { spec: { user: 'alice' } })).toBe(true);
    expect(ownsKey(alice, { spec: { user: 'bob' } })).toBe(false);
    expect(ownsKey(alice, { spec: { user: 'alice', team: 'ops' } })).toBe(false);
    expect(checkOwnKeyWrite(alice, { spec: { user: 'bob' } })?.code).toBe(403);
    expect(checkOwnKeyWrite(alice, { spec: { user: 'alice', groups: ['ci'] } })).toBeUndefined();
    expect(checkOwnKeyWrite(alice, { spec: { user: 'alice', groups: ['admins'] } })?.code).toBe(403);
    expect(checkOwnKeyWrite(alice, { spec: { user: 'alice', type: 'Login' } })?.code).toBe(403);
    expect(ownerFieldSelector(alice, null)).toBe('spec.user=alice');
    expect(ownerFieldSelector(alice, 'metadata.name=a')).toBe('metadata.name=a,spec.user=alice');
  });

  test('connectorData and keys never leave', () => {
    const key = {
      kind: 'OwnedAccessKey',
      spec: { key: 'k', identity: { connector: 'c', connectorData: 'secret' } },
    };
    expect(sanitizeKeys(key)).toEqual({ kind: 'OwnedAccessKey', spec: { identity: { connector: 'c' } } });
    expect(sanitizeKeys({ kind: 'List', items: [key] })).toEqual({
      kind: 'List',
      items: [{ kind: 'OwnedAccessKey', spec: { identity: { connector: 'c' } } }],
    });
    expect(sanitizeKeys({ type: 'ADDED', object: key })).toEqual({
      type: 'ADDED',
      object: { kind: 'OwnedAccessKey', spec: { identity: { connector: 'c' } } },
    });
  });
});

describe('sanitizeKey and the last-applied annotation', () => {
  test('drops a plaintext key kept by kubectl apply before admission cleaned it', () => {
    const applied = JSON.stringify({ spec: { user: 'alice', key: 'pak_secret' } });
    const sanitized = sanitizeKey({
      kind: 'OwnedAccessKey',
      metadata: {
        name: 'k',
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': applied, a: 'b' },
      },
      spec: { user: 'alice', keyHash: 'h' },
    });
    expect(JSON.stringify(sanitized)).not.toContain('pak_secret');
    expect(sanitized.metadata.annotations).toEqual({
      'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ spec: { user: 'alice' } }),
      a: 'b',
    });
  });
});
