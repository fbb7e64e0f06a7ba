import type { ConfigStatus } from '../../api/config.ts';
import type { User } from '../../api/identity.ts';
import { teamGroup } from '../../identity/groups.ts';

/**
 * The pure parts of the platform as an OpenID provider (Config `oidc`): which clients the
 * provider knows, how a wildcard redirect URI matches, and the claims a User gives.
 */

/** Where the provider is served on the gateway's address; the issuer is `<platform URL>/oidc`. */
export const OIDC_PROVIDER_BASE = '/oidc';

/** What an interaction uid looks like (oidc-provider's nanoid), for the login to carry it. */
export const INTERACTION_UID = /^[A-Za-z0-9_-]{1,64}$/;

/** The signing algorithm of ID tokens: the platform's signing keys are ES256 (`signing-keys.ts`). */
export const ID_TOKEN_ALGORITHM = 'ES256';

/** Scopes the provider knows, and the claims each one releases (into the ID token too). */
export const SCOPE_CLAIMS: Readonly<Record<string, readonly string[]>> = {
  openid: ['sub'],
  profile: ['preferred_username', 'name'],
  email: ['email'],
  groups: ['groups'],
};

type OidcSection = NonNullable<ConfigStatus['oidc']>;

/** Whether the provider is served: `oidc.enabled` is true unless set to false (the spec: enabled by default). */
export function openIdProviderEnabled(config: ConfigStatus): boolean {
  return config.oidc?.enabled !== false;
}

/** oidc-provider's client metadata (RFC 7591 names) for one configured client. */
export interface ProviderClient {
  readonly client_id: string;
  readonly client_name?: string;
  readonly client_secret?: string;
  readonly redirect_uris: string[];
  readonly grant_types: string[];
  readonly response_types: string[];
  readonly token_endpoint_auth_method: string;
  readonly id_token_signed_response_alg: string;
}

/**
 * The clients of `oidc.clients`: confidential (a `clientSecret`, sent by HTTP Basic or in the
 * form) or public (none: PKCE alone binds the code), the authorization code and refresh token
 * grants only. A client without a `clientId`, and any but the first with the same `clientId`, is
 * left out (admission does not check this section; oidc-provider refuses duplicates at start).
 */
export function providerClients(oidc: OidcSection | undefined): ProviderClient[] {
  const seen = new Set<string>();
  const clients: ProviderClient[] = [];
  for (const client of oidc?.clients ?? []) {
    const clientId = client.clientId ?? '';
    if (!clientId || seen.has(clientId)) continue;
    seen.add(clientId);
    const secret = client.clientSecret ?? '';
    clients.push({
      client_id: clientId,
      ...(client.name ? { client_name: client.name } : {}),
      ...(secret ? { client_secret: secret } : {}),
      redirect_uris: [...(client.redirectURIs ?? [])],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: secret ? 'client_secret_basic' : 'none',
      id_token_signed_response_alg: ID_TOKEN_ALGORITHM,
    });
  }
  return clients;
}

/**
 * Whether `uri` matches a registered redirect URI holding `*` (`oidc.wildcardRedirect`): each `*`
 * stands for one or more characters that end no part of a URL (no `/`, `?`, `#`, `@`, `:`, `\`),
 * so `https://*.example.com/callback` allows `https://app.example.com/callback` but neither
 * `https://evil.com/x?.example.com/callback` nor `https://evil.com#.example.com/callback`.
 * Everything else matches exactly; a `uri` that is no URL matches nothing.
 */
export function wildcardRedirectMatches(pattern: string, uri: string): boolean {
  if (!pattern.includes('*') || URL.parse(uri) === null) return false;
  const parts = pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('[^/?#@:\\\\]+')}$`).test(uri);
}

/** Whether a client with `registered` redirect URIs may be sent to `uri`. */
export function redirectAllowed(registered: readonly string[], uri: string, wildcards: boolean): boolean {
  if (registered.includes(uri)) return true;
  return wildcards && registered.some((pattern) => wildcardRedirectMatches(pattern, uri));
}

/**
 * The claims of a User for a relying party: `sub` the User's object name (stable, what the
 * platform's keys name), `preferred_username` and `name`, `email`, and `groups` as the platform
 * computes them for Kubernetes (`groups.ts`): the groups the person's sign-in brought
 * (`spec.groups`) and `platform:team:<team>` for each team they belong to.
 */
export function userClaims(user: User): Record<string, unknown> {
  const name = user.metadata.name ?? '';
  const username = user.spec.username || name;
  const groups = [...new Set([...(user.spec.groups ?? []), ...(user.status?.teams ?? []).map(teamGroup)])];
  return {
    sub: name,
    preferred_username: username,
    name: user.spec.displayName || username,
    // No `email_verified`: a User's email is what an admin or a sign-in wrote, checked by no one here.
    ...(user.spec.email ? { email: user.spec.email } : {}),
    groups: groups.sort(),
  };
}

/** Paths under `/oidc` where a client authenticates with its secret. */
export const CLIENT_AUTHENTICATION_PATHS: ReadonlySet<string> = new Set([
  `${OIDC_PROVIDER_BASE}/token`,
  `${OIDC_PROVIDER_BASE}/token/revocation`,
]);

/**
 * The client a token or revocation request names (HTTP Basic's user, else the form's
 * `client_id`), as the subject its failed authentications are counted against:
 * `oidc-client:<id>`, which no key or user name can be (object names have no `:`). Undefined
 * when the request names none.
 */
export function clientAuthenticationSubject(
  authorization: string | undefined,
  body: string,
): string | undefined {
  let clientId: string | undefined;
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization ?? '');
  if (basic) {
    const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    try {
      clientId = decodeURIComponent((colon < 0 ? decoded : decoded.slice(0, colon)).replace(/\+/g, ' '));
    } catch {
      clientId = undefined;
    }
  } else {
    clientId = new URLSearchParams(body).get('client_id') ?? undefined;
  }
  return clientId ? `oidc-client:${clientId}` : undefined;
}
