import * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import type { LoginEnv, StoredKey } from './login-env.ts';

/**
 * A relying party of the platform as an OpenID provider, as an application (Argo CD, Grafana)
 * is one: openid-client (the certified relying-party library) discovering `<platform>/oidc`, over
 * the gateway's HTTPS with its test CA, authenticating with HTTP Basic, PKCE and nonce on every
 * sign-in.
 */

export interface RelyingParty {
  readonly config: client.Configuration;
  readonly redirectUri: string;
}

export const OIDC_SCOPES = 'openid profile email groups offline_access';

export async function relyingParty(
  env: LoginEnv,
  clientId: string,
  clientSecret: string,
  redirectUri: string,
  authentication: client.ClientAuth = client.ClientSecretBasic(clientSecret),
): Promise<RelyingParty> {
  const dispatcher = new Agent({ connect: { ca: env.caPem } });
  const customFetch = ((url: string, options: Record<string, unknown>) =>
    undiciFetch(url, { ...options, dispatcher })) as unknown as client.CustomFetch;
  const config = await client.discovery(
    new URL(`${env.platformUrl}/oidc`),
    clientId,
    undefined,
    authentication,
    { [client.customFetch]: customFetch },
  );
  config[client.customFetch] = customFetch;
  return { config, redirectUri };
}

/** A sign-in about to start: its authorization URL and what the callback is checked against. */
export interface Authorization {
  readonly url: string;
  readonly verifier: string;
  readonly state: string;
  readonly nonce: string;
}

export async function authorization(
  rp: RelyingParty,
  overrides: Record<string, string> = {},
): Promise<Authorization> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(rp.config, {
    redirect_uri: rp.redirectUri,
    scope: OIDC_SCOPES,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...overrides,
  });
  return { url: url.toString(), verifier, state, nonce };
}

/** The code exchange of openid-client: ID token checked (issuer, audience, signature, nonce), PKCE, state. */
export function exchange(rp: RelyingParty, started: Authorization, callback: string) {
  return client.authorizationCodeGrant(rp.config, new URL(callback), {
    pkceCodeVerifier: started.verifier,
    expectedState: started.state,
    expectedNonce: started.nonce,
  });
}

/** The YAML of an `oidc` section with these clients. */
export function oidcProviderSection(
  clients: { clientId: string; clientSecret: string; redirectURIs: string[] }[],
  wildcardRedirect = false,
): string {
  const lines = ['oidc:', `  wildcardRedirect: ${wildcardRedirect}`, '  clients:'];
  for (const entry of clients)
    lines.push(
      `    - name: ${entry.clientId}`,
      `      clientId: ${entry.clientId}`,
      `      clientSecret: ${entry.clientSecret}`,
      `      redirectURIs: [${entry.redirectURIs.map((uri) => JSON.stringify(uri)).join(', ')}]`,
    );
  return lines.join('\n');
}

/** What a refused grant says: the HTTP status and the OAuth `error`, from openid-client's errors. */
export async function refusal(
  attempt: Promise<unknown>,
): Promise<{ status: number; error: string } | undefined> {
  try {
    await attempt;
    return undefined;
  } catch (err) {
    if (err instanceof client.ResponseBodyError) return { status: err.status, error: err.error };
    if (err instanceof client.WWWAuthenticateChallengeError)
      return { status: err.status, error: String(err.cause[0]?.parameters.error ?? '') };
    throw err;
  }
}

/** The refresh-token keys (`OIDCRefreshToken`) the platform as OpenID provider stored for `user`. */
export async function refreshKeysOf(env: LoginEnv, user: string): Promise<StoredKey[]> {
  const list = (await env.gateway.custom.listClusterCustomObject({
    group: 'management.platform',
    version: 'v1',
    plural: 'ownedaccesskeys',
    fieldSelector: `spec.user=${user}`,
  })) as { items: StoredKey[] };
  return list.items.filter((key) => key.spec.type === 'OIDCRefreshToken');
}
