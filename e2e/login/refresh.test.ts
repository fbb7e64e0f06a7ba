import { describe, expect, it } from 'vitest';
import type { Team, User } from '../../src/api/identity.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { userNameFor } from '../../src/login/outcome.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { useLoginEnv } from './support/login-env.ts';
import { refreshConditionOf, useIdentityRefresher } from './support/refresher.ts';
import {
  browserFor,
  clientLines,
  configureClusterManager,
  configureHostedGit,
  oidcSection,
  postClusterManagerKey,
  signIn,
  standIns,
} from './support/sign-in.ts';
import { oidcSignIn } from './support/sso.ts';

/**
 * Identity refresh: the refresh controller (run here with a short interval, its own manager, as
 * the operator's controller component runs it) keeps a Login key's identity, and the User's
 * groups and teams, as the provider states them, against the real OpenID provider (oidc-provider)
 * and the hosted providers' stand-ins; a grant the provider no longer honours disables the key
 * with a condition that says why.
 */

const env = useLoginEnv({ providers: true });
useIdentityRefresher(env, 1500);

const conditionOf = refreshConditionOf;

async function object<T>(plural: string, name: string): Promise<T> {
  return (await env().gateway.custom.getClusterCustomObject({
    group: 'management.platform',
    version: 'v1',
    plural,
    name,
  })) as T;
}

/** The events.k8s.io Events about one object of the platform's kinds. */
async function eventsAbout(kind: string, name: string) {
  const list = await new KubeClient(env().gateway.kc).request<{
    items: { type?: string; reason?: string; note?: string; regarding?: { kind?: string; name?: string } }[];
  }>({ method: 'GET', path: '/apis/events.k8s.io/v1/events' });
  return list.items.filter((e) => e.regarding?.kind === kind && e.regarding?.name === name);
}

/** A GET through the gateway with `key`, without waiting for it to be accepted. */
const statusWith = async (key: string) =>
  (await call(`${env().gateway.api}/ownedaccesskeys`, { token: key, dispatcher: env().gateway.dispatcher }))
    .status;

