import { randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import { describe, expect, it } from 'vitest';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call } from '../gateway/support.ts';
import { ScriptedAgent } from '../login/support/browse.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import {
  type Authorization,
  authorization,
  exchange,
  oidcProviderSection,
  type RelyingParty,
  refreshKeysOf,
  refusal,
  relyingParty,
} from '../login/support/relying-party.ts';

/**
 * Attacks on the platform as an OpenID provider (`/oidc`), made as a malicious relying party, a
 * stolen-token holder or a cross-site attacker would, through the gateway against the real
 * provider (oidc-provider) and apiserver: each is refused, and nothing is issued.
 */

const env = useLoginEnv();
const APP = 'https://argocd.example.test/auth/callback';
const OTHER_APP = 'https://grafana.example.test/login/generic_oauth';
const SECRET = randomBytes(18).toString('hex');
const OTHER_SECRET = randomBytes(18).toString('hex');
const PASSWORD = 'provider attack password';

async function configure(
  options: { wildcardRedirect?: boolean; extraRedirect?: string; enabled?: boolean } = {},
) {
  const section = oidcProviderSection(
    [
      {
        clientId: 'argocd',
        clientSecret: SECRET,
        redirectURIs: [APP, ...(options.extraRedirect ? [options.extraRedirect] : [])],
      },
      { clientId: 'grafana', clientSecret: OTHER_SECRET, redirectURIs: [OTHER_APP] },
    ],
    options.wildcardRedirect === true,
  );
  await env().configure(options.enabled === false ? `${section}\n  enabled: false` : section);
}

const agentFor = () => new ScriptedAgent([env().caPem]);

/**
 * A person signs in through the platform's login page in `agent` for the sign-in `started`:
 * returns where the provider sent the browser at the end (the application's redirect URI).
 */
async function signIn(
  agent: ScriptedAgent,
  started: Authorization,
  user: string,
  redirect: string,
): Promise<string> {
  const loginPage = await agent.followUntil(started.url, `${env().platformUrl}/auth/login`);
  const uid = new URL(loginPage).searchParams.get('oidc') ?? '';
  expect(uid).not.toBe('');
  const posted = await agent.request(`${env().platformUrl}/auth/password/login?oidc=${uid}`, {
    method: 'POST',
    form: { username: user, password: PASSWORD },
  });
  expect(posted.status, posted.text).toBe(303);
  return agent.followUntil(posted.location as string, redirect);
}

async function signedInParty(user: string) {
  const rp = await relyingParty(env(), 'argocd', SECRET, APP);
  const started = await authorization(rp);
  const callback = await signIn(agentFor(), started, user, APP);
  return { rp, started, callback };
}

/** An authorization request answered by the provider itself, without following it. */
async function authorize(rp: RelyingParty, url: string) {
  const response = await (rp.config[client.customFetch] as client.CustomFetch)(url, {
    redirect: 'manual',
  } as never);
  return { status: response.status, location: response.headers.get('location'), text: await response.text() };
}

