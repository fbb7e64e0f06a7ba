import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teamNameFor, userNameFor } from '../../src/login/outcome.ts';
import { uniqueName } from '../support/cluster.ts';
import { ScriptedAgent } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import { startTestOidcProvider, type TestOidcProvider } from './support/oidc-provider.ts';
import { browserFor, oidcSection, signIn, storedUser } from './support/sign-in.ts';

/**
 * OpenID Connect through the gateway's login endpoints, against real OpenID providers
 * (oidc-provider): the fields of the OIDC section that shape a sign-in, and signing out
 * (RP-initiated logout to the provider's end-session endpoint and back to `postLogoutRedirectURI`).
 * A second provider puts its claims in UserInfo only and has no end-session endpoint.
 */

const env = useLoginEnv();
/** The connector id of the second provider. */
const USERINFO_ID = 'oidc-userinfo';
let userInfoProvider: TestOidcProvider | undefined;

beforeAll(async () => {
  userInfoProvider = await startTestOidcProvider({
    redirectUris: [`${env().platformUrl}/auth/${USERINFO_ID}/callback`],
    caDir: mkdtempSync(join(tmpdir(), 'login-oidc-')),
    claimsInUserInfoOnly: true,
    endSession: false,
  });
});
afterAll(async () => {
  await userInfoProvider?.close();
});

const second = () => userInfoProvider as TestOidcProvider;
/** A browser that trusts the platform and the second provider. */
const secondBrowser = () => new ScriptedAgent([env().caPem, second().caPem]);

/** The `connectors` entry of the second provider (YAML under `auth:`), with `extra` lines (8 spaces in). */
function userInfoConnector(extra = ''): string {
  const provider = second();
  return `  connectors:
    - id: ${USERINFO_ID}
      displayName: Directory
      oidc:
        issuerUrl: ${provider.issuer}
        clientId: ${provider.clientId}
        clientSecret: ${provider.clientSecret}
        redirectURI: ${env().platformUrl}/auth/${USERINFO_ID}/callback
        caFile: ${provider.caFile}
${extra}`;
}

/** The stored Login key of a sign-in (by the user it was made for). */
async function keyOf(username: string) {
  const keys = await env().loginKeys(userNameFor(username));
  expect(keys).toHaveLength(1);
  return keys[0] as NonNullable<(typeof keys)[0]>;
}

async function object(plural: string, name: string) {
  return (await env()
    .gateway.custom.getClusterCustomObject({ group: 'management.platform', version: 'v1', plural, name })
    .catch(() => undefined)) as { spec: Record<string, unknown> } | undefined;
}

/** POST /auth/logout with `key`, redirects not followed. */
async function logout(key: string, accept = 'application/json') {
  const response = await undiciFetch(`${env().platformUrl}/auth/logout`, {
    method: 'POST',
    redirect: 'manual',
    headers: { authorization: `Bearer ${key}`, accept },
    ...(env().gateway.dispatcher ? { dispatcher: env().gateway.dispatcher } : {}),
  });
  const text = await response.text();
  const json = response.headers.get('content-type')?.startsWith('application/json')
    ? JSON.parse(text)
    : undefined;
  return { status: response.status, headers: response.headers, text, json };
}