describe('OIDC identity refresh (real OpenID provider)', () => {
  it('follows the groups the provider states, and disables the key when the grant is revoked', async () => {
    const { oidc } = env();
    const account = uniqueName('refreshed');
    const [kept, dropped] = [uniqueName('grp-kept'), uniqueName('grp-dropped')];
    oidc.accounts.set(account, { claims: { preferred_username: account, groups: [kept, dropped] } });
    await env().configure(`
auth:
${oidcSection(env())}
    scopes: [profile, groups, offline_access]
`);
    const minted = await env().service.ssoLogin(await oidcSignIn(env(), account));
    await env().gateway.accepted(minted.key);
    const signedInAt = (await env().storedKey(minted.keyName))?.spec.identityRefresh as string;
    expect((await object<Team>('teams', dropped)).spec.users).toContain(account);

    // The provider no longer lists one group: the key's identity, the User and the Team follow.
    oidc.accounts.set(account, { claims: { preferred_username: account, groups: [kept] } });
    await eventually(
      async () => {
        const key = await env().storedKey(minted.keyName);
        // The identity is written first, then the condition that says it was refreshed.
        return (
          JSON.stringify(key?.spec.identity.groups) === JSON.stringify([kept]) &&
          conditionOf(key)?.reason === 'Refreshed'
        );
      },
      30_000,
      'the key identity to lose the group',
    );
    const refreshed = await env().storedKey(minted.keyName);
    expect(Date.parse(refreshed?.spec.identityRefresh)).toBeGreaterThan(Date.parse(signedInAt));
    expect(conditionOf(refreshed)).toMatchObject({ status: 'True', reason: 'Refreshed' });
    expect((await object<User>('users', account)).spec.groups).toEqual([kept]);
    await eventually(
      async () => !(await object<Team>('teams', dropped)).spec.users?.includes(account),
      30_000,
      'the user to leave the team of the dropped group',
    );
    expect((await object<Team>('teams', kept)).spec.users).toContain(account);
    expect(await statusWith(minted.key)).toBe(200);

    // The grant is revoked at the provider: the next refresh is refused, the key disabled.
    const { refreshToken } = JSON.parse(refreshed?.spec.identity.connectorData);
    await oidc.revoke(refreshToken);
    await eventually(
      async () => (await env().storedKey(minted.keyName))?.spec.disabled === true,
      30_000,
      'the key to be disabled',
    );
    const ended = await env().storedKey(minted.keyName);
    expect(conditionOf(ended)).toMatchObject({ status: 'False', reason: 'RefreshRevoked' });
    expect(conditionOf(ended)?.message).toContain('invalid_grant');
    await eventually(async () => (await statusWith(minted.key)) === 401, 30_000, 'the key to stop working');
    // Nothing secret in what is said about it.
    expect(JSON.stringify(ended?.status)).not.toContain(refreshToken);
    // The User is told: a Warning Event LoginKeyDisabled naming the key.
    let told: { note?: string } | undefined;
    await eventually(
      async () => {
        told = (await eventsAbout('User', account)).find(
          (e) => e.reason === 'LoginKeyDisabled' && e.type === 'Warning',
        );
        return told !== undefined;
      },
      30_000,
      'the LoginKeyDisabled Event on the User',
    );
    expect(told?.note).toContain(minted.keyName);
    expect(told?.note).not.toContain(refreshToken);
  });

  it('a provider that cannot be reached leaves the key as it is (RefreshFailed, a Warning Event on the key), and the refresh goes on once it answers', async () => {
    const { oidc } = env();
    const account = uniqueName('outage');
    oidc.accounts.set(account, { claims: { preferred_username: account, groups: [] } });
    const reachable = `
auth:
${oidcSection(env())}
    scopes: [profile, groups, offline_access]
`;
    await env().configure(reachable);
    const minted = await env().service.ssoLogin(await oidcSignIn(env(), account));
    await env().gateway.accepted(minted.key);

    // The same connector, at an address where nothing answers.
    const nowhere = `https://127.0.0.1:${await freePort()}`;
    await env().configure(reachable.replace(`issuerUrl: ${oidc.issuer}`, `issuerUrl: ${nowhere}`));
    expect(env().config().auth.oidc?.issuerUrl).toBe(nowhere);
    await eventually(
      async () => conditionOf(await env().storedKey(minted.keyName))?.reason === 'RefreshFailed',
      30_000,
      'the refresh to fail',
    );
    const failed = await env().storedKey(minted.keyName);
    expect(conditionOf(failed)).toMatchObject({ status: 'False', reason: 'RefreshFailed' });
    expect(failed?.spec.disabled).not.toBe(true);
    expect(await statusWith(minted.key)).toBe(200);
    await eventually(
      async () =>
        (await eventsAbout('OwnedAccessKey', minted.keyName)).some(
          (e) => e.reason === 'RefreshFailed' && e.type === 'Warning',
        ),
      30_000,
      'the RefreshFailed Event on the key',
    );

    // The provider answers again: the next refresh succeeds.
    await env().configure(reachable);
    await eventually(
      async () => conditionOf(await env().storedKey(minted.keyName))?.reason === 'Refreshed',
      60_000,
      'the refresh to succeed again',
    );
    expect((await env().storedKey(minted.keyName))?.spec.disabled).not.toBe(true);
    expect(await statusWith(minted.key)).toBe(200);
  });
});

