import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as client from 'openid-client';
import type { Browser } from 'playwright-core';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { repoRoot } from '../../src/dev/binaries.ts';
import { generateSigningKey, ringFromSecret, SIGNING_KEYS_SECRET } from '../../src/identity/signing-keys.ts';
import {
  OIDC_EXPIRES_AT_ANNOTATION,
  OIDC_MODEL_LABEL,
  stateSecretName,
} from '../../src/login/oidc-provider/secret-models.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { readDoc } from '../docs/markdown.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { launchChromium, ScriptedAgent } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import {
  authorization,
  exchange,
  oidcProviderSection,
  refreshKeysOf,
  refusal,
  relyingParty,
} from './support/relying-party.ts';
import { browserFor, oidcSection } from './support/sign-in.ts';

/**
 * The platform as an OpenID provider (Config `oidc`), end to end: a relying party (openid-client)
 * discovers `<platform>/oidc`, a person signs in in chromium through the platform's own login page
 * (the password form), the relying party exchanges the code (PKCE, nonce, ES256 ID token checked
 * against the JWKS of the platform's signing keys) and reads username, email and groups; the
 * refresh token is kept as an OwnedAccessKey with `spec.oidcProvider` and refreshes; a client
 * with a wrong secret, and a redirect URI the client did not register, are refused.
 */

const env = useLoginEnv();
let browser: Browser | undefined;
const APP = 'https://argocd.example.test';
const REDIRECT = `${APP}/auth/callback`;
const SECRET = randomBytes(18).toString('hex');

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** A User with a password, an email, groups from a sign-in, and a team. */
async function person(password: string): Promise<{ name: string; team: string }> {
  const g = env().gateway;
  const name = await env().userWithPassword('oidcperson', password, (user) => ({
    email: `${user}@example.com`,
    groups: ['developers'],
  }));
  const team = uniqueName('oidcteam');
  await env().create('Team', { name: team }, { users: [name] });
  await eventually(
    async () => {
      const user = (await g.custom.getClusterCustomObject({
        group: 'management.platform',
        version: 'v1',
        plural: 'users',
        name,
      })) as { status?: { teams?: string[] } };
      return user.status?.teams?.includes(team) === true;
    },
    30_000,
    'the team membership in the User status',
  );
  return { name, team };
}