describe('signing out (RP-initiated logout)', () => {
  it("deletes the key and sends the person through the provider's end-session endpoint back to postLogoutRedirectURI", async () => {
    const { oidc } = env();
    const account = uniqueName('leaver');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    const back = `${env().platformUrl}/auth/login`;
    await env().configure(`
auth:
${oidcSection(env())}
    postLogoutRedirectURI: ${back}
`);
    const agent = browserFor(env());
    const page = await signIn(env(), 'oidc', account, agent);
    expect(page.status, page.text).toBe(200);
    const stored = await keyOf(account);
    // The sign-in's ID token stays on the server with the key, as the hint of the end-session request.
    const { idToken } = JSON.parse(stored.spec.identity.connectorData);
    expect(decodeJwt(idToken)).toMatchObject({ sub: account, aud: oidc.clientId, iss: oidc.issuer });
    // While the provider's session lasts, signing in again needs no interaction there.
    const silent = await agent.request(
      (await agent.request(`${env().platformUrl}/auth/oidc/login`)).location!,
    );
    expect(new URL(silent.location ?? '').pathname).toBe('/auth/oidc/callback');

    await env().gateway.accepted(page.key as string);
    const out = await logout(page.key as string);
    expect(out.status, out.text).toBe(200);
    expect(out.json.loggedOut).toBe(true);
    const endSession = new URL(out.json.redirect);
    // oidc-provider's end-session endpoint (its discovery names it).
    expect(`${endSession.origin}${endSession.pathname}`).toBe(`${oidc.issuer}/session/end`);
    expect(Object.fromEntries(endSession.searchParams)).toEqual({
      client_id: oidc.clientId,
      post_logout_redirect_uri: back,
      id_token_hint: idToken,
    });
    expect(await env().storedKey(stored.metadata.name)).toBeUndefined();

    // The person's browser at the provider: it asks, ends its session, and sends them back.
    const confirm = await agent.request(endSession.toString());
    expect(confirm.status, confirm.text).toBe(200);
    const done = await agent.submitForm(confirm.text, endSession.toString(), { logout: 'yes' });
    expect(done.status, done.text).toBe(303);
    expect(done.location).toBe(back);
    expect((await agent.request(back)).status).toBe(200);
    // The provider's session is over: a new sign-in asks who it is.
    const start = await agent.request(`${env().platformUrl}/auth/oidc/login`);
    const prompt = await agent.request(start.location as string);
    expect(new URL(prompt.location ?? '').pathname).toMatch(/^\/interaction\//);
  });

  it('goes to postLogoutRedirectURI without an end-session endpoint, and to the login page for other keys', async () => {
    const account = uniqueName('plainleaver');
    second().accounts.set(account, { claims: { preferred_username: account } });
    await env().configure(`
auth:
${userInfoConnector('        postLogoutRedirectURI: https://portal.example/signed-out')}
`);
    const page = await signIn(env(), USERINFO_ID, account, secondBrowser());
    expect(page.status, page.text).toBe(200);
    await env().gateway.accepted(page.key as string);
    const out = await logout(page.key as string);
    expect(out.json).toEqual({ loggedOut: true, redirect: 'https://portal.example/signed-out' });

    // A password key, signed out by a client that asks for a page: a redirect to the login page.
    const name = await env().userWithPassword('pwleaver', 'leaving password 12');
    const minted = await env().service.passwordLogin({
      username: name,
      password: 'leaving password 12',
      source: '10.0.0.7',
    });
    await env().gateway.accepted(minted.key);
    const html = await logout(minted.key, 'text/html,application/xhtml+xml,*/*;q=0.8');
    expect(html.status).toBe(303);
    expect(html.headers.get('location')).toBe(`${env().platformUrl}/auth/login`);
    expect(html.text).toContain('Signed out');
    expect(await env().loginKeys(name)).toEqual([]);
  });
});

describe('the claims a sign-in reads', () => {
  it.each([
    {
      name: 'by default: sub, preferred_username, email and groups',
      fields: '',
      expected: (account: string) => ({
        userId: account,
        username: `${account}.login`,
        email: `${account}@home.example`,
        groups: ['staff'],
      }),
    },
    {
      name: 'with usernameClaim, platformUsernameClaim, emailClaim, groupsClaim, usernamePrefix and groupsPrefix',
      fields: `    usernameClaim: employee_number
    platformUsernameClaim: login_name
    emailClaim: work_email
    groupsClaim: roles
    usernamePrefix: 'corp:'
    groupsPrefix: 'corp:'
    groups: [admins]`,
      expected: (account: string) => ({
        userId: `E-${account}`,
        username: `corp:${account}.dir`,
        email: `${account}@corp.example`,
        // `groups` is compared before the prefix; both roles enter the identity.
        groups: ['corp:admins', 'corp:dev'],
      }),
    },
  ])('$name', async ({ fields, expected }) => {
    const { oidc } = env();
    const account = uniqueName('claims');
    oidc.accounts.set(account, {
      claims: {
        preferred_username: `${account}.login`,
        email: `${account}@home.example`,
        groups: ['staff'],
        employee_number: `E-${account}`,
        login_name: `${account}.dir`,
        work_email: `${account}@corp.example`,
        roles: ['admins', 'dev'],
      },
    });
    await env().configure(`
auth:
${oidcSection(env())}
    scopes: [email, profile, groups, directory]
${fields}
`);
    const page = await signIn(env(), 'oidc', account);
    expect(page.status, page.text).toBe(200);
    const want = expected(account);
    const stored = await keyOf(want.username);
    expect(stored.spec.identity).toMatchObject({
      connector: 'oidc',
      preferredUsername: `${account}.login`,
      ...want,
    });
    const user = await storedUser(env(), want.username);
    expect(user?.spec).toMatchObject({ username: want.username, email: want.email, groups: want.groups });
    for (const group of want.groups)
      expect((await object('teams', teamNameFor(group)))?.spec.groups, group).toEqual([group]);
    expect((await env().use(page.key as string, '/ownedaccesskeys')).status).toBe(200);
  });

  it('reads UserInfo with getUserInfo, for a provider that keeps claims out of its ID tokens', async () => {
    const provider = second();
    const [without, withInfo] = [uniqueName('noinfo'), uniqueName('info')];
    for (const account of [without, withInfo])
      provider.accounts.set(account, {
        claims: { preferred_username: account, email: `${account}@example.com`, groups: ['readers'] },
      });
    const configure = (getUserInfo: boolean) =>
      env().configure(`
auth:
${userInfoConnector(`        scopes: [email, profile, groups]
        getUserInfo: ${getUserInfo}`)}
`);
    // Without UserInfo the ID token has the subject only: the username falls back to it.
    await configure(false);
    const bare = await signIn(env(), USERINFO_ID, without, secondBrowser());
    expect(bare.status, bare.text).toBe(200);
    const bareKey = await keyOf(without);
    expect(bareKey.spec.identity).toMatchObject({ userId: without, username: without, groups: [] });
    expect(bareKey.spec.identity.email).toBeUndefined();

    await configure(true);
    const full = await signIn(env(), USERINFO_ID, withInfo, secondBrowser());
    expect(full.status, full.text).toBe(200);
    expect((await keyOf(withInfo)).spec.identity).toMatchObject({
      connector: USERINFO_ID,
      userId: withInfo,
      username: withInfo,
      email: `${withInfo}@example.com`,
      groups: ['readers'],
    });
  });

  it('trusts the provider certificate without caFile only with insecureCa', async () => {
    const { oidc } = env();
    const account = uniqueName('insecure');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    const configure = (insecureCa: boolean) =>
      env().configure(`
auth:
  oidc:
    issuerUrl: ${oidc.issuer}
    clientId: ${oidc.clientId}
    clientSecret: ${oidc.clientSecret}
    redirectURI: ${env().oidcCallback}
    insecureCa: ${insecureCa}
`);
    await configure(false);
    const refused = await browserFor(env()).request(`${env().platformUrl}/auth/oidc/login`);
    expect(refused.status).toBe(503);
    expect(refused.text).toContain('cannot be reached');
    await configure(true);
    const page = await signIn(env(), 'oidc', account);
    expect(page.status, page.text).toBe(200);
    expect((await env().use(page.key as string, '/ownedaccesskeys')).status).toBe(200);
  });

  it('asks for an access token for `resource`, at the authorization and the token request', async () => {
    const { oidc } = env();
    const account = uniqueName('resource');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    const resource = `https://api.example/${uniqueName('platform')}`;
    await env().configure(`
auth:
${oidcSection(env())}
    resource: ${resource}
`);
    const page = await signIn(env(), 'oidc', account);
    expect(page.status, page.text).toBe(200);
    expect(page.authorizeUrl.searchParams.get('resource')).toBe(resource);
    // The provider was asked for the resource and issued an access token for it.
    expect(oidc.resourceRequests.filter((indicator) => indicator === resource).length).toBeGreaterThan(0);
    expect(oidc.accessTokenAudiences).toContain(resource);
    expect(await keyOf(account)).toBeDefined();
  });
});

describe('team creation', () => {
  it('makes no Team with disableTeamCreation, while the user keeps its groups', async () => {
    const { oidc } = env();
    const account = uniqueName('noteams');
    const group = uniqueName('grp-noteam');
    oidc.accounts.set(account, { claims: { preferred_username: account, groups: [group] } });
    await env().configure(`
auth:
  disableTeamCreation: true
${oidcSection(env())}
    scopes: [profile, groups]
`);
    const page = await signIn(env(), 'oidc', account);
    expect(page.status, page.text).toBe(200);
    expect((await storedUser(env(), account))?.spec.groups).toEqual([group]);
    expect(await object('teams', teamNameFor(group))).toBeUndefined();
    // The same sign-in without the setting makes the group's Team.
    await env().configure(`
auth:
${oidcSection(env())}
    scopes: [profile, groups]
`);
    expect((await signIn(env(), 'oidc', account)).status).toBe(200);
    expect((await object('teams', teamNameFor(group)))?.spec).toMatchObject({
      groups: [group],
      users: [account],
    });
  });
});
