import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { OWNER_UID_LABEL } from '../../api/labels.ts';
import type { SharedSecret, SharedSecretAccess } from '../../api/sharedsecret.ts';
import { desiredRbac, projectedName, ruleKeys } from './desired.ts';

const secret = (access: SharedSecretAccess[], name = 'db-password', uid = 'uid-1'): SharedSecret => ({
  apiVersion: 'management.platform/v1',
  kind: 'SharedSecret',
  metadata: { name, namespace: 'team-a', uid },
  spec: { data: { password: 'c2VjcmV0' }, access },
});

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe('desiredRbac', () => {
  test('one Role and one RoleBinding per rule, scoped to this secret, bound to platform groups', () => {
    const { roles, roleBindings } = desiredRbac(
      secret([
        { name: 'readers', verbs: ['get', 'list', 'get'], users: ['alice', 'bob'], teams: ['ops'] },
        { verbs: ['*'], subresources: ['status'], teams: ['admins'] },
      ]),
    );
    expect(roles).toHaveLength(2);
    expect(roleBindings).toHaveLength(2);

    const [readers, all] = roles;
    expect(readers!.metadata!.namespace).toBe('team-a');
    expect(readers!.rules).toEqual([
      {
        apiGroups: ['management.platform'],
        resources: ['sharedsecrets'],
        resourceNames: ['db-password'],
        verbs: ['get', 'list'],
      },
    ]);
    expect(all!.rules![0]!.verbs).toEqual(['*']);
    expect(all!.rules![0]!.resources).toEqual(['sharedsecrets', 'sharedsecrets/status']);

    expect(roleBindings[0]!.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:user:alice' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:user:bob' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:team:ops' },
    ]);
    expect(roleBindings[0]!.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: readers!.metadata!.name,
    });
    for (const object of [...roles, ...roleBindings]) {
      expect(object.metadata!.labels![OWNER_UID_LABEL]).toBe('uid-1');
      expect(object.metadata!.ownerReferences).toEqual([
        {
          apiVersion: 'management.platform/v1',
          kind: 'SharedSecret',
          name: 'db-password',
          uid: 'uid-1',
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
  });

  test('the user `*` binds every authenticated platform identity', () => {
    const { roleBindings } = desiredRbac(secret([{ verbs: ['get'], users: ['*', 'alice'] }]));
    expect(roleBindings[0]!.subjects!.map((s) => s.name)).toEqual([
      'platform:authenticated',
      'platform:user:alice',
    ]);
  });

  test('no access rules means no Roles', () => {
    expect(desiredRbac(secret([]))).toEqual({ roles: [], roleBindings: [] });
  });

  test('a named rule keeps its name when other rules come and go; unnamed rules are keyed by position', () => {
    const before = desiredRbac(secret([{ verbs: ['get'] }, { name: 'ci', verbs: ['get'] }]));
    const after = desiredRbac(secret([{ name: 'ci', verbs: ['get'] }]));
    expect(after.roles[0]!.metadata!.name).toBe(before.roles[1]!.metadata!.name);
  });

  test('duplicate rule names fall back to positions so names stay unique', () => {
    expect(
      ruleKeys([
        { name: 'x', verbs: ['get'] },
        { name: 'x', verbs: ['get'] },
        { name: 'y', verbs: ['get'] },
      ]),
    ).toEqual(['index:0', 'index:1', 'name:y']);
  });

  test('long and odd names are folded into a DNS label of at most 63 characters', () => {
    const name = projectedName(`very.long.${'x'.repeat(240)}`, 'name:Rule With Spaces/and_symbols');
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(DNS_LABEL);
    expect(name.startsWith('ss-very-long-xxx')).toBe(true);
  });
});

const nameArb = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,80}[a-z0-9])?$/);
const ruleArb: fc.Arbitrary<SharedSecretAccess> = fc.record(
  {
    name: fc.option(fc.string({ maxLength: 70 }), { nil: undefined }),
    verbs: fc.array(fc.constantFrom('get', 'list', 'watch', 'update', 'patch', 'delete', '*'), {
      minLength: 1,
    }),
    subresources: fc.array(fc.constantFrom('status', 'data', 'keys')),
    users: fc.array(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/)),
    teams: fc.array(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/)),
  },
  { requiredKeys: ['verbs'] },
);

describe('desiredRbac properties', () => {
  test('deterministic, and depends only on name, namespace, uid and spec.access', () => {
    fc.assert(
      fc.property(nameArb, fc.array(ruleArb, { maxLength: 6 }), fc.string(), (name, access, noise) => {
        const a = secret(access, name);
        const b: SharedSecret = {
          ...secret(structuredClone(access), name),
          metadata: { ...a.metadata, resourceVersion: noise, labels: { noise } },
          spec: { ...a.spec, displayName: noise, data: { other: 'eA==' } },
          status: { dataKeys: [noise] },
        };
        expect(desiredRbac(b)).toEqual(desiredRbac(a));
      }),
    );
  });

  test('names are DNS labels of at most 63 characters and never collide across secrets or rules', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(nameArb, { minLength: 1, maxLength: 5 }),
        fc.array(ruleArb, { maxLength: 6 }),
        (names, access) => {
          const seen = new Map<string, string>();
          for (const name of names) {
            desiredRbac(secret(access, name)).roles.forEach((role, ruleIndex) => {
              const objectName = role.metadata!.name!;
              expect(objectName.length).toBeLessThanOrEqual(63);
              expect(objectName).toMatch(DNS_LABEL);
              // Every (secret, rule) pair must own its name alone.
              const owner = `${name}#${ruleIndex}`;
              expect(seen.get(objectName) ?? owner).toBe(owner);
              seen.set(objectName, owner);
            });
          }
        },
      ),
    );
  });
});
