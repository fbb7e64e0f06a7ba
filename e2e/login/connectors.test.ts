import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/api/config.ts';
import { ProviderLoginFailed } from '../../src/login/code-flow.ts';
import { userNameFor } from '../../src/login/outcome.ts';
import { ConnectorRegistry } from '../../src/login/registry.ts';
import { uniqueName } from '../support/cluster.ts';
import { ScriptedAgent } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import {
  browserFor,
  clientLines,
  configureClusterManager,
  configureHostedGit,
  postClusterManagerKey,
  signIn as signInThrough,
  standIns,
  storedUser,
} from './support/sign-in.ts';
import { viaUrl } from './support/sso.ts';

/**
 * Signing in through the hosted providers, end to end through the platform's login endpoints:
 * the login redirect, the provider's sign-in, the callback, the User and Teams the sign-in
 * makes, and a Login key that works through the gateway. The providers cannot be reached from a
 * test, so local servers answer as their documentation says (`support/provider-stand-ins.ts`
 * names each); the platform's connectors are pointed at them by their addresses only.
 */

const env = useLoginEnv({ providers: true });

const providers = () => standIns(env());
const signIn = (id: string, username: string) => signInThrough(env(), id, username);
const userOf = (username: string) => storedUser(env(), username);

async function expectWorkingKey(key: string | undefined, user: string) {
  expect(key).toMatch(/^pak_/);
  const own = await env().use(key as string, '/ownedaccesskeys');
  expect(own.status).toBe(200);
  const [stored] = await env().loginKeys(userNameFor(user));
  expect(stored?.spec.type).toBe('Login');
  return stored;
}

describe('code hosting with organizations and teams (hostedGit)', () => {
  it('admits an active member of a listed team, with <org>:<team> groups, and refuses the rest', async () => {
    const { hostedGit } = providers();
    const alice = uniqueName('alice');
    hostedGit.accounts.set(alice, {
      id: 101,
      name: 'Alice A.',
      email: null,
      emails: [
        { email: `${alice}@old.example`, primary: false, verified: true },
        { email: `${alice}@example.com`, primary: true, verified: true },
      ],
      orgs: { Acme: 'active', Other: 'active' },
      teams: [
        { org: 'Acme', name: 'Blue Team', slug: 'blue-team' },
        { org: 'Acme', name: 'Red', slug: 'red' },
        { org: 'Other', name: 'Ops', slug: 'ops' },
      ],
    });
    const bob = uniqueName('bob');
    // Invited to the team's organization but not yet a member: not admitted.
    hostedGit.accounts.set(bob, {
      id: 102,
      orgs: { acme: 'pending' },
      teams: [{ org: 'acme', name: 'Blue Team', slug: 'blue-team' }],
    });
    await configureHostedGit(
      env(),
      `    orgs:
      - name: acme
        teams: [blue-team]`,
    );
    const page = await signIn('hostedGit', alice);
    expect(page.status, page.text).toBe(200);
    expect(page.authorizeUrl.searchParams.get('scope')).toBe('user:email read:org');
    expect(page.authorizeUrl.searchParams.get('code_challenge_method')).toBe('S256');
    const stored = await expectWorkingKey(page.key, alice);
    expect(stored?.spec.identity).toMatchObject({
      connector: 'hostedGit',
      userId: '101',
      username: alice,
      preferredUsername: 'Alice A.',
      email: `${alice}@example.com`,
      groups: ['acme:Blue Team'],
    });
    expect((await userOf(alice))?.spec.groups).toEqual(['acme:Blue Team']);
    expect(hostedGit.calls).toContain('GET /user/memberships/orgs/acme');

    const refused = await signIn('hostedGit', bob);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('not a member of any group allowed');
    expect(refused.key).toBeUndefined();
    expect(await userOf(bob)).toBeUndefined();
  });

  it('signs in through the enterprise edition at hostName, trusting it through rootCA only', async () => {
    const { hostedGit } = providers();
    const carol = uniqueName('carol');
    hostedGit.accounts.set(carol, {
      id: 103,
      email: `${carol}@corp.example`,
      teams: [{ org: 'corp', name: 'Platform', slug: 'platform' }],
    });
    const rootCA = join(tmpdir(), `${uniqueName('root-ca')}.pem`);
    writeFileSync(rootCA, hostedGit.caPem);
    const configFor = (withRoot: boolean) =>
      parseConfig(`
auth:
  connectors:
    - id: hosted-git-enterprise
      displayName: Corp code
      hostedGit:
${clientLines(env(), 'hosted-git-enterprise', hostedGit, '        ')}
        hostName: ${hostedGit.host}
${withRoot ? `        rootCA: ${rootCA}` : ''}
`).auth;
    // The public addresses (no stand-in CA): only hostName and rootCA lead to the server.
    const registry = new ConnectorRegistry();
    const connector = registry.connectorFor(
      registry.method(configFor(true), 'hosted-git-enterprise') as never,
    );
    const started = await connector.start();
    if (!('redirect' in started)) throw new Error('expected a redirect');
    expect(started.redirect.origin).toBe(hostedGit.url);
    const agent = new ScriptedAgent([hostedGit.caPem]);
    const callback = await agent.followUntil(
      started.redirect.toString(),
      `${env().platformUrl}/auth/hosted-git-enterprise/callback`,
      { path: /authorize$/, fields: { username: carol } },
    );
    const identity = await connector.finish(viaUrl(callback), started.transaction);
    // Without orgs, every team of the user is a group.
    expect(identity).toMatchObject({ userId: '103', username: carol, groups: ['corp:Platform'] });
    const minted = await env().service.ssoLogin(identity);
    expect((await env().use(minted.key, '/ownedaccesskeys')).status).toBe(200);

    const untrusted = new ConnectorRegistry().connectorFor(
      new ConnectorRegistry().method(configFor(false), 'hosted-git-enterprise') as never,
    );
    await expect(untrusted.start()).resolves.toBeDefined();
    const again = await connector.start();
    if (!('redirect' in again)) throw new Error('expected a redirect');
    const back = await agent.followUntil(
      again.redirect.toString(),
      `${env().platformUrl}/auth/hosted-git-enterprise/callback`,
      { path: /authorize$/, fields: { username: carol } },
    );
    // The code is redeemed over TLS the connector must verify: without rootCA it cannot.
    await expect(untrusted.finish(viaUrl(back), again.transaction)).rejects.toBeInstanceOf(
      ProviderLoginFailed,
    );
  });
});

