import { describe, expect, it } from 'vitest';
import { AuthSchema } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import type { ExternalIdentity } from './identity.ts';
import {
  filterGroups,
  keyIdentity,
  LOGIN_CONNECTOR_ANNOTATION,
  membershipChange,
  planUser,
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
  it('creates the user on first sign-in, bound to the connector, with its filtered groups', () => {
    const plan = planUser(identity, auth({ groupsFilters: ['^de'] }), undefined);
    expect(plan.create?.metadata.name).toBe(plan.name);
    expect(plan.name).toMatch(/^alice-[0-9a-f]{8}$/);
    expect(plan.create?.metadata.annotations).toEqual({ [LOGIN_CONNECTOR_ANNOTATION]: 'corp' });
    expect(plan.create?.spec).toEqual({
      username: 'Alice',
      subject: 'Alice',
      displayName: 'Alice A.',
      email: 'alice@example.com',
      groups: ['dev'],
    });
  });

  it('refuses an unknown user with disableUserCreation, a disabled one, and one bound to another connector', () => {
    expect(() => planUser(identity, auth({ disableUserCreation: true }), undefined)).toThrow(UnknownUser);
    expect(() => planUser(identity, auth(), user({ disabled: true }))).toThrow(UserDisabledAtLogin);
    expect(() => planUser(identity, auth(), user({}, { [LOGIN_CONNECTOR_ANNOTATION]: 'other' }))).toThrow(
      UserBoundElsewhere,
    );
  });

  it('never takes over an unbound user (an admin binds it), and updates groups and email of a bound one', () => {
    expect(() => planUser(identity, auth({ disableUserCreation: true }), user({ groups: ['old'] }))).toThrow(
      UserNotBound,
    );
    const plan = planUser(
      identity,
      auth({ disableUserCreation: true }),
      user({ groups: ['old'] }, { [LOGIN_CONNECTOR_ANNOTATION]: 'corp' }),
    );
    expect(plan.update).toEqual({
      spec: { groups: ['dev', 'ops'], email: 'alice@example.com' },
    });
    const same = user(
      { groups: ['dev', 'ops'], email: 'alice@example.com' },
      { [LOGIN_CONNECTOR_ANNOTATION]: 'corp' },
    );
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
