import type { JWK } from 'jose';
import type Provider from 'oidc-provider';
import type { Adapter, GrantInstance } from 'oidc-provider';
import type { ConfigStatus } from '../../api/config.ts';
import type { User } from '../../api/identity.ts';
import { currentSigningKey, type SigningKey } from '../../identity/signing-keys.ts';
import { errorPage } from '../pages.ts';
import { OIDC_PROVIDER_BASE, providerClients, redirectAllowed, SCOPE_CLAIMS, userClaims } from './clients.ts';

/**
 * What oidc-provider is told (provider.ts builds one provider per issuer, configuration and
 * keys): the platform's clients, keys and lifetimes, PKCE for every client, consent implied, the
 * platform's own error page, and the login page as the interaction.
 */

export const REFRESH_TOKEN_TTL_SECONDS = 14 * 24 * 3600;

/** The JWKS of the provider from the signing-key ring: the key signing now first (oidc-provider signs with the first). */
export function providerJwks(ring: readonly SigningKey[], now: number): { keys: JWK[] } {
  const signing = currentSigningKey(ring, now);
  const ordered = signing ? [signing, ...ring.filter((key) => key.kid !== signing.kid)] : [...ring];
  return { keys: ordered.map((key) => ({ ...key.privateJwk, kid: key.kid, alg: key.alg, use: 'sig' })) };
}

export interface ProviderConfigurationInput {
  readonly oidc: ConfigStatus['oidc'];
  readonly jwks: { keys: JWK[] };
  /** Signs oidc-provider's cookies. */
  readonly cookieKey: string;
  /** The storage of each model (`RefreshToken`, `Session`, ...). */
  readonly model: (name: string) => Adapter;
  /** The User named so, undefined when there is none. */
  readonly user: (name: string) => Promise<User | undefined>;
  /** A grant of the provider being configured. */
  readonly grant: (fields: { accountId: string; clientId: string }) => GrantInstance;
}

export function providerConfiguration(input: ProviderConfigurationInput): Record<string, unknown> {
  const { model, user: userNamed } = input;
  return {
    adapter: function ModelAdapter(name: string) {
      return model(name);
    },
    clients: providerClients(input.oidc),
    jwks: input.jwks,
    cookies: { keys: [input.cookieKey] },
    pkce: { required: () => true },
    // Lifetimes (seconds), oidc-provider's defaults stated: codes a minute, tokens an hour,
    // refresh tokens, sessions and grants 14 days (a refresh token's key has it as spec.ttl).
    ttl: {
      AuthorizationCode: 60,
      AccessToken: 3600,
      IdToken: 3600,
      Interaction: 3600,
      RefreshToken: REFRESH_TOKEN_TTL_SECONDS,
      Session: REFRESH_TOKEN_TTL_SECONDS,
      Grant: REFRESH_TOKEN_TTL_SECONDS,
    },
    conformIdTokenClaims: false,
    claims: Object.fromEntries(Object.entries(SCOPE_CLAIMS).map(([scope, claims]) => [scope, [...claims]])),
    scopes: ['openid', 'offline_access', ...Object.keys(SCOPE_CLAIMS).filter((scope) => scope !== 'openid')],
    // No end-session endpoint: a relying party's sign-out ends its own session only.
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true },
      rpInitiatedLogout: { enabled: false },
    },
    // Browsers may call the token endpoint for public (PKCE-only) clients, and UserInfo, from
    // the origins of the client's redirect URIs only (a single-page application's sign-in).
    clientBasedCORS: (
      ctx: { oidc: { route: string } },
      origin: string,
      client: { clientAuthMethod: string; redirectUris: string[] },
    ) =>
      origin !== 'null' &&
      (ctx.oidc.route === 'userinfo' || client.clientAuthMethod === 'none') &&
      client.redirectUris.some((uri) => URL.parse(uri)?.origin === origin),
    interactions: {
      url: (_ctx: unknown, interaction: { uid: string }) =>
        `${OIDC_PROVIDER_BASE}/interaction/${interaction.uid}`,
    },
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(type: string): boolean }) =>
      client.grantTypeAllowed('refresh_token'),
    findAccount: async (_ctx: unknown, id: string) => {
      const user = await userNamed(id);
      if (!user || user.spec.disabled === true || user.metadata.name !== id) return undefined;
      return { accountId: id, claims: async () => userClaims(user) };
    },
    // The clients are the platform admin's: what they ask for is granted without a consent page.
    loadExistingGrant: async (ctx: {
      oidc: { client: { clientId: string }; session: { accountId: string }; params: { scope?: string } };
    }) => {
      const grant = input.grant({
        accountId: ctx.oidc.session.accountId,
        clientId: ctx.oidc.client.clientId,
      });
      grant.addOIDCScope(ctx.oidc.params.scope ?? 'openid');
      grant.addOIDCClaims(Object.values(SCOPE_CLAIMS).flat());
      await grant.save();
      return grant;
    },
    renderError: async (
      ctx: { type: string; body: unknown },
      out: { error_description?: string; error?: string },
    ) => {
      ctx.type = 'html';
      ctx.body = errorPage(out.error_description ?? out.error ?? 'the request was refused');
    },
  };
}

/** `oidc.wildcardRedirect`: a client's redirect URIs may hold `*`, besides oidc-provider's exact match. */
export function allowWildcardRedirects(provider: Provider): void {
  const exact = provider.Client.prototype.redirectUriAllowed;
  provider.Client.prototype.redirectUriAllowed = function (this: { redirectUris?: string[] }, uri: string) {
    return exact.call(this, uri) || redirectAllowed(this.redirectUris ?? [], uri, true);
  };
}
