import { describe, expect, it } from 'vitest';
import { AuthSchema } from '../api/config-auth.ts';
import type { Team, User } from '../api/identity.ts';
import type { Project } from '../api/project.ts';
import type { ExternalIdentity } from './identity.ts';
import {
  AccountNotRecorded,
  AnotherAccount,
  filterGroups,
  keyIdentity,
  LOGIN_CONNECTOR_ANNOTATION,
  membershipChange,
  planUser,
  teamsNamedByProjects,
  teamsToCreate,
  UnknownUser,
  UserBoundElsewhere,
  UserDisabledAtLogin,
  UserNotBound,
} from './outcome.ts';

const auth = (fields: Record<string, unknown> = {}) => AuthSchema.parse(fields);
const identity: ExternalIdentity = {
  connector: 'corp',
  userId: 'sub-1',
  username: 'Alice',
  preferredUsername: 'Alice A.',
  email: 'alice@example.com',
  groups: ['dev', 'ops', 'dev'],
  connectorData: '{"refreshToken":"r"}',
};
const user = (spec: User['spec'], annotations?: Record<string, string>): User => ({
  apiVersion: 'management.platform/v1',
  kind: 'User',
  metadata: { name: 'alice-x', ...(annotations ? { annotations } : {}) },
  spec,
});

describe('what a login does', () => {
  const bound = { ssoIdentity: { connector: 'corp', userId: 'sub-1' } };

  it('creates the user on first sign-in, bound to the connector and the subject, with its filtered groups', () => {
    const plan = planUser(identity, auth({ groupsFilters: ['^de'] }), undefined);
    expect(plan.create?.metadata.name).toBe(plan.name);
    expect(plan.name).toMatch(/^alice-[0-9a-f]{32}$/);
    expect(plan.create?.metadata.annotations).toBeUndefined();
    expect(plan.create?.spec).toEqual({
      username: 'Alice',
      subject: 'Alice',
      displayName: 'Alice A.',
      email: 'alice@example.com',
      ssoIdentity: { connector: 'corp', userId: 'sub-1' },
      groups: ['dev'],
    });
  });

  it('refuses an unknown user with disableUserCreation, a disabled one, and one bound to another connector', () => {
    expect(() => planUser(identity, auth({ disableUserCreation: true }), undefined)).toThrow(UnknownUser);
    expect(() => planUser(identity, auth(), user({ ...bound, disabled: true }))).toThrow(UserDisabledAtLogin);
    expect(() =>
      planUser(identity, auth(), user({ ssoIdentity: { connector: 'other', userId: 'sub-1' } })),
    ).toThrow(UserBoundElsewhere);
    expect(() => planUser(identity, auth(), user({}, { [LOGIN_CONNECTOR_ANNOTATION]: 'other' }))).toThrow(
      UserBoundElsewhere,
    );
  });

  it("refuses another subject whatever the username, at sign-in and at refresh (issue 32's takeover)", () => {
    const victim = user({ ...bound, groups: ['admins'] });
    const impostor = { ...identity, userId: 'sub-2' };
    expect(() => planUser(impostor, auth(), victim)).toThrow(AnotherAccount);
    expect(() => planUser(impostor, auth(), victim, 'refresh')).toThrow(AnotherAccount);
    expect(planUser(identity, auth(), victim).name).toBe(planUser(impostor, auth(), undefined).name);
  });

  it('refuses a sign-in to a user bound by the legacy annotation only, and refreshes its keys', () => {
    const legacy = user({ groups: ['old'] }, { [LOGIN_CONNECTOR_ANNOTATION]: 'corp' });
    expect(() => planUser(identity, auth(), legacy)).toThrow(AccountNotRecorded);
    expect(planUser(identity, auth(), legacy, 'refresh').update).toEqual({
      spec: { groups: ['dev', 'ops'], email: 'alice@example.com' },
    });
  });

  it('never takes over an unbound user (an admin binds it), and updates groups and email of a bound one', () => {
    expect(() => planUser(identity, auth({ disableUserCreation: true }), user({ groups: ['old'] }))).toThrow(
      UserNotBound,
    );
    expect(() => planUser(identity, auth(), user({ groups: ['old'] }), 'refresh')).toThrow(UserNotBound);
    const plan = planUser(identity, auth({ disableUserCreation: true }), user({ ...bound, groups: ['old'] }));
    expect(plan.update).toEqual({
      spec: { groups: ['dev', 'ops'], email: 'alice@example.com' },
    });
    const same = user({ ...bound, groups: ['dev', 'ops'], email: 'alice@example.com' });
    expect(planUser(identity, auth(), same).update).toBeUndefined();
  });

  it('filters groups with any matching expression', () => {
    expect(filterGroups(['a-dev', 'b-ops', 'c'], ['dev$', '^b'])).toEqual(['a-dev', 'b-ops']);
    expect(filterGroups(['b', 'a', 'b'], undefined)).toEqual(['a', 'b']);
  });

  it('creates teams for new groups unless disableTeamCreation', () => {
    const teams = teamsToCreate(['dev', 'Ops Team'], auth(), new Set(['dev']));
    expect(teams.map((t) => [t.metadata.name, t.spec.groups])).toEqual([
      [expect.stringMatching(/^ops-team-/), ['Ops Team']],
    ]);
    expect(teamsToCreate(['x'], auth({ disableTeamCreation: true }), new Set())).toEqual([]);
  });

  it('never creates a team a project names (as member or owner)', () => {
    const project = (spec: Project['spec']): Project => ({
      apiVersion: 'management.platform/v1',
      kind: 'Project',
      metadata: { name: 'p' },
      spec,
    });
    const reserved = teamsNamedByProjects([
      project({ members: [{ kind: 'Team', name: 'platform-ops', clusterRole: 'admin' }] }),
      project({
        owner: { team: 'owners' },
        members: [{ kind: 'User', name: 'dev', clusterRole: 'view' }],
      }),
    ]);
    expect([...reserved].sort()).toEqual(['owners', 'platform-ops']);
    const teams = teamsToCreate(['platform-ops', 'owners', 'dev'], auth(), new Set(), reserved);
    expect(teams.map((team) => team.metadata.name)).toEqual(['dev']);
  });

  it('joins teams of its groups and leaves them when the group is gone, never others', () => {
    const team = (groups: string[], users: string[]): Team => ({
      apiVersion: 'management.platform/v1',
      kind: 'Team',
      metadata: { name: 't' },
      spec: { groups, users },
    });
    expect(membershipChange(team(['dev'], ['bob']), 'alice', ['dev'], [])).toEqual(['bob', 'alice']);
    expect(membershipChange(team(['dev'], ['alice']), 'alice', ['dev'], ['dev'])).toBeUndefined();
    expect(membershipChange(team(['dev'], ['alice', 'bob']), 'alice', [], ['dev'])).toEqual(['bob']);
    expect(membershipChange(team(['dev'], ['alice']), 'alice', [], [])).toBeUndefined();
    expect(membershipChange(team([], ['alice']), 'alice', [], ['dev'])).toBeUndefined();
  });

  it('puts what the connector returned on the key', () => {
    expect(keyIdentity(identity)).toEqual({
      userId: 'sub-1',
      username: 'Alice',
      preferredUsername: 'Alice A.',
      email: 'alice@example.com',
      groups: ['dev', 'ops', 'dev'],
      connector: 'corp',
      connectorData: '{"refreshToken":"r"}',
    });
  });
});
