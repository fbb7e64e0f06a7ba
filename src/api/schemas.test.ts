import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arbitraryFor, storedObjectArbitrary } from '../../test-support/arbitrary.ts';
import { ConditionSchema } from './meta.ts';
import { OwnedAccessKeySchema } from './ownedaccesskey.ts';
import { KINDS, STORED_KINDS } from './registry.ts';
import { canonicalScopeRole } from './scope.ts';
import { SharedSecretSchema } from './sharedsecret.ts';

describe('schemas', () => {
  it.each(STORED_KINDS.map((info) => [info.kind, info] as const))(
    'objects generated for %s survive parse unchanged',
    (_kind, info) => {
      fc.assert(
        fc.property(storedObjectArbitrary(info, { name: 'sample' }), (object) => {
          expect(info.schema.parse(object)).toEqual(object);
        }),
        { numRuns: 50 },
      );
    },
  );

  it.each(KINDS.filter((k) => !k.stored).map((info) => [info.kind, info] as const))(
    'values generated for virtual kind %s parse',
    (_kind, info) => {
      fc.assert(
        fc.property(arbitraryFor(info.schema, { omit: ['metadata'] }), (object) => {
          expect(info.schema.safeParse(object).success).toBe(true);
        }),
        { numRuns: 20 },
      );
    },
  );

  const secret = (data: Record<string, string>) => ({
    apiVersion: 'management.platform/v1',
    kind: 'SharedSecret',
    metadata: { name: 'my-global-secret', namespace: 'platform' },
    spec: { displayName: 'My Global Secret', description: 'Secret Data is base64 encoded.', data },
  });

  it.each([
    [{ password: 'cGFzc3dvcmQ=' }, true],
    [{ 'a.b-c_D9': '' }, true],
    [{ 'bad key': 'cGFzc3dvcmQ=' }, false],
    [{ 'a/b': 'cGFzc3dvcmQ=' }, false],
    [{ password: 'not base64!' }, false],
    [{ password: 'cGFzc3dvcmQ' }, false],
  ])('SharedSecret data %j valid: %s', (data, valid) => {
    expect(SharedSecretSchema.safeParse(secret(data)).success).toBe(valid);
  });

  it.each([
    [{ user: 'u', type: 'User' }, true],
    [{ team: 't', type: '' }, true],
    [{ user: 'u', team: 't' }, false],
    [{ user: 'u', type: 'Robot' }, false],
    [{ user: 'u', keyHash: 'a'.repeat(64), keyId: 'abc123' }, true],
    [{ user: 'u', keyHash: 'not-a-hash' }, false],
    [{ user: 'u', scope: { roles: [{ role: 'platformCLI' }] } }, true],
    [{ user: 'u', scope: { roles: [{ role: 'admin' }] } }, false],
    [{ user: 'u', scope: { rules: [{ resources: [{ resourceNames: ['x'] }] }] } }, false],
    [{ user: 'u', scope: { rules: [{ nonResourceURLs: ['/apis/*'] }] } }, true],
    [{ user: 'u', scope: { rules: [{ nonResourceURLs: ['/api*'] }] } }, false],
  ])('OwnedAccessKey spec %j valid: %s', (spec, valid) => {
    const key = {
      apiVersion: 'management.platform/v1',
      kind: 'OwnedAccessKey',
      metadata: { name: 'k' },
      spec,
    };
    expect(OwnedAccessKeySchema.safeParse(key).success).toBe(valid);
  });

  it('requires condition timestamps in UTC RFC 3339', () => {
    const condition = { type: 'Ready', status: 'True', lastTransitionTime: '2024-01-02T03:04:05Z' };
    expect(ConditionSchema.safeParse(condition).success).toBe(true);
    expect(ConditionSchema.safeParse({ ...condition, lastTransitionTime: 'yesterday' }).success).toBe(false);
    expect(ConditionSchema.safeParse({ ...condition, status: 'Maybe' }).success).toBe(false);
  });
});

describe('scope roles', () => {
  it('folds the platformCLI spelling only', () => {
    expect(canonicalScopeRole('platformCLI')).toBe('platform-cli');
    expect(canonicalScopeRole('agent')).toBe('agent');
  });
});
