import { expect } from 'vitest';
import { userNameFor } from '../../../src/login/outcome.ts';
import type { SamlConnector } from '../../../src/login/saml.ts';
import { formOf, ScriptedAgent } from './browse.ts';
import type { LoginEnv } from './login-env.ts';
import type { ProviderStandIns } from './provider-stand-ins.ts';

/** Helpers of the tests that sign in through the hosted providers' stand-ins. */

export function standIns(env: LoginEnv): ProviderStandIns {
  if (!env.providers) throw new Error('provider stand-ins not started (useLoginEnv({ providers: true }))');
  return env.providers;
}

/** The access key on the platform's key page, if any. */
export const keyOn = (text: string) => /<code id="access-key">([^<]+)<\/code>/.exec(text)?.[1];

/**
 * A refused sign-in's error page: its reason, and no key; with `status`, exactly that status,
 * else any error status.
 */
export function expectRefusedSignIn(page: { status: number; text: string }, reason: RegExp, status?: number) {
  if (status === undefined) expect(page.status, page.text).toBeGreaterThanOrEqual(400);
  else expect(page.status, page.text).toBe(status);
  expect(/<p class="error" role="alert" id="error">([^<]*)<\/p>/.exec(page.text)?.[1]).toMatch(reason);
  expect(keyOn(page.text)).toBeUndefined();
}

/** A browser that trusts the platform (the gateway's CA) and the providers' stand-ins. */
export const browserFor = (env: LoginEnv) =>
  new ScriptedAgent([env.caPem, env.oidc.caPem, env.providers?.addresses.ca ?? ''].filter(Boolean));

/** Starts a sign-in through `id` in `agent` and returns the callback URL the provider sent it to. */
export async function callbackFor(env: LoginEnv, agent: ScriptedAgent, id: string, username: string) {
  const start = await agent.request(`${env.platformUrl}/auth/${id}/login`);
  expect(start.status, start.text).toBe(303);
  const callback = await agent.followUntil(
    start.location as string,
    `${env.platformUrl}/auth/${id}/callback`,
    {
      path: /authorize$|^\/interaction\//,
      fields: { username },
    },
  );
  return { callback, authorizeUrl: new URL(start.location as string) };
}

/** A whole sign-in through `id`: the page the platform answers at the end, and the key on it. */
export async function signIn(env: LoginEnv, id: string, username: string, agent = browserFor(env)) {
  const { callback, authorizeUrl } = await callbackFor(env, agent, id, username);
  const page = await agent.request(callback);
  return { ...page, key: keyOn(page.text), authorizeUrl };
}

/**
 * A SAML sign-in through the platform's endpoints as a browser makes it: `/auth/<id>/login` (the
 * sealed state cookie, a redirect with the AuthnRequest), the identity provider's form, and its
 * auto-submitted form posting the response to the platform's ACS (`/auth/<id>/callback`).
 * The identity provider must know the service provider (`registerSamlServiceProvider`).
 */
export async function samlSignIn(env: LoginEnv, id: string, username: string, agent = browserFor(env)) {
  const start = await agent.request(`${env.platformUrl}/auth/${id}/login`);
  expect(start.status, start.text).toBe(303);
  const idpUrl = start.location as string;
  const login = await agent.request(idpUrl);
  expect(login.status, login.text).toBe(200);
  const posting = await agent.submitForm(login.text, idpUrl, { username });
  expect(posting.status, posting.text).toBe(200);
  expect(formOf(posting.text).action).toBe(`${env.platformUrl}/auth/${id}/callback`);
  const page = await agent.submitForm(posting.text, idpUrl);
  return { ...page, key: keyOn(page.text), start, authnRequest: new URL(idpUrl) };
}

/** Registers the platform's SAML service provider of connector `id`, as configured now, at the test IdP. */
export function registerSamlServiceProvider(env: LoginEnv, id: string): void {
  const method = env.connectors.method(env.config().auth, id);
  if (method?.kind !== 'saml') throw new Error(`${id} is no SAML connector`);
  env.saml.registerServiceProvider((env.connectors.connectorFor(method) as SamlConnector).metadata());
}

/** The User a username maps to, as stored (undefined when there is none). */
export async function storedUser(env: LoginEnv, username: string) {
  try {
    return (await env.gateway.custom.getClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'users',
      name: userNameFor(username),
    })) as { spec: Record<string, unknown>; metadata: { annotations?: Record<string, string> } };
  } catch {
    return undefined;
  }
}

/** Posts a cluster-manager API key to the platform's form (after opening it, for its cookie). */
export async function postClusterManagerKey(env: LoginEnv, agent: ScriptedAgent, key: string) {
  const form = await agent.request(`${env.platformUrl}/auth/clusterManager/login`);
  expect(form.status).toBe(200);
  expect(form.text).toContain('name="key"');
  const page = await agent.request(`${env.platformUrl}/auth/clusterManager/callback`, {
    method: 'POST',
    form: { key },
  });
  return { ...page, key: keyOn(page.text) };
}

/** Configures the top-level `hostedGit` section for the stand-in, with `extra` lines (4 spaces in). */
export function configureHostedGit(env: LoginEnv, extra = ''): Promise<void> {
  const { hostedGit } = standIns(env);
  return env.configure(`
auth:
  hostedGit:
${clientLines(env, 'hostedGit', hostedGit)}
${extra}
`);
}

/** Configures the top-level `clusterManager` section for the stand-in, with `extra` YAML under `auth`. */
export function configureClusterManager(
  env: LoginEnv,
  options: { insecure?: boolean; extra?: string } = {},
): Promise<void> {
  const { clusterManager } = standIns(env);
  return env.configure(`
auth:
  clusterManager:
    host: ${clusterManager.host}
    bearerToken: ${clusterManager.adminKey()}
    insecure: ${options.insecure ?? true}
${options.extra ?? ''}
`);
}

/** The `auth.oidc` section (YAML, indented under `auth:`) for the test's OpenID provider. */
export function oidcSection(env: LoginEnv): string {
  const { oidc } = env;
  return `  oidc:
    issuerUrl: ${oidc.issuer}
    clientId: ${oidc.clientId}
    clientSecret: ${oidc.clientSecret}
    redirectURI: ${env.oidcCallback}
    caFile: ${oidc.caFile}`;
}

/**
 * The start of the `auth.saml` section (YAML, indented under `auth:`) for the test's SAML identity
 * provider: the platform's callback, the provider's SSO URL and CA. The caller adds the lines the
 * test is about (`ssoIssuer`, attribute names, ...), indented by four spaces.
 */
export function samlSection(env: LoginEnv): string {
  const { saml } = env;
  return `  saml:
    redirectURI: ${env.samlCallback}
    ssoURL: ${saml.ssoUrl}
    caData: ${saml.caData}`;
}

/**
 * The client lines of a connector section (`clientId`, `clientSecret`, `redirectURI`), indented by
 * `indent`: the client registered at a stand-in, and the platform's callback for connector `id`.
 */
export function clientLines(
  env: LoginEnv,
  id: string,
  client: { clientId: string; clientSecret: string },
  indent = '    ',
): string {
  return [
    `clientId: ${client.clientId}`,
    `clientSecret: ${client.clientSecret}`,
    `redirectURI: ${env.platformUrl}/auth/${id}/callback`,
  ]
    .map((line) => `${indent}${line}`)
    .join('\n');
}