describe('code hosting with groups (hostedGitGroups)', () => {
  it('whitelists groups read from UserInfo, and refuses a user in none of them', async () => {
    const { hostedGitGroups } = providers();
    const dana = uniqueName('dana');
    hostedGitGroups.accounts.set(dana, {
      claims: {
        nickname: dana,
        preferred_username: dana,
        name: 'Dana D.',
        email: `${dana}@example.com`,
        email_verified: true,
        groups: ['dev/platform', 'dev', 'marketing'],
      },
    });
    const erin = uniqueName('erin');
    hostedGitGroups.accounts.set(erin, { claims: { nickname: erin, groups: ['marketing'] } });
    await env().configure(`
auth:
  hostedGitGroups:
${clientLines(env(), 'hostedGitGroups', hostedGitGroups)}
    baseURL: ${hostedGitGroups.issuer}
    groups: [dev/platform, ops]
`);
    const page = await signIn('hostedGitGroups', dana);
    expect(page.status, page.text).toBe(200);
    const stored = await expectWorkingKey(page.key, dana);
    expect(stored?.spec.identity).toMatchObject({
      connector: 'hostedGitGroups',
      userId: dana,
      username: dana,
      preferredUsername: 'Dana D.',
      email: `${dana}@example.com`,
      emailVerified: true,
      groups: ['dev/platform'],
    });
    const refused = await signIn('hostedGitGroups', erin);
    expect(refused.status).toBe(403);
    expect(refused.key).toBeUndefined();
    expect(await userOf(erin)).toBeUndefined();
  });
});

