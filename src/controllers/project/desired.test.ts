import { describe, expect, test } from 'vitest';
import type { Project } from '../../api/project.ts';
import {
  desiredProjectChildren,
  desiredProjectQuota,
  memberBindingName,
  namespaceBelongsTo,
  PROJECT_ADMIN_CLUSTER_ROLE,
  PROJECT_QUOTA_NAME,
  quotaCondition,
} from './desired.ts';

const project = (spec: Project['spec'], status?: Project['status']): Project => ({
  apiVersion: 'management.platform/v1',
  kind: 'Project',
  metadata: { name: 'shop', uid: 'uid-1' },
  spec,
  status,
});

const bindings = (p: Project) =>
  Object.fromEntries(
    desiredProjectChildren(p, 'p-shop').roleBindings.map((b) => [
      b.roleRef.name,
      b.subjects?.map((s) => `${s.kind}:${s.name}`),
    ]),
  );

describe('desiredProjectChildren', () => {
  test.each([
    ['no members, no owner: no bindings', project({}), {}],
    [
      'a user member binds its user group',
      project({ members: [{ kind: 'User', name: 'alice', clusterRole: 'platform-project-user' }] }),
      { 'platform-project-user': ['Group:platform:user:alice'] },
    ],
    [
      'a team member binds its team group',
      project({ members: [{ kind: 'Team', name: 'ops', clusterRole: 'platform-project-viewer' }] }),
      { 'platform-project-viewer': ['Group:platform:team:ops'] },
    ],
    [
      '`*` binds every authenticated identity',
      project({ members: [{ kind: 'User', name: '*', clusterRole: 'platform-project-viewer' }] }),
      { 'platform-project-viewer': ['Group:platform:authenticated'] },
    ],
    [
      'the owner (user and team) gets the project admin role, merged with admin members',
      project({
        owner: { user: 'bob', team: 'leads' },
        members: [{ kind: 'User', name: 'carol', clusterRole: PROJECT_ADMIN_CLUSTER_ROLE }],
      }),
      {
        [PROJECT_ADMIN_CLUSTER_ROLE]: [
          'Group:platform:team:leads',
          'Group:platform:user:bob',
          'Group:platform:user:carol',
        ],
      },
    ],
    [
      'members of one role share one binding, each subject once, sorted',
      project({
        members: [
          { kind: 'User', name: 'zed', clusterRole: 'r' },
          { kind: 'User', name: 'amy', clusterRole: 'r' },
          { kind: 'User', name: 'amy', clusterRole: 'r' },
          { kind: 'Team', name: 'ops', clusterRole: 's' },
        ],
      }),
      { r: ['Group:platform:user:amy', 'Group:platform:user:zed'], s: ['Group:platform:team:ops'] },
    ],
  ])('%s', (_name, input, expected) => {
    expect(bindings(input)).toEqual(expected);
  });

  test('labels and owns the namespace and every binding; bindings are named after their role', () => {
    const children = desiredProjectChildren(
      project({ members: [{ kind: 'User', name: 'a', clusterRole: 'platform-project-user' }] }),
      'p-shop',
    );
    const owner = [
      {
        apiVersion: 'management.platform/v1',
        kind: 'Project',
        name: 'shop',
        uid: 'uid-1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    expect(children.namespace.metadata).toMatchObject({
      name: 'p-shop',
      labels: { 'management.platform/project': 'shop' },
      ownerReferences: owner,
    });
    const [binding] = children.roleBindings;
    expect(binding?.metadata).toMatchObject({
      name: memberBindingName('platform-project-user'),
      namespace: 'p-shop',
      ownerReferences: owner,
    });
    expect(binding?.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'platform-project-user',
    });
    expect(namespaceBelongsTo(children.namespace, project({}))).toBe(true);
    expect(namespaceBelongsTo({ metadata: { name: 'p-shop' } }, project({}))).toBe(false);
  });

  test('binding names are valid DNS labels and distinct per role', () => {
    const long = 'x'.repeat(200);
    expect(memberBindingName(long)).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    expect(memberBindingName('Role:With.Odd_Chars')).toMatch(/^[a-z0-9-]+$/);
    expect(memberBindingName(`${long}a`)).not.toBe(memberBindingName(`${long}b`));
  });
});

describe('desiredProjectQuota', () => {
  test('no quotas, no ResourceQuota', () => {
    expect(desiredProjectQuota(project({}), 'p-shop')).toBeUndefined();
    expect(desiredProjectQuota(project({ quotas: {} }), 'p-shop')).toBeUndefined();
    expect(desiredProjectChildren(project({}), 'p-shop')).not.toHaveProperty('quota');
  });

  test.each([0, 3])('a limit of %i instances is a count quota owned by the project', (limit) => {
    const quota = desiredProjectQuota(project({ quotas: { virtualClusterInstances: limit } }), 'p-shop');
    expect(quota).toEqual({
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: {
        name: PROJECT_QUOTA_NAME,
        namespace: 'p-shop',
        labels: { 'management.platform/project': 'shop', 'app.kubernetes.io/managed-by': 'cluster-platform' },
        ownerReferences: [
          {
            apiVersion: 'management.platform/v1',
            kind: 'Project',
            name: 'shop',
            uid: 'uid-1',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { hard: { 'count/virtualclusterinstances.management.platform': String(limit) } },
    });
    expect(
      desiredProjectChildren(project({ quotas: { virtualClusterInstances: limit } }), 'p-shop').quota,
    ).toEqual(quota);
  });
});

describe('quotaCondition', () => {
  const limited = project({ quotas: { virtualClusterInstances: 3 } });
  const quota = (status: object) => ({ ...desiredProjectQuota(limited, 'p-shop')!, status });
  const COUNT = 'count/virtualclusterinstances.management.platform';

  test('none without a quota', () => {
    expect(quotaCondition(project({}), 'p-shop', undefined)).toBeUndefined();
  });

  test.each([
    ['not there yet', undefined],
    ['not counted (no status)', quota({})],
    ['an older limit counted', quota({ hard: { [COUNT]: '5' }, used: { [COUNT]: '1' } })],
    ['the limit taken up, nothing counted', quota({ hard: { [COUNT]: '3' } })],
  ])('Unknown while the quota is %s', (_what, current) => {
    expect(quotaCondition(limited, 'p-shop', current)).toMatchObject({
      status: 'Unknown',
      reason: 'NotCounted',
    });
  });

  test('True once the current limit is counted', () => {
    expect(
      quotaCondition(limited, 'p-shop', quota({ hard: { [COUNT]: '3' }, used: { [COUNT]: '0' } })),
    ).toMatchObject({ type: 'QuotaEnforced', status: 'True', reason: 'Enforced' });
  });
});
