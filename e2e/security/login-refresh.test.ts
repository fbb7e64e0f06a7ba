import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Team, User } from '../../src/api/identity.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { call } from '../gateway/support.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import { refreshConditionOf, useIdentityRefresher } from '../login/support/refresher.ts';
import { oidcSection } from '../login/support/sign-in.ts';
import { oidcSignIn } from '../login/support/sso.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Attacks on identity refresh: the refresh acts on what a Login key keeps (its identity and
 * connectorData), so a tenant who could plant another person's refresh token in a key of its own
 * would have the provider vouch for that person. The gateway refuses a tenant's write of
 * `spec.identity`; and a key that holds someone else's grant anyway (written by an admin, or
 * restored from a backup) is disabled by the refresh instead of passing that person's groups on.
 */

const env = useLoginEnv();
useIdentityRefresher(env, 1500);

async function object<T>(plural: string, name: string): Promise<T> {
  return (await env().gateway.custom.getClusterCustomObject({
    group: 'management.platform',
    version: 'v1',
    plural,
    name,
  })) as T;
}

describe("another person's refresh grant in a tenant's key", () => {
  it('cannot be written through the gateway, and is refused by the refresh when it is there', async () => {
    const { oidc, gateway } = env();
    const victim = uniqueName('victim');
    const privileged = uniqueName('grp-privileged');
    oidc.accounts.set(victim, { claims: { preferred_username: victim, groups: [privileged] } });
    await env().configure(`
auth:
${oidcSection(env())}
    scopes: [profile, groups, offline_access]
`);
    const victimKey = await env().service.ssoLogin(await oidcSignIn(env(), victim));
    const stolenIdentity = (await env().storedKey(victimKey.keyName))?.spec.identity;
    expect(stolenIdentity.connectorData).toContain('refreshToken');

    // The tenant, through the gateway: its own key may not take an identity.
    const attacker = uniqueName('attacker');
    const attackerKey = await gateway.user(attacker);
    await gateway.accepted(attackerKey);
    const own = await call(`${gateway.api}/ownedaccesskeys`, {
      token: attackerKey,
      dispatcher: gateway.dispatcher,
    });
    const ownName = own.json.items[0].metadata.name as string;
    const patched = await call(`${gateway.api}/ownedaccesskeys/${ownName}`, {
      method: 'PATCH',
      token: attackerKey,
      dispatcher: gateway.dispatcher,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { type: 'Login', identity: stolenIdentity } }),
    });
    expect(patched.status).toBeGreaterThanOrEqual(400);
    expect((await env().storedKey(ownName))?.spec.identity).toBeUndefined();

    // A Login key of the tenant holding the victim's grant anyway (made by an admin by mistake).
    const planted = uniqueName('planted');
    await env().create(
      'OwnedAccessKey',
      { name: planted },
      {
        user: attacker,
        type: 'Login',
        key: generateAccessKey(randomBytes).key,
        identity: { ...stolenIdentity, username: attacker, groups: [] },
        identityRefresh: '2020-01-01T00:00:00Z',
      },
    );
    await eventually(
      async () => (await env().storedKey(planted))?.spec.disabled === true,
      30_000,
      'the planted key to be disabled',
    );
    const ended = await env().storedKey(planted);
    expect(refreshConditionOf(ended)).toMatchObject({ status: 'False', reason: 'RefreshRevoked' });
    expect(refreshConditionOf(ended)?.message).toContain('another username');
    // The victim's groups went nowhere: not to the attacker's User, not into the victim's Team.
    expect((await object<User>('users', attacker)).spec.groups ?? []).toEqual([]);
    expect((await object<Team>('teams', privileged)).spec.users).toEqual([victim]);
    // Nothing of the grant in what is said about it.
    const { refreshToken } = JSON.parse(stolenIdentity.connectorData);
    expect(JSON.stringify(ended?.status)).not.toContain(refreshToken);
  });
});