describe('web identity (idpA)', () => {
  function configure(extra = '') {
    const { idpA, idpADirectory } = providers();
    return env().configure(`
auth:
  idpA:
${clientLines(env(), 'idpA', idpA)}
    hostedDomains: [example.com]
    serviceAccountFilePath: ${idpADirectory.serviceAccountFile}
    adminEmail: ${idpADirectory.adminEmail}
${extra}
`);
  }

  it('admits a verified user of a hosted domain, with the groups the directory lists', async () => {
    const { idpA, idpADirectory } = providers();
    const frank = uniqueName('frank');
    const email = `${frank}@example.com`;
    idpA.accounts.set(frank, {
      claims: { email, email_verified: true, hd: 'example.com', name: 'Frank F.' },
    });
    idpADirectory.memberships.set(email, ['eng@example.com', 'all@example.com', 'ops@example.com']);
    await configure('    groups: [eng@example.com, ops@example.com]');
    const page = await signIn('idpA', frank);
    expect(page.status, page.text).toBe(200);
    expect(page.authorizeUrl.searchParams.get('hd')).toBe('example.com');
    expect(page.authorizeUrl.searchParams.get('access_type')).toBe('offline');
    expect(page.authorizeUrl.searchParams.get('prompt')).toBe('consent');
    const stored = await expectWorkingKey(page.key, email);
    expect(stored?.spec.identity).toMatchObject({
      connector: 'idpA',
      userId: frank,
      username: email,
      preferredUsername: 'Frank F.',
      // Two pages of the directory, only the required groups kept.
      groups: ['eng@example.com', 'ops@example.com'],
    });
    expect(idpADirectory.actedFor).toContain(idpADirectory.adminEmail);
  });

  it('refuses another hosted domain, an unverified email, and a user in none of the groups', async () => {
    const { idpA, idpADirectory } = providers();
    await configure('    groups: [eng@example.com]');
    const outsider = uniqueName('grace');
    // An address at the allowed domain is not enough: the account's hosted domain decides.
    idpA.accounts.set(outsider, {
      claims: { email: `${outsider}@example.com`, email_verified: true, hd: 'other.example' },
    });
    const unverified = uniqueName('heidi');
    idpA.accounts.set(unverified, {
      claims: { email: `${unverified}@example.com`, email_verified: false, hd: 'example.com' },
    });
    const ungrouped = uniqueName('ivan');
    idpA.accounts.set(ungrouped, {
      claims: { email: `${ungrouped}@example.com`, email_verified: true, hd: 'example.com' },
    });
    idpADirectory.memberships.set(`${ungrouped}@example.com`, ['all@example.com']);
    const pages = [
      await signIn('idpA', outsider),
      await signIn('idpA', unverified),
      await signIn('idpA', ungrouped),
    ];
    expect(pages.map((p) => p.status)).toEqual([403, 403, 403]);
    expect(pages[0]?.text).toContain('domain allowed');
    expect(pages[1]?.text).toContain('not verified');
    expect(pages[2]?.text).toContain('not a member of any group allowed');
    for (const name of [outsider, unverified, ungrouped])
      expect(await env().loginKeys(userNameFor(`${name}@example.com`))).toEqual([]);
  });
});

describe('web identity (idpA) without a directory service account', () => {
  it('refuses everyone when it requires groups, which cannot be known; signs people in without groups otherwise', async () => {
    const { idpA } = providers();
    const judy = uniqueName('judy');
    const email = `${judy}@example.com`;
    idpA.accounts.set(judy, { claims: { email, email_verified: true, hd: 'example.com' } });
    const configure = (extra: string) =>
      env().configure(`
auth:
  idpA:
${clientLines(env(), 'idpA', idpA)}
    hostedDomains: [example.com]
${extra}
`);
    await configure('    groups: [eng@example.com]');
    const refused = await signIn('idpA', judy);
    expect(refused.status, refused.text).not.toBe(200);
    expect(refused.text).toContain('serviceAccountFilePath');
    expect(await env().loginKeys(userNameFor(email))).toEqual([]);

    await configure('');
    const page = await signIn('idpA', judy);
    expect(page.status, page.text).toBe(200);
    const stored = await expectWorkingKey(page.key, email);
    expect(stored?.spec.identity.groups).toEqual([]);
  });
});

