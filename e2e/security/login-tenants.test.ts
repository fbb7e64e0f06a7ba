import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import { browserFor, clientLines, expectRefusedSignIn, signIn, standIns } from '../login/support/sign-in.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Group spoofing across tenants of the enterprise-identity provider (issue 32), through the
 * platform's login endpoints against the provider's stand-in (its v2 OAuth endpoints and graph
 * API, `e2e/login/support/idp-b-api.ts`): anyone can create a tenant, and anyone who may create a
 * group picks its display name, so neither a foreign tenant's account nor a group's display name
 * may reach a Team. Single sign-ons are not throttled by client address, so these tests share none.
 */

const env = useLoginEnv({ providers: true });

const idpB = () => standIns(env()).idpB;

async function configureIdpB(lines: string) {
  await env().configure(`
auth:
  idpB:
${clientLines(env(), 'idpB', idpB())}
${lines}
`);
}

const teams = () =>
  env().gateway.custom.listClusterCustomObject({
    group: 'management.platform',
    version: 'v1',
    plural: 'teams',
  }) as Promise<{
    items: Array<{ metadata: { name: string }; spec: { groups?: string[]; users?: string[] } }>;
  }>;

/** An admin's Team for `groups`; returns its name. */
async function adminTeam(groups: string[]): Promise<string> {
  const name = uniqueName('admins');
  await env().create('Team', { name }, { groups, clusterRoles: [{ name: 'platform-admin' }] });
  return name;
}

const membersOf = async (team: string) =>
  (await teams()).items.find((item) => item.metadata.name === team)?.spec.users ?? [];

describe('enterprise identity across tenants', () => {
  it('a shared tenant signs people in without groups: a tenant of their own making gains them no Team', async () => {
    const admins = await adminTeam(['Platform Admins']);
    // The attacker's own free tenant, with a group named like the admins' group.
    const spoofed = randomUUID();
    idpB().groups.set(spoofed, { id: spoofed, displayName: 'Platform Admins', securityEnabled: true });
    const upn = `${uniqueName('mallory')}@${idpB().otherTenant.domain}`;
    idpB().accounts.set(upn, { id: randomUUID(), groups: [spoofed], ofOtherTenant: true });
    await configureIdpB('    tenant: common');
    const page = await signIn(env(), 'idpB', upn);
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(upn));
    expect(key?.spec.identity.groups).toEqual([]);
    expect(await membersOf(admins)).not.toContain(userNameFor(upn));
    const names = (await teams()).items.flatMap((team) => team.spec.groups ?? []);
    expect(names).not.toContain(spoofed);
  });

  it('refuses groups with a shared tenant, naming the field', async () => {
    const group = randomUUID();
    idpB().groups.set(group, { id: group, displayName: 'Developers', securityEnabled: true });
    const upn = `${uniqueName('dora')}@${idpB().otherTenant.domain}`;
    idpB().accounts.set(upn, { id: randomUUID(), groups: [group], ofOtherTenant: true });
    await configureIdpB(`    tenant: organizations\n    groups: [${group}]`);
    const tokenRequests = [...idpB().oauth.tokenRequests];
    // Refused before the provider is asked: the sign-in does not start.
    expectRefusedSignIn(
      await browserFor(env()).request(`${env().platformUrl}/auth/idpB/login`),
      /sets groups, but groups need a specific tenant/,
    );
    expect(idpB().oauth.tokenRequests).toEqual(tokenRequests);
    expect(await env().loginKeys(userNameFor(upn))).toEqual([]);
  });

  it("a specific tenant refuses another tenant's accounts, and matches groups by object id, not display name", async () => {
    const real = randomUUID();
    idpB().groups.set(real, { id: real, displayName: 'Platform Admins', securityEnabled: true });
    const admins = await adminTeam([real]);
    // A foreign account, even in the very group.
    const foreigner = `${uniqueName('frank')}@${idpB().otherTenant.domain}`;
    idpB().accounts.set(foreigner, { id: randomUUID(), groups: [real], ofOtherTenant: true });
    await configureIdpB(`    tenant: ${idpB().tenantDomain}`);
    expectRefusedSignIn(await signIn(env(), 'idpB', foreigner), /another tenant/);
    expect(await env().loginKeys(userNameFor(foreigner))).toEqual([]);
    expect(await membersOf(admins)).toEqual([]);

    // A member of the tenant who made a group and named it after the admins' group id.
    const named = randomUUID();
    idpB().groups.set(named, { id: named, displayName: real, securityEnabled: true });
    const insider = `${uniqueName('ivan')}@${idpB().tenantDomain}`;
    idpB().accounts.set(insider, { id: randomUUID(), groups: [named] });
    const page = await signIn(env(), 'idpB', insider);
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(insider));
    expect(key?.spec.identity.groups).toEqual([named]);
    expect(await membersOf(admins)).toEqual([]);

    // The real member joins.
    const member = `${uniqueName('ada')}@${idpB().tenantDomain}`;
    idpB().accounts.set(member, { id: randomUUID(), groups: [real] });
    expect((await signIn(env(), 'idpB', member)).status).toBe(200);
    expect(await membersOf(admins)).toEqual([userNameFor(member)]);
  });
});
