import { timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import type { ProviderConfig } from './connectors.ts';
import { type ExternalIdentity, identityFromClaims, LoginRefused } from './identity.ts';

/**
 * An OIDC relying party for one connector, through openid-client (a certified relying-party
 * library): discovery from `issuerUrl` (TLS with `caFile`, or none with `insecureCa`), the
 * authorization-code flow with PKCE (S256), `state` and `nonce`, the ID token's signature,
 * issuer, audience (`clientId`, authorized party), expiry and nonce checked by the library, the
 * `resource` parameter on the token request, UserInfo when `getUserInfo`.
 */

type OidcConfig = ProviderConfig<'oidc'>;

/** What must survive from the redirect to the callback (sealed in a cookie, never readable by the browser). */
export interface OidcTransaction {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
}

/** The provider or the callback did not complete the sign-in (bad state, nonce, code, token...). */
export class ProviderLoginFailed extends LoginRefused {
  override readonly name = 'ProviderLoginFailed';
  override readonly code = 401;
}

/** The connector lacks what it needs to run (issuer, client, redirect URI). */
export class ConnectorMisconfigured extends LoginRefused {
  override readonly name = 'ConnectorMisconfigured';
  override readonly code = 503;
}

async function fetchFor(config: OidcConfig): Promise<client.CustomFetch | undefined> {
  if (!config.caFile && config.insecureCa !== true) return undefined;
  const ca = config.caFile ? await readFile(config.caFile, 'utf8') : undefined;
  const dispatcher = new Agent({
    connect: { ...(ca ? { ca } : {}), rejectUnauthorized: config.insecureCa !== true },
  });
  return ((url: string, options: client.CustomFetchOptions) =>
    undiciFetch(url, { ...(options as object), dispatcher } as never)) as unknown as client.CustomFetch;
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

const isLoopback = (url: URL) => ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);

export class OidcConnector {
  private configuration: Promise<client.Configuration> | undefined;

  constructor(
    readonly id: string,
    private readonly config: OidcConfig,
  ) {}

  private discover(): Promise<client.Configuration> {
    if (!this.configuration) {
      const { issuerUrl, clientId } = this.config;
      if (!issuerUrl || !clientId || !this.config.redirectURI)
        return Promise.reject(
          new ConnectorMisconfigured(
            `sign-in through "${this.id}" needs issuerUrl, clientId and redirectURI`,
          ),
        );
      this.configuration = (async () => {
        const issuer = new URL(issuerUrl);
        const customFetch = await fetchFor(this.config);
        const insecure = issuer.protocol === 'http:' && isLoopback(issuer);
        const configuration = await client.discovery(
          issuer,
          clientId,
          this.config.clientSecret ? { client_secret: this.config.clientSecret } : undefined,
          this.config.clientSecret ? client.ClientSecretBasic(this.config.clientSecret) : client.None(),
          {
            ...(customFetch ? { [client.customFetch]: customFetch } : {}),
            ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
          },
        );
        if (customFetch) configuration[client.customFetch] = customFetch;
        return configuration;
      })();
      // A failed discovery is tried again by the next sign-in.
      this.configuration.catch(() => {
        this.configuration = undefined;
      });
    }
    return this.configuration.catch((err: unknown) => {
      if (err instanceof LoginRefused) throw err;
      throw new ConnectorMisconfigured(
        `the identity provider of "${this.id}" cannot be reached or is not an OpenID provider`,
      );
    });
  }

  /** The provider's authorization URL to send the browser to, and the transaction to keep. */
  async start(): Promise<{ url: URL; transaction: OidcTransaction }> {
    const configuration = await this.discover();
    const transaction: OidcTransaction = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      codeVerifier: client.randomPKCECodeVerifier(),
    };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.config.redirectURI as string,
      scope: ['openid', ...this.config.scopes].join(' '),
      state: transaction.state,
      nonce: transaction.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(transaction.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, transaction };
  }

  /**
   * Completes the sign-in at the callback: `callbackUrl` is the URL the browser came back with
   * (as the redirect URI names it, with the provider's query). Every failure of the exchange or
   * of the ID token is {@link ProviderLoginFailed}; the provider's own messages are not shown.
   */
  async finish(callbackUrl: URL, transaction: OidcTransaction): Promise<ExternalIdentity> {
    const configuration = await this.discover();
    const error = callbackUrl.searchParams.get('error');
    if (error)
      throw new ProviderLoginFailed(
        `the identity provider refused the sign-in (${error.slice(0, 64).replace(/[^\w.-]/g, '')})`,
      );
    // Checked here too (the library checks it again) so that a forged callback gets its own answer.
    if (!sameText(callbackUrl.searchParams.get('state') ?? '', transaction.state))
      throw new ProviderLoginFailed(
        'the state of the callback does not match this sign-in; start the sign-in again',
      );
    const current = new URL(this.config.redirectURI as string);
    current.search = callbackUrl.search;
    let claims: Record<string, unknown>;
    let refreshToken: string | undefined;
    try {
      const tokens = await client.authorizationCodeGrant(
        configuration,
        current,
        {
          pkceCodeVerifier: transaction.codeVerifier,
          expectedState: transaction.state,
          expectedNonce: transaction.nonce,
          idTokenExpected: true,
        },
        this.config.resource ? { resource: this.config.resource } : undefined,
      );
      const idClaims = tokens.claims();
      if (!idClaims) throw new ProviderLoginFailed('the identity provider returned no ID token');
      claims = { ...idClaims };
      if (this.config.getUserInfo === true) {
        const info = await client.fetchUserInfo(configuration, tokens.access_token, idClaims.sub);
        claims = { ...info, ...idClaims };
      }
      refreshToken = tokens.refresh_token;
    } catch (err) {
      if (err instanceof LoginRefused) throw err;
      throw new ProviderLoginFailed(`the sign-in could not be completed: ${describe(err)}`);
    }
    const identity = identityFromClaims(this.id, claims, this.config);
    return refreshToken ? { ...identity, connectorData: JSON.stringify({ refreshToken }) } : identity;
  }

  /** Where to send the browser to end the provider's session, when it has an end-session endpoint. */
  async endSessionUrl(): Promise<URL | undefined> {
    const configuration = await this.discover();
    if (!configuration.serverMetadata().end_session_endpoint) return undefined;
    return client.buildEndSessionUrl(configuration, {
      client_id: this.config.clientId as string,
      ...(this.config.postLogoutRedirectURI
        ? { post_logout_redirect_uri: this.config.postLogoutRedirectURI }
        : {}),
    });
  }
}

/**
 * A short, safe reason for a failed exchange: the library's error code (state, nonce, audience,
 * grant...) without token contents.
 */
function describe(err: unknown): string {
  if (err instanceof client.ResponseBodyError) return `the provider answered ${err.error}`;
  if (err instanceof client.AuthorizationResponseError) return `the provider answered ${err.error}`;
  const code = (err as { code?: unknown }).code;
  const known: Record<string, string> = {
    OAUTH_JWT_CLAIM_COMPARISON_FAILED: 'a claim of the ID token (audience, issuer or nonce) does not match',
    OAUTH_INVALID_RESPONSE: 'the provider answer is invalid',
    OAUTH_JWS_SIGNATURE_VERIFICATION_FAILED: 'the ID token signature is invalid',
    OAUTH_JWT_TIMESTAMP_CHECK_FAILED: 'the ID token is expired or not yet valid',
  };
  if (typeof code === 'string' && known[code]) return known[code];
  return typeof code === 'string' ? code.toLowerCase().replace(/_/g, ' ') : 'the provider answer was refused';
}