describe('enterprise identity (idpB)', () => {
  it('signs in through a tenant, with security groups only (by object id) and the required groups as a whitelist', async () => {
    const { idpB } = providers();
    idpB.groups.set('g-admins', { id: 'g-admins', displayName: 'Platform Admins', securityEnabled: true });
    idpB.groups.set('g-dev', { id: 'g-dev', displayName: 'Developers', securityEnabled: true });
    idpB.groups.set('g-all', { id: 'g-all', displayName: 'All Company', securityEnabled: false });
    const upn = `${uniqueName('judy')}@${idpB.tenantDomain}`;
    idpB.accounts.set(upn, {
      id: uniqueName('oid'),
      displayName: 'Judy J.',
      groups: ['g-admins', 'g-dev', 'g-all'],
    });
    const outsider = `${uniqueName('ken')}@${idpB.tenantDomain}`;
    idpB.accounts.set(outsider, { id: uniqueName('oid'), groups: ['g-all'] });
    await env().configure(`
auth:
  idpB:
${clientLines(env(), 'idpB', idpB)}
    tenant: ${idpB.tenantId}
  connectors:
    - id: idp-b-tenant
      idpB:
${clientLines(env(), 'idp-b-tenant', idpB, '        ')}
        tenant: ${idpB.tenantDomain}
        groups: [g-admins, g-dev]
        onlySecurityGroups: true
        useGroupsAsWhitelist: true
`);
    const all = await signIn('idpB', upn);
    expect(all.status, all.text).toBe(200);
    expect(all.authorizeUrl.pathname).toBe(`/${idpB.tenantId}/oauth2/v2.0/authorize`);
    expect(all.authorizeUrl.searchParams.get('scope')).toBe('offline_access User.Read Directory.Read.All');
    const first = await expectWorkingKey(all.key, upn);
    expect(first?.spec.identity).toMatchObject({
      connector: 'idpB',
      username: upn,
      preferredUsername: 'Judy J.',
      groups: ['g-admins', 'g-dev', 'g-all'],
    });

    // The same person through the tenant-domain connector is another connector: refused for
    // the User, which stays bound to the connector that made it.
    const bound = await signIn('idp-b-tenant', upn);
    expect(bound.status).toBe(403);
    expect(bound.text).toContain('another sign-in method');

    const outsiderPage = await signIn('idp-b-tenant', outsider);
    expect(outsiderPage.status).toBe(403);
    expect(outsiderPage.text).toContain('not a member of any group allowed');

    const other = `${uniqueName('lena')}@${idpB.tenantDomain}`;
    idpB.accounts.set(other, { id: uniqueName('oid'), groups: ['g-admins', 'g-all'] });
    const filtered = await signIn('idp-b-tenant', other);
    expect(filtered.status, filtered.text).toBe(200);
    const stored = await expectWorkingKey(filtered.key, other);
    expect(stored?.spec.identity.groups).toEqual(['g-admins']);
  });
});

describe('the cluster manager (clusterManager)', () => {
  it('signs a person in with their own API key, and refuses other keys', async () => {
    const { clusterManager } = providers();
    const mia = uniqueName('mia');
    clusterManager.users.set('u-mia', {
      id: 'u-mia',
      username: mia,
      name: 'Mia M.',
      enabled: true,
      groups: ['Developers'],
    });
    clusterManager.users.set('u-ned', {
      id: 'u-ned',
      username: uniqueName('ned'),
      enabled: false,
      groups: [],
    });
    const configure = (insecure: boolean) => configureClusterManager(env(), { insecure });
    await configure(true);
    const agent = browserFor(env());
    const post = (key: string) => postClusterManagerKey(env(), agent, key);
    const personalKey = clusterManager.apiKey('u-mia');
    const page = await post(personalKey);
    expect(page.status, page.text).toBe(200);
    const stored = await expectWorkingKey(page.key, mia);
    expect(stored?.spec.identity).toMatchObject({
      connector: 'clusterManager',
      userId: 'u-mia',
      username: mia,
      preferredUsername: 'Mia M.',
      groups: ['Developers'],
    });
    // The person's key itself is kept nowhere.
    expect(JSON.stringify(stored)).not.toContain(personalKey.split(':')[1]);

    const scoped = await post(clusterManager.apiKey('u-mia', { clusterId: 'c-downstream' }));
    const expiredKey = clusterManager.apiKey('u-mia');
    clusterManager.expire(expiredKey);
    const expired = await post(expiredKey);
    const disabled = await post(clusterManager.apiKey('u-ned'));
    const garbage = await post('token-nope:notasecret');
    for (const refused of [scoped, expired, disabled, garbage]) {
      expect(refused.status).toBe(401);
      expect(refused.key).toBeUndefined();
    }
    expect(await env().loginKeys(userNameFor(mia))).toHaveLength(1);

    // Without `insecure`, the cluster manager's certificate (no system trusts it) is checked.
    await configure(false);
    const untrusted = await post(clusterManager.apiKey('u-mia'));
    expect(untrusted.status).toBe(401);
    expect(untrusted.text).toContain('could not be asked');
  });
});