describe('attacks on the platform as an OpenID provider', () => {
  it('a code replayed is refused, and the tokens of its first use end with it', async () => {
    await configure();
    const user = await env().userWithPassword('opreplay', PASSWORD);
    const { rp, started, callback } = await signedInParty(user);
    const tokens = await exchange(rp, started, callback);
    expect(await refreshKeysOf(env(), user)).toHaveLength(1);
    expect(await refusal(exchange(rp, started, callback))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
    // oidc-provider revokes what the code issued when it is replayed (RFC 6749 4.1.2).
    expect(await refusal(client.refreshTokenGrant(rp.config, tokens.refresh_token ?? ''))).toMatchObject({
      error: 'invalid_grant',
    });
  });

  it('a sign-in without PKCE gets no code; a code with the wrong verifier is refused', async () => {
    await configure();
    const user = await env().userWithPassword('oppkce', PASSWORD);
    const rp = await relyingParty(env(), 'argocd', SECRET, APP);
    const started = await authorization(rp);
    const withoutPkce = new URL(started.url);
    withoutPkce.searchParams.delete('code_challenge');
    withoutPkce.searchParams.delete('code_challenge_method');
    const answer = await authorize(rp, withoutPkce.toString());
    expect(answer.status).toBe(303);
    const sentBack = new URL(answer.location ?? '');
    expect(sentBack.searchParams.get('error')).toBe('invalid_request');
    expect(sentBack.searchParams.get('code')).toBeNull();

    const callback = await signIn(agentFor(), started, user, APP);
    const wrongVerifier = { ...started, verifier: client.randomPKCECodeVerifier() };
    expect(await refusal(exchange(rp, wrongVerifier, callback))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
    expect(await refreshKeysOf(env(), user)).toEqual([]);
  });

  it('a redirect URI with * is refused unless wildcardRedirect is on; a code is bound to its redirect URI', async () => {
    const pattern = 'https://*.apps.example.test/callback';
    const target = 'https://argo.apps.example.test/callback';
    await configure({ extraRedirect: pattern });
    const rp = await relyingParty(env(), 'argocd', SECRET, target);
    const refused = await authorize(rp, (await authorization(rp)).url);
    expect(refused.status).toBe(400);
    expect(refused.location).toBeNull();
    await configure({ extraRedirect: pattern, wildcardRedirect: true });
    const allowed = await authorize(rp, (await authorization(rp)).url);
    expect(allowed.status).toBe(303);
    expect(new URL(allowed.location ?? '', env().platformUrl).pathname).toMatch(/^\/oidc\/interaction\//);
    // Even with wildcards, * never reaches another host.
    const evil = await relyingParty(
      env(),
      'argocd',
      SECRET,
      'https://evil.example.test/x?.apps.example.test/callback',
    );
    expect((await authorize(evil, (await authorization(evil)).url)).status).toBe(400);

    // A code issued for one redirect URI, exchanged naming another.
    const user = await env().userWithPassword('opredirect', PASSWORD);
    const { rp: party, started, callback } = await signedInParty(user);
    // openid-client sends the callback's origin and path as redirect_uri: here another URI the
    // client may use (the wildcard), not the one the code was issued for.
    const elsewhere = new URL(callback);
    const mismatch = client.authorizationCodeGrant(party.config, new URL(`${target}${elsewhere.search}`), {
      pkceCodeVerifier: started.verifier,
      expectedState: started.state,
      expectedNonce: started.nonce,
    });
    expect(await refusal(mismatch)).toMatchObject({ status: 400, error: 'invalid_grant' });
  });

  it("one client's code is refused at another client", async () => {
    await configure();
    const user = await env().userWithPassword('opcross', PASSWORD);
    const { started, callback } = await signedInParty(user);
    const other = await relyingParty(env(), 'grafana', OTHER_SECRET, APP);
    expect(await refusal(exchange(other, started, callback))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
    expect(await refreshKeysOf(env(), user)).toEqual([]);
  });

  it('a refresh token ends when its key is disabled or deleted, and is never an access key', async () => {
    await configure();
    const user = await env().userWithPassword('oprefresh', PASSWORD);
    const first = await signedInParty(user);
    const tokens = await exchange(first.rp, first.started, first.callback);
    const refreshToken = tokens.refresh_token ?? '';
    const [key] = await refreshKeysOf(env(), user);
    const name = key?.metadata.name ?? '';
    // Not a platform key: the gateway refuses it as a bearer token.
    const asKey = await call(`${env().gateway.api}/apis/management.platform/v1/ownedaccesskeys`, {
      token: refreshToken,
      dispatcher: env().gateway.dispatcher,
    });
    expect(asKey.status).toBe(401);

    await new KubeClient(env().gateway.kc).request({
      method: 'PATCH',
      path: `/apis/management.platform/v1/ownedaccesskeys/${name}`,
      contentType: 'application/merge-patch+json',
      body: { spec: { disabled: true } },
    });
    expect(await refusal(client.refreshTokenGrant(first.rp.config, refreshToken))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });

    const second = await signedInParty(user);
    const again = await exchange(second.rp, second.started, second.callback);
    const secondKey = (await refreshKeysOf(env(), user)).find((stored) => stored.metadata.name !== name);
    await env().gateway.custom.deleteClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
      name: secondKey?.metadata.name ?? '',
    });
    expect(
      await refusal(client.refreshTokenGrant(second.rp.config, again.refresh_token ?? '')),
    ).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('a refresh token is refused at another client, and once its User is disabled', async () => {
    await configure();
    const user = await env().userWithPassword('opuser', PASSWORD);
    const { rp, started, callback } = await signedInParty(user);
    const tokens = await exchange(rp, started, callback);
    const other = await relyingParty(env(), 'grafana', OTHER_SECRET, OTHER_APP);
    expect(await refusal(client.refreshTokenGrant(other.config, tokens.refresh_token ?? ''))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
    await new KubeClient(env().gateway.kc).request({
      method: 'PATCH',
      path: `/apis/management.platform/v1/users/${user}`,
      contentType: 'application/merge-patch+json',
      body: { spec: { disabled: true } },
    });
    expect(await refusal(client.refreshTokenGrant(rp.config, tokens.refresh_token ?? ''))).toMatchObject({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('a sign-in finished in another browser does not sign the attacker in as the victim', async () => {
    await configure();
    const victim = await env().userWithPassword('opvictim', PASSWORD);
    const rp = await relyingParty(env(), 'argocd', SECRET, APP);
    const started = await authorization(rp);
    const attacker = agentFor();
    const loginPage = await attacker.followUntil(started.url, `${env().platformUrl}/auth/login`);
    // The attacker lures the victim to the login page of the attacker's sign-in.
    const victimAgent = agentFor();
    const posted = await victimAgent.request(
      `${env().platformUrl}/auth/password/login${new URL(loginPage).search}`,
      {
        method: 'POST',
        form: { username: victim, password: PASSWORD },
      },
    );
    expect(posted.status).toBe(303);
    const finish = await victimAgent.request(posted.location as string);
    expect(finish.status).toBe(400);
    // The attacker, holding the interaction's cookie, resumes: it is sent to sign in, no code.
    const resumed = await attacker.followUntil(started.url, `${env().platformUrl}/auth/login`);
    expect(new URL(resumed).pathname).toBe('/auth/login');
    expect(await refreshKeysOf(env(), victim)).toEqual([]);
  });

  it('is on by default, with no clients; enabled: false serves nothing under /oidc', async () => {
    const discovery = () =>
      call(`${env().platformUrl}/oidc/.well-known/openid-configuration`, {
        dispatcher: env().gateway.dispatcher,
      });
    // On by default, with no clients: an empty configuration serves it.
    await env().configure('');
    expect((await discovery()).status).toBe(200);
    await configure();
    expect((await discovery()).status).toBe(200);
    await configure({ enabled: false });
    const answer = await discovery();
    expect(answer.status).toBe(404);
    expect(answer.text).not.toContain('argocd');
  });

  // Last: its failures count against this file's one source address too.
  it("guessing a client's secret is limited as guessing keys is (429 with Retry-After)", async () => {
    await configure();
    const dispatcher = new Agent({ connect: { ca: env().caPem } });
    const guess = (secret: string) =>
      undiciFetch(`${env().platformUrl}/oidc/token`, {
        dispatcher,
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`grafana:${secret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=refresh_token&refresh_token=x',
      });
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 12; attempt++) statuses.push((await guess(`guess-${attempt}`)).status);
    // Refused (401) until the gateway's failure limit is crossed, then blocked (429), never again 401.
    const firstBlocked = statuses.indexOf(429);
    expect(firstBlocked, statuses.join(',')).toBeGreaterThan(0);
    expect(statuses.slice(0, firstBlocked).every((status) => status === 401)).toBe(true);
    expect(statuses.slice(firstBlocked).every((status) => status === 429)).toBe(true);
    const blocked = await guess(OTHER_SECRET);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
