import { describe, expect, test } from 'vitest';
import type { Team, User } from '../../api/identity.ts';
import { membershipLag } from './reconcile.ts';

const team = (users: string[]): Team => ({
  apiVersion: 'management.platform/v1',
  kind: 'Team',
  metadata: { name: 'ops' },
  spec: { users },
});
const user = (name: string, teams?: string[]): User => ({
  apiVersion: 'management.platform/v1',
  kind: 'User',
  metadata: { name },
  spec: {},
  ...(teams ? { status: { teams } } : {}),
});
const lookup = (users: User[]) => (name: string) => users.find((u) => u.metadata.name === name);
const listing = (users: User[], teamName: string) =>
  users.filter((u) => u.status?.teams?.includes(teamName) === true);

describe('membershipLag', () => {
  test('in effect: every listed user that exists names the team, nobody else does', () => {
    const users = [user('alice', ['ops']), user('bob', ['dev', 'ops']), user('carol', ['dev'])];
    expect(membershipLag(team(['alice', 'bob', 'dave']), lookup(users), listing(users, 'ops'))).toEqual({
      joining: [],
      leaving: [],
    });
  });

  test('a member whose status does not name the team yet is joining', () => {
    const users = [user('bob'), user('alice', ['dev'])];
    expect(membershipLag(team(['bob', 'alice']), lookup(users), listing(users, 'ops'))).toEqual({
      joining: ['alice', 'bob'],
      leaving: [],
    });
  });

  test('a user still naming a team that no longer lists it is leaving', () => {
    const users = [user('alice', ['ops']), user('eve', ['ops'])];
    expect(membershipLag(team(['alice']), lookup(users), listing(users, 'ops'))).toEqual({
      joining: [],
      leaving: ['eve'],
    });
  });

  test('members named like Object.prototype properties are users like any other', () => {
    const users = [user('constructor'), user('__proto__', ['ops']), user('toString', ['ops'])];
    expect(
      membershipLag(team(['constructor', '__proto__', 'valueOf']), lookup(users), listing(users, 'ops')),
    ).toEqual({ joining: ['constructor'], leaving: ['toString'] });
  });
});
