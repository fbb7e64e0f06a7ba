import fc from 'fast-check';
import { describe, expect, it, test } from 'vitest';
import type { Team, User } from '../api/identity.ts';
import type { Project, ProjectMember } from '../api/project.ts';
import { isProjectMember, projectMembers } from './members.ts';

const user = (name: string, spec: Partial<User['spec']> = {}, teams: string[] = []): User =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'User',
    metadata: { name },
    spec,
    status: { teams },
  }) as User;
const team = (name: string, spec: Partial<Team['spec']> = {}): Team =>
  ({ apiVersion: 'management.platform/v1', kind: 'Team', metadata: { name }, spec }) as Team;
const project = (members: ProjectMember[], owner?: Project['spec']['owner']): Project =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'Project',
    metadata: { name: 'p' },
    spec: { members, owner },
  }) as Project;
const member = (kind: 'User' | 'Team', name: string): ProjectMember => ({
  kind,
  name,
  clusterRole: 'project-user',
});

const users = [
  user('zoe', {
    displayName: 'Zoe',
    email: 'zoe@example.com',
    icon: 'https://i/zoe',
    username: 'zoe',
    subject: 'sub-zoe',
  }),
  user('amy'),
  user('bob', {}, ['devs']),
  user('root', { clusterRoles: [{ name: 'platform-admin' }] }),
  user('ops-admin', {}, ['ops']),
];
const teams = [
  team('devs', { displayName: 'Developers', username: 'devs', users: ['bob', 'amy'] }),
  team('ops', { users: ['ops-admin'], clusterRoles: [{ name: 'platform-admin' }] }),
  team('empty'),
];
const names = (list: { info: { name: string } }[] | undefined) =>
  (list ?? []).map((entry) => entry.info.name);

describe('projectMembers', () => {
  it.each<[string, Project, string[], string[]]>([
    ['direct users', project([member('User', 'zoe'), member('User', 'amy')]), ['amy', 'zoe'], []],
    ['teams and their users', project([member('Team', 'devs')]), ['amy', 'bob'], ['devs']],
    ['owner user', project([], { user: 'zoe' }), ['zoe'], []],
    ['owner team and its users', project([], { team: 'devs' }), ['amy', 'bob'], ['devs']],
    ['* is every non-admin user', project([member('User', '*')]), ['amy', 'bob', 'zoe'], []],
    ['admins excluded when listed', project([member('User', 'root'), member('User', 'ops-admin')]), [], []],
    ['admin teams excluded', project([member('Team', 'ops')]), [], []],
    ['unknown names left out', project([member('User', 'ghost'), member('Team', 'phantom')]), [], []],
    [
      'no duplicates',
      project([member('User', 'bob'), member('Team', 'devs'), member('User', 'bob')], { user: 'bob' }),
      ['amy', 'bob'],
      ['devs'],
    ],
    ['empty team listed, adds no users', project([member('Team', 'empty')]), [], ['empty']],
  ])('%s', (_case, p, expectedUsers, expectedTeams) => {
    const result = projectMembers(p, users, teams);
    expect(names(result.users)).toEqual(expectedUsers);
    expect(names(result.teams)).toEqual(expectedTeams);
  });

  it('fills user info and gives teams no email, icon or subject', () => {
    const result = projectMembers(project([member('User', 'zoe'), member('Team', 'devs')]), users, teams);
    expect(result.users?.find((u) => u.info.name === 'zoe')).toEqual({
      info: {
        name: 'zoe',
        displayName: 'Zoe',
        icon: 'https://i/zoe',
        username: 'zoe',
        email: 'zoe@example.com',
        subject: 'sub-zoe',
      },
    });
    expect(result.teams).toEqual([{ info: { name: 'devs', displayName: 'Developers', username: 'devs' } }]);
  });

  it('is sorted, duplicate-free and independent of input order', () => {
    const memberArb = fc.record({
      kind: fc.constantFrom('User' as const, 'Team' as const),
      name: fc.constantFrom('zoe', 'amy', 'bob', 'root', 'devs', 'ops', 'empty', '*'),
      clusterRole: fc.constant('r'),
    });
    fc.assert(
      fc.property(fc.array(memberArb, { maxLength: 6 }), (members) => {
        const a = projectMembers(project(members), users, teams);
        const b = projectMembers(project([...members].reverse()), [...users].reverse(), [...teams].reverse());
        expect(b).toEqual(a);
        for (const list of [names(a.users), names(a.teams)]) {
          expect(list).toEqual([...new Set(list)].sort());
        }
        expect(names(a.users)).not.toContain('root');
      }),
    );
  });
});

describe('isProjectMember', () => {
  const project = {
    metadata: { name: 'web' },
    spec: {
      owner: { user: 'olga' },
      members: [
        { kind: 'User', name: 'ursula', clusterRole: 'viewer' },
        { kind: 'Team', name: 'devs', clusterRole: 'editor' },
      ],
    },
  } as unknown as Project;
  const user = (name: string, groups: string[] = []) => ({ kind: 'User' as const, name, groups });
  test('the owner, listed users, members of listed teams and the team itself are members', () => {
    expect(isProjectMember(project, user('olga'))).toBe(true);
    expect(isProjectMember(project, user('ursula'))).toBe(true);
    expect(isProjectMember(project, user('dora', ['platform:team:devs']))).toBe(true);
    expect(isProjectMember(project, { kind: 'Team', name: 'devs', groups: [] })).toBe(true);
  });
  test('anyone else is not; `*` makes every user a member; a bare subject never is', () => {
    expect(isProjectMember(project, user('mallory', ['platform:team:ops']))).toBe(false);
    expect(isProjectMember(project, { kind: 'Team', name: 'ops', groups: [] })).toBe(false);
    const open = {
      ...project,
      spec: { members: [{ kind: 'User', name: '*', clusterRole: 'viewer' }] },
    } as unknown as Project;
    expect(isProjectMember(open, user('mallory'))).toBe(true);
    expect(isProjectMember(open, { kind: 'Subject', name: 'mallory', groups: [] })).toBe(false);
  });
});