describe('refresh through the hosted providers', () => {
  it('code hosting: teams follow the API, a revoked token disables the key', async () => {
    const { hostedGit } = standIns(env());
    const login = uniqueName('gitrefresh');
    const team = uniqueName('squad');
    hostedGit.accounts.set(login, {
      id: 301,
      email: `${login}@example.com`,
      teams: [
        { org: 'acme', name: team, slug: team },
        { org: 'acme', name: 'core', slug: 'core' },
      ],
    });
    await configureHostedGit(env());
    const page = await signIn(env(), 'hostedGit', login);
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(login));
    expect(key?.spec.identity.groups).toEqual([`acme:${team}`, 'acme:core']);
    hostedGit.accounts.set(login, {
      ...hostedGit.accounts.get(login),
      id: 301,
      teams: [{ org: 'acme', name: 'core', slug: 'core' }],
    });
    await eventually(
      async () =>
        JSON.stringify((await env().storedKey(key?.metadata.name ?? ''))?.spec.identity.groups) ===
        JSON.stringify(['acme:core']),
      30_000,
      'the team to be dropped',
    );
    hostedGit.oauth.revoke(login);
    await eventually(
      async () => (await env().storedKey(key?.metadata.name ?? ''))?.spec.disabled === true,
      30_000,
      'the key to be disabled',
    );
    expect(conditionOf(await env().storedKey(key?.metadata.name ?? ''))).toMatchObject({
      status: 'False',
      reason: 'RefreshRevoked',
    });
  });

  it('enterprise identity: each refresh keeps the rotated refresh token, so refreshes go on', async () => {
    const { idpB } = standIns(env());
    idpB.groups.set('g-rot', { id: 'g-rot', displayName: 'Rotators', securityEnabled: true });
    idpB.groups.set('g-new', { id: 'g-new', displayName: 'Newcomers', securityEnabled: true });
    const upn = `${uniqueName('rotor')}@${idpB.tenantDomain}`;
    const oid = uniqueName('oid');
    idpB.accounts.set(upn, { id: oid, groups: ['g-rot'] });
    await env().configure(`
auth:
  idpB:
${clientLines(env(), 'idpB', idpB)}
    tenant: ${idpB.tenantId}
`);
    const page = await signIn(env(), 'idpB', upn);
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(upn));
    const keyName = key?.metadata.name ?? '';
    const tokens = new Set<string>([JSON.parse(key?.spec.identity.connectorData).refreshToken]);
    // Three refreshes, each with the token the one before got (the provider spends each on use).
    await eventually(
      async () => {
        const stored = await env().storedKey(keyName);
        tokens.add(JSON.parse(stored?.spec.identity.connectorData).refreshToken);
        return tokens.size >= 4;
      },
      60_000,
      'three refreshes with rotated tokens',
    );
    expect((await env().storedKey(keyName))?.spec.disabled).toBeUndefined();
    idpB.accounts.set(upn, { id: oid, groups: ['g-rot', 'g-new'] });
    await eventually(
      async () => {
        const stored = await env().storedKey(keyName);
        return stored?.spec.identity.groups.includes('g-new') && conditionOf(stored)?.reason === 'Refreshed';
      },
      30_000,
      'the new group',
    );
    expect(conditionOf(await env().storedKey(keyName))).toMatchObject({
      status: 'True',
      reason: 'Refreshed',
    });
    expect(idpB.oauth.tokenRequests).not.toContain('invalid_grant');
  });

  it('cluster manager: a user disabled there ends the key; a removed connector stops refreshing', async () => {
    const { clusterManager } = standIns(env());
    const name = uniqueName('cmrefresh');
    clusterManager.users.set('u-refresh', {
      id: 'u-refresh',
      username: name,
      enabled: true,
      groups: ['Ops'],
    });
    await configureClusterManager(env());
    const page = await postClusterManagerKey(env(), browserFor(env()), clusterManager.apiKey('u-refresh'));
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(name));
    const keyName = key?.metadata.name ?? '';
    await eventually(
      async () => conditionOf(await env().storedKey(keyName))?.reason === 'Refreshed',
      30_000,
      'a first refresh',
    );
    const user = clusterManager.users.get('u-refresh');
    if (user) user.enabled = false;
    await eventually(
      async () => (await env().storedKey(keyName))?.spec.disabled === true,
      30_000,
      'disabled',
    );
    expect(conditionOf(await env().storedKey(keyName))?.message).toContain('disabled in the cluster manager');

    // Another person's key, then the cluster manager removed from the configuration.
    const other = uniqueName('cmother');
    clusterManager.users.set('u-other', { id: 'u-other', username: other, enabled: true, groups: [] });
    await postClusterManagerKey(env(), browserFor(env()), clusterManager.apiKey('u-other'));
    const [otherKey] = await env().loginKeys(userNameFor(other));
    await env().configure('');
    await eventually(
      async () =>
        conditionOf(await env().storedKey(otherKey?.metadata.name ?? ''))?.reason === 'ConnectorRemoved',
      30_000,
      'the refresh to stop',
    );
    expect((await env().storedKey(otherKey?.metadata.name ?? ''))?.spec.disabled).toBeUndefined();
  });
});
