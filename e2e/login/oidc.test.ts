import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { uniqueName } from '../support/cluster.ts';
import { ScriptedAgent } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import { startTestOidcProvider, type TestOidcProvider } from './support/oidc-provider.ts';
import { browserFor, oidcSection, signIn } from './support/sign-in.ts';

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