describe('the platform as an OpenID provider', () => {
  it('signs a person in for an application through the login page, with claims and a refresh token', async () => {
    await env().configure(
      oidcProviderSection([{ clientId: 'argocd', clientSecret: SECRET, redirectURIs: [REDIRECT] }]),
    );
    const { name, team } = await person('provider password 1');
    const rp = await relyingParty(env(), 'argocd', SECRET, REDIRECT);
    expect(rp.config.serverMetadata().issuer).toBe(`${env().platformUrl}/oidc`);
    expect(rp.config.serverMetadata().code_challenge_methods_supported).toContain('S256');
    const started = await authorization(rp);

    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(started.url);
    await page.waitForSelector('#password-form');
    expect(new URL(page.url()).pathname).toBe('/auth/login');
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', 'provider password 1');
    // The application itself is not there (its name does not resolve): the request to its
    // callback, as the browser is sent there, is what counts.
    const callback = page.waitForRequest((request) => request.url().startsWith(REDIRECT));
    await page.click('#password-form button');
    const callbackUrl = (await callback).url();
    await context.close();
    expect(new URL(callbackUrl).searchParams.get('code')).toBeTruthy();
    // No Login key: the person signed in for the application, not for the platform's API.
    expect(await env().loginKeys(name)).toEqual([]);

    // The code's state Secret expires 60 s after it was made (its creation time has whole seconds).
    const codeEntry = await env().gateway.core.readNamespacedSecret({
      name: stateSecretName('AuthorizationCode', new URL(callbackUrl).searchParams.get('code') ?? ''),
      namespace: env().gateway.platformNamespace,
    });
    const codeLifetime =
      Date.parse(codeEntry.metadata?.annotations?.[OIDC_EXPIRES_AT_ANNOTATION] ?? '') -
      Date.parse(String(codeEntry.metadata?.creationTimestamp));
    expect(codeLifetime).toBeGreaterThanOrEqual(59_000);
    expect(codeLifetime).toBeLessThanOrEqual(61_000);

    const tokens = await exchange(rp, started, callbackUrl);
    const claims = tokens.claims();
    expect(claims).toMatchObject({
      iss: `${env().platformUrl}/oidc`,
      aud: 'argocd',
      sub: name,
      preferred_username: name,
      email: `${name}@example.com`,
      nonce: started.nonce,
    });
    expect(claims?.groups).toEqual(['developers', `platform:team:${team}`].sort());
    // Lifetimes (docs/login.md): ID and access tokens an hour.
    expect((claims?.exp ?? 0) - (claims?.iat ?? 0)).toBe(3600);
    expect(tokens.expires_in).toBe(3600);
    const header = JSON.parse(Buffer.from(tokens.id_token?.split('.')[0] ?? '', 'base64url').toString());
    expect(header.alg).toBe('ES256');
    const userinfo = await client.fetchUserInfo(rp.config, tokens.access_token, name);
    expect(userinfo.email).toBe(`${name}@example.com`);

    // The refresh token is an OwnedAccessKey holding its keyed hash only, naming the client.
    const refreshToken = tokens.refresh_token ?? '';
    expect(refreshToken).not.toBe('');
    const [stored, ...others] = await refreshKeysOf(env(), name);
    expect(others).toEqual([]);
    expect(stored?.spec.oidcProvider).toMatchObject({ clientId: 'argocd', nonce: started.nonce });
    expect(stored?.spec.oidcProvider.scopes).toContain('openid');
    expect(stored?.spec.ttl).toBe(14 * 24 * 3600);
    expect(JSON.stringify(stored)).not.toContain(refreshToken);

    // Sessions and grants (docs/login.md) last 14 days too: this person's entries, from their
    // creation (whole seconds) to their expiry annotation.
    for (const model of ['session', 'grant']) {
      const entries = (
        await env().gateway.core.listNamespacedSecret({
          namespace: env().gateway.platformNamespace,
          labelSelector: `${OIDC_MODEL_LABEL}=${model}`,
        })
      ).items.filter(
        (secret) =>
          JSON.parse(Buffer.from(secret.data?.payload ?? '', 'base64').toString('utf8') || '{}').accountId ===
          name,
      );
      expect(entries.length, `${model} entries of ${name}`).toBeGreaterThan(0);
      for (const entry of entries) {
        const lifetime =
          Date.parse(entry.metadata?.annotations?.[OIDC_EXPIRES_AT_ANNOTATION] ?? '') -
          Date.parse(String(entry.metadata?.creationTimestamp));
        expect(lifetime, model).toBeGreaterThanOrEqual(14 * 24 * 3600_000 - 1000);
        expect(lifetime, model).toBeLessThanOrEqual(14 * 24 * 3600_000 + 1000);
      }
    }

    const refreshed = await client.refreshTokenGrant(rp.config, refreshToken);
    expect(refreshed.claims()).toMatchObject({ sub: name, email: `${name}@example.com` });

    // The same refresh token with a wrong client secret: invalid_client.
    const impostor = await relyingParty(env(), 'argocd', 'not the secret', REDIRECT);
    expect(
      await refusal(client.refreshTokenGrant(impostor.config, refreshed.refresh_token ?? refreshToken)),
    ).toEqual({
      status: 401,
      error: 'invalid_client',
    });
  });

  it("signs a person in through one of the platform's connectors (its upstream OpenID provider)", async () => {
    const { oidc } = env();
    const account = uniqueName('opconnector');
    oidc.accounts.set(account, { claims: { preferred_username: account, email: `${account}@example.com` } });
    await env().configure(`auth:
${oidcSection(env())}
${oidcProviderSection([{ clientId: 'argocd', clientSecret: SECRET, redirectURIs: [REDIRECT] }])}`);
    const rp = await relyingParty(env(), 'argocd', SECRET, REDIRECT);
    const started = await authorization(rp);
    const agent = browserFor(env());
    const loginPage = await agent.followUntil(started.url, `${env().platformUrl}/auth/login`);
    // The login page's connector link carries the interaction, as the page renders it.
    const page = await agent.request(loginPage);
    expect(page.text).toContain(`/auth/oidc/login${new URL(loginPage).search.replace(/&/g, '&amp;')}`);
    const start = await agent.request(`${env().platformUrl}/auth/oidc/login${new URL(loginPage).search}`);
    expect(start.status, start.text).toBe(303);
    const callback = await agent.followUntil(start.location as string, REDIRECT, {
      path: /^\/interaction\//,
      fields: { username: account },
    });
    const claims = (await exchange(rp, started, callback)).claims();
    expect(claims).toMatchObject({ preferred_username: account, email: `${account}@example.com` });
    // The sign-in made the User as a login does, and minted no Login key.
    expect(claims?.sub).toBeTruthy();
    expect(await env().loginKeys(String(claims?.sub))).toEqual([]);
  });

  it("docs/login.md: Argo CD's configuration signs in as Argo CD's PKCE sign-in does", async () => {
    const doc = readDoc(join(repoRoot, 'docs', 'login.md'));
    const file = (name: string) => doc.blocks.find((block) => block.attrs.example === name)?.text ?? '';
    const argocd = parseYaml(file('argocd-cm')) as { data: { url: string; 'oidc.config': string } };
    const oidcConfig = parseYaml(argocd.data['oidc.config']) as {
      issuer: string;
      clientID: string;
      enablePKCEAuthentication: boolean;
      requestedScopes: string[];
    };
    expect(oidcConfig.enablePKCEAuthentication).toBe(true);
    // The issuer, pointed at this test's gateway.
    const issuer = `${env().platformUrl}${new URL(oidcConfig.issuer).pathname}`;
    expect(issuer).toBe(`${env().platformUrl}/oidc`);
    await env().configure(file('platform-config-argocd'));
    const { name, team } = await person('argocd password 1');
    const origin = new URL(argocd.data.url).origin;
    const redirect = `${argocd.data.url}/pkce/verify`;
    const dispatcher = new Agent({ connect: { ca: env().caPem } });

    // Argo CD's browser reads discovery from its own origin.
    const discovery = await undiciFetch(`${issuer}/.well-known/openid-configuration`, {
      dispatcher,
      headers: { origin },
    });
    expect(discovery.headers.get('access-control-allow-origin')).toBeTruthy();
    const metadata = (await discovery.json()) as { scopes_supported: string[]; token_endpoint: string };
    for (const scope of oidcConfig.requestedScopes) expect(metadata.scopes_supported).toContain(scope);

    const rp = await relyingParty(env(), oidcConfig.clientID, '', redirect, client.None());
    const started = await authorization(rp, { scope: oidcConfig.requestedScopes.join(' ') });
    const agent = new ScriptedAgent([env().caPem]);
    const loginPage = await agent.followUntil(started.url, `${env().platformUrl}/auth/login`);
    const posted = await agent.request(
      `${env().platformUrl}/auth/password/login${new URL(loginPage).search}`,
      {
        method: 'POST',
        form: { username: name, password: 'argocd password 1' },
      },
    );
    const callback = new URL(await agent.followUntil(posted.location as string, redirect));

    // The code exchanged by the browser, from Argo CD's origin: no secret, the PKCE verifier.
    const token = await undiciFetch(metadata.token_endpoint, {
      dispatcher,
      method: 'POST',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: callback.searchParams.get('code') ?? '',
        redirect_uri: redirect,
        code_verifier: started.verifier,
        client_id: oidcConfig.clientID,
      }).toString(),
    });
    expect(token.status).toBe(200);
    expect(token.headers.get('access-control-allow-origin')).toBe(origin);
    const { id_token: idToken } = (await token.json()) as { id_token: string };
    const claims = decodeJwt(idToken);
    expect(claims).toMatchObject({ iss: issuer, aud: 'argocd', sub: name, email: `${name}@example.com` });
    expect(claims.groups).toContain(`platform:team:${team}`);
  });

  it("signs ID tokens with the platform's signing keys, and follows their rotation", async () => {
    await env().configure(
      oidcProviderSection([{ clientId: 'argocd', clientSecret: SECRET, redirectURIs: [REDIRECT] }]),
    );
    const g = env().gateway;
    const dispatcher = new Agent({ connect: { ca: env().caPem } });
    const kids = async (path: string) => {
      const jwks = (await (await undiciFetch(`${env().platformUrl}${path}`, { dispatcher })).json()) as {
        keys: { kid: string; d?: string }[];
      };
      expect(jwks.keys.every((key) => key.d === undefined)).toBe(true);
      return jwks.keys.map((key) => key.kid);
    };
    const signIn = async () => {
      const user = await env().userWithPassword('oprotation', 'rotation password 1');
      const rp = await relyingParty(env(), 'argocd', SECRET, REDIRECT);
      const started = await authorization(rp);
      const agent = new ScriptedAgent([env().caPem]);
      const loginPage = await agent.followUntil(started.url, `${env().platformUrl}/auth/login`);
      const posted = await agent.request(
        `${env().platformUrl}/auth/password/login${new URL(loginPage).search}`,
        {
          method: 'POST',
          form: { username: user, password: 'rotation password 1' },
        },
      );
      const tokens = await exchange(
        rp,
        started,
        await agent.followUntil(posted.location as string, REDIRECT),
      );
      return decodeProtectedHeader(tokens.id_token ?? '').kid;
    };
    // The provider's keys are the ring that signs direct tokens (the gateway's JWKS).
    const before = await kids('/oidc/jwks');
    expect(before.length).toBeGreaterThan(0);
    expect([...(await kids('/openid/v1/jwks'))].sort()).toEqual([...before].sort());
    expect(await signIn()).toBe(before[0]);

    // A successor starts signing (as a rotation makes it, once published): the provider follows.
    const api = new KubeClient(g.kc);
    const path = `/api/v1/namespaces/${g.platformNamespace}/secrets/${SIGNING_KEYS_SECRET}`;
    const secret = await api.request<{ metadata: { resourceVersion: string }; data: Record<string, string> }>(
      {
        method: 'GET',
        path,
      },
    );
    const { kid, privateJwk } = await generateSigningKey();
    const now = new Date().toISOString();
    const ring = [
      ...ringFromSecret(secret),
      { kid, alg: 'ES256', privateJwk, createdAt: now, signsFrom: now },
    ];
    await api.request({
      method: 'PATCH',
      path,
      contentType: 'application/merge-patch+json',
      body: {
        metadata: { resourceVersion: secret.metadata.resourceVersion },
        data: { 'keys.json': Buffer.from(JSON.stringify(ring)).toString('base64') },
      },
    });
    await eventually(
      async () => (await kids('/oidc/jwks')).includes(kid),
      60_000,
      'the new key in /oidc/jwks',
    );
    expect(await kids('/oidc/jwks')).toEqual(expect.arrayContaining(before));
    expect(await signIn()).toBe(kid);
  });

  it('refuses a redirect URI the client did not register, without redirecting there', async () => {
    await env().configure(
      oidcProviderSection([{ clientId: 'argocd', clientSecret: SECRET, redirectURIs: [REDIRECT] }]),
    );
    const rp = await relyingParty(env(), 'argocd', SECRET, 'https://attacker.example.test/callback');
    const started = await authorization(rp);
    const answer = await fetch(started.url, { redirect: 'manual' }).catch(() => undefined);
    // Node's fetch does not trust the test CA: ask through the relying party's own fetch instead.
    const response =
      answer ?? (await rp.config[client.customFetch]?.(started.url, { redirect: 'manual' } as never));
    expect(response?.status).toBe(400);
    expect(response?.headers.get('location')).toBeNull();
    expect(await response?.text()).toContain('redirect_uri');
  });
});
