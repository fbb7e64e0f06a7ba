import { describe, expect, it } from 'vitest';
import { principalGroups } from './cluster-manager.ts';
import { hostedGitGroups, type TeamMembership } from './hosted-git.ts';
import { NotInAllowedGroups, requireGroups } from './identity.ts';
import { checkHostedDomain, HostedDomainRefused, hostedDomainHint } from './idp-a.ts';
import { nextLink } from './provider-http.ts';
import { connectorDataOf, readConnectorData } from './sso.ts';

const teams: TeamMembership[] = [
  { org: 'Acme', name: 'Blue Team', slug: 'blue-team' },
  { org: 'acme', name: 'Red', slug: 'red' },
  { org: 'other', name: 'Ops', slug: 'ops' },
];

describe('code-hosting organizations and teams', () => {
  const member =
    (...orgs: string[]) =>
    (org: string) =>
      orgs.includes(org.toLowerCase());

  it('without orgs, gives every team as <org>:<team>', () => {
    expect(hostedGitGroups(undefined, member(), teams)).toEqual(['Acme:Blue Team', 'acme:Red', 'other:Ops']);
  });

  it('with an org without teams, admits any member and keeps the teams of that org only', () => {
    expect(hostedGitGroups([{ name: 'ACME' }], member('acme'), teams)).toEqual([
      'ACME:Blue Team',
      'ACME:Red',
    ]);
    // A member of a listed organization with no team at all is still admitted.
    expect(hostedGitGroups([{ name: 'acme' }], member('acme'), [])).toEqual([]);
  });

  it('with teams, admits only members of one of them (by name or slug) and keeps those', () => {
    expect(hostedGitGroups([{ name: 'acme', teams: ['blue-team'] }], member('acme'), teams)).toEqual([
      'acme:Blue Team',
    ]);
    expect(() => hostedGitGroups([{ name: 'acme', teams: ['Green'] }], member('acme'), teams)).toThrow(
      NotInAllowedGroups,
    );
  });

  it('refuses a user who is a member of no listed organization, whatever its teams', () => {
    expect(() => hostedGitGroups([{ name: 'acme' }], member('other'), teams)).toThrow(NotInAllowedGroups);
    // Teams alone do not make a member: the membership answer decides.
    expect(() => hostedGitGroups([{ name: 'other' }], member(), teams)).toThrow(NotInAllowedGroups);
  });

  it('admits through any listed organization and adds the groups of each', () => {
    expect(
      hostedGitGroups(
        [{ name: 'acme', teams: ['Green'] }, { name: 'other' }],
        member('acme', 'other'),
        teams,
      ),
    ).toEqual(['other:Ops']);
  });
});

describe('required groups', () => {
  it('lets everything through without a requirement', () => {
    expect(requireGroups(['a', 'b'], undefined, true)).toEqual(['a', 'b']);
    expect(requireGroups(['a', 'b'], [], true)).toEqual(['a', 'b']);
  });

  it('refuses a user in none, and keeps all or only the required ones', () => {
    expect(() => requireGroups(['a'], ['x'], false)).toThrow(NotInAllowedGroups);
    expect(() => requireGroups([], ['x'], true)).toThrow(NotInAllowedGroups);
    expect(requireGroups(['a', 'x'], ['x', 'y'], false)).toEqual(['a', 'x']);
    expect(requireGroups(['a', 'x'], ['x', 'y'], true)).toEqual(['x']);
  });
});

describe('web-identity hosted domains', () => {
  it('hints the domain, or * for several', () => {
    expect(hostedDomainHint(undefined)).toEqual({});
    expect(hostedDomainHint(['example.com'])).toEqual({ hd: 'example.com' });
    expect(hostedDomainHint(['a.example', 'b.example'])).toEqual({ hd: '*' });
  });

  it('checks the hd claim, not the email domain', () => {
    expect(() => checkHostedDomain({ email: 'eve@example.com' }, ['example.com'])).toThrow(
      HostedDomainRefused,
    );
    expect(() => checkHostedDomain({ hd: 'evil.example' }, ['example.com'])).toThrow(HostedDomainRefused);
    expect(() => checkHostedDomain({ hd: 'example.com' }, ['example.com'])).not.toThrow();
    expect(() => checkHostedDomain({}, [])).not.toThrow();
  });
});

describe('cluster-manager principals', () => {
  it("keeps the caller's group principals it is a member of", () => {
    expect(
      principalGroups([
        { principalType: 'user', name: 'Alice', memberOf: false },
        { principalType: 'group', name: 'Developers', memberOf: true },
        { principalType: 'group', loginName: 'ops', memberOf: true },
        { principalType: 'group', name: 'Searched but not mine', memberOf: false },
        { principalType: 'group', name: 'Developers', memberOf: true },
      ]),
    ).toEqual(['Developers', 'ops']);
  });
});

describe('provider plumbing', () => {
  it('follows Link rel="next"', () => {
    expect(
      nextLink(
        '<https://api.example/user/teams?page=2>; rel="next", <https://api.example/user/teams?page=5>; rel="last"',
      ),
    ).toBe('https://api.example/user/teams?page=2');
    expect(nextLink('<https://api.example/x?page=1>; rel="prev"')).toBeUndefined();
    expect(nextLink(null)).toBeUndefined();
  });

  it('keeps connectorData as JSON and reads only what it knows', () => {
    expect(connectorDataOf({})).toBeUndefined();
    const data = connectorDataOf({ refreshToken: 'r' });
    expect(readConnectorData({ connectorData: data })).toEqual({ refreshToken: 'r' });
    const withIdToken = connectorDataOf({ refreshToken: 'r', idToken: 'i' });
    expect(readConnectorData({ connectorData: withIdToken })).toEqual({ refreshToken: 'r', idToken: 'i' });
    expect(connectorDataOf({ idToken: 'i' })).toBeDefined();
    expect(readConnectorData({ connectorData: '{"accessToken":1,"other":"x"}' })).toEqual({});
    expect(readConnectorData({ connectorData: 'not json' })).toEqual({});
  });
});
