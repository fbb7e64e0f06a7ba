import { timingSafeEqual } from 'node:crypto';
import * as client from 'openid-client';
import { LoginRefused } from './identity.ts';
import { type ProviderTls, providerFetch } from './provider-http.ts';

/**
 * The OAuth 2.0 authorization-code flow every redirecting connector shares, through openid-client
 * (a certified relying-party library): PKCE (S256) and `state` always, `nonce` and a checked ID
 * token for OpenID providers. The server is found by OpenID discovery from an issuer, or given
 * as the static endpoints an OAuth 2.0-only provider documents (the code-hosting and
 * enterprise-identity providers). Token exchanges, refreshes and UserInfo all go through here, so
 * every connector refuses a forged state, a replayed code or a foreign ID token alike.
 */

/** The provider or the callback did not complete the sign-in (bad state, nonce, code, token...). */
export class ProviderLoginFailed extends LoginRefused {
  override readonly name = 'ProviderLoginFailed';
  override readonly code = 401;
}

/** The connector lacks what it needs to run (issuer, client, redirect URI), or its provider cannot be reached. */
export class ConnectorMisconfigured extends LoginRefused {
  override readonly name = 'ConnectorMisconfigured';
  override readonly code = 503;
}

/**
 * The provider no longer accepts the grant a key's identity was refreshed with (revoked, expired,
 * the user removed): the sign-in it came from is over.
 */
export class RefreshRevoked extends LoginRefused {
  override readonly name = 'RefreshRevoked';
  override readonly code = 401;
}

export type ServerLocation =
  /** OpenID Connect discovery from this issuer. */
  | { readonly issuer: string }
  /** A plain OAuth 2.0 server: its documented endpoints (`issuer` only names it). */
  | { readonly issuer: string; readonly authorization: string; readonly token: string };

export interface CodeFlowSettings {
  /** Connector id, in messages. */
  readonly id: string;
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
  readonly redirectURI?: string | undefined;
  readonly server: ServerLocation;
  readonly tls: ProviderTls;
  /** How the client authenticates at the token endpoint: HTTP Basic, or in the form body. */
  readonly clientAuth: 'basic' | 'post';
  /** `resource` on authorization and token requests (RFC 8707). */
  readonly resource?: string | undefined;
}

/** The client fields every OAuth connector's configuration has, as the code flow takes them. */
export const clientOf = (
  id: string,
  config: {
    clientId?: string | undefined;
    clientSecret?: string | undefined;
    redirectURI?: string | undefined;
  },
) => ({ id, clientId: config.clientId, clientSecret: config.clientSecret, redirectURI: config.redirectURI });

/** What survives from the redirect to the callback (sealed in a cookie). */
export interface CodeTransaction {
  readonly state: string;
  readonly codeVerifier: string;
  /** OpenID providers only. */
  readonly nonce?: string | undefined;
}

export interface Grant {
  readonly accessToken: string;
  readonly refreshToken?: string | undefined;
  /** The ID token's claims (OpenID providers; on a refresh only when a new ID token came). */
  readonly claims?: Readonly<Record<string, unknown>> | undefined;
  /** The ID token itself, as the provider signed it (with `claims`). */
  readonly idToken?: string | undefined;
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

const isLoopback = (url: URL) => ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);

/** What the library's error codes mean to a person (a Map: a code is data, never a property name). */
const KNOWN_FAILURES: ReadonlyMap<string, string> = new Map([
  ['OAUTH_JWT_CLAIM_COMPARISON_FAILED', 'a claim of the ID token (audience, issuer or nonce) does not match'],
  ['OAUTH_INVALID_RESPONSE', 'the provider answer is invalid'],
  ['OAUTH_JWS_SIGNATURE_VERIFICATION_FAILED', 'the ID token signature is invalid'],
  ['OAUTH_JWT_TIMESTAMP_CHECK_FAILED', 'the ID token is expired or not yet valid'],
]);

/**
 * A short, safe reason for a failed exchange: the library's error code (state, nonce, audience,
 * grant...) without token contents.
 */
export function describeFailure(err: unknown): string {
  if (err instanceof client.ResponseBodyError) return `the provider answered ${err.error}`;
  if (err instanceof client.AuthorizationResponseError) return `the provider answered ${err.error}`;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return 'the provider answer was refused';
  return KNOWN_FAILURES.get(code) ?? code.toLowerCase().replace(/_/g, ' ');
}

export class AuthorizationCodeClient {
  private configuration: Promise<client.Configuration> | undefined;
  readonly openId: boolean;

  constructor(private readonly settings: CodeFlowSettings) {
    this.openId = !('authorization' in settings.server);
  }

  private configure(): Promise<client.Configuration> {
    if (!this.configuration) {
      const { clientId, clientSecret, redirectURI, server } = this.settings;
      if (!clientId || !redirectURI || !server.issuer)
        return Promise.reject(
          new ConnectorMisconfigured(
            `sign-in through "${this.settings.id}" needs its client id, redirect URI and provider address`,
          ),
        );
      const auth = !clientSecret
        ? client.None()
        : this.settings.clientAuth === 'post'
          ? client.ClientSecretPost(clientSecret)
          : client.ClientSecretBasic(clientSecret);
      const metadata = clientSecret ? { client_secret: clientSecret } : undefined;
      const customFetch = providerFetch(this.settings.tls) as unknown as client.CustomFetch;
      const insecure = new URL(server.issuer).protocol === 'http:' && isLoopback(new URL(server.issuer));
      this.configuration = (async () => {
        let configuration: client.Configuration;
        if ('authorization' in server) {
          configuration = new client.Configuration(
            {
              issuer: server.issuer,
              authorization_endpoint: server.authorization,
              token_endpoint: server.token,
            },
            clientId,
            metadata,
            auth,
          );
          if (insecure) client.allowInsecureRequests(configuration);
        } else {
          configuration = await client.discovery(new URL(server.issuer), clientId, metadata, auth, {
            [client.customFetch]: customFetch,
            ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
          });
        }
        configuration[client.customFetch] = customFetch;
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
        `the identity provider of "${this.settings.id}" cannot be reached or is not an OpenID provider`,
      );
    });
  }

  /** The provider's authorization URL to send the browser to, and the transaction to keep. */
  async start(
    scopes: readonly string[],
    parameters: Readonly<Record<string, string>> = {},
  ): Promise<{ url: URL; transaction: CodeTransaction }> {
    const configuration = await this.configure();
    const transaction: CodeTransaction = {
      state: client.randomState(),
      codeVerifier: client.randomPKCECodeVerifier(),
      ...(this.openId ? { nonce: client.randomNonce() } : {}),
    };
    const url = client.buildAuthorizationUrl(configuration, {
      ...parameters,
      // RFC 8707: the resource is asked for here too; the token request may only narrow it.
      ...(this.settings.resource ? { resource: this.settings.resource } : {}),
      redirect_uri: this.settings.redirectURI as string,
      scope: [...new Set(this.openId ? ['openid', ...scopes] : scopes)].join(' '),
      state: transaction.state,
      ...(transaction.nonce ? { nonce: transaction.nonce } : {}),
      code_challenge: await client.calculatePKCECodeChallenge(transaction.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, transaction };
  }

  /**
   * Redeems the code of the callback (`callbackUrl`: the URL the browser came back with). Every
   * failure is {@link ProviderLoginFailed}; the provider's own messages are not shown.
   */
  async exchange(callbackUrl: URL, transaction: CodeTransaction): Promise<Grant> {
    const configuration = await this.configure();
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
    const current = new URL(this.settings.redirectURI as string);
    current.search = callbackUrl.search;
    try {
      const tokens = await client.authorizationCodeGrant(
        configuration,
        current,
        {
          pkceCodeVerifier: transaction.codeVerifier,
          expectedState: transaction.state,
          ...(this.openId ? { expectedNonce: transaction.nonce, idTokenExpected: true } : {}),
        },
        this.settings.resource ? { resource: this.settings.resource } : undefined,
      );
      const claims = this.openId ? tokens.claims() : undefined;
      if (this.openId && !claims) throw new ProviderLoginFailed('the identity provider returned no ID token');
      return {
        accessToken: tokens.access_token,
        refreshToken: tokens.refresh_token,
        ...(claims ? { claims: { ...claims }, idToken: tokens.id_token } : {}),
      };
    } catch (err) {
      if (err instanceof LoginRefused) throw err;
      throw new ProviderLoginFailed(`the sign-in could not be completed: ${describeFailure(err)}`);
    }
  }

  /**
   * A refresh-token grant. A provider that refuses the grant itself (`invalid_grant`, a client it
   * no longer knows) gives {@link RefreshRevoked}; anything else (unreachable, a 5xx) is thrown
   * as it is, to be tried again.
   */
  async refresh(refreshToken: string): Promise<Grant> {
    const configuration = await this.configure();
    try {
      const tokens = await client.refreshTokenGrant(
        configuration,
        refreshToken,
        this.settings.resource ? { resource: this.settings.resource } : undefined,
      );
      const claims = this.openId ? tokens.claims() : undefined;
      return {
        accessToken: tokens.access_token,
        refreshToken: tokens.refresh_token ?? refreshToken,
        ...(claims ? { claims: { ...claims }, idToken: tokens.id_token } : {}),
      };
    } catch (err) {
      if (
        err instanceof client.ResponseBodyError &&
        ['invalid_grant', 'invalid_client', 'unauthorized_client'].includes(err.error)
      )
        throw new RefreshRevoked(`the identity provider refused the refresh (${err.error}); sign in again`);
      throw err;
    }
  }

  /** The UserInfo claims for an access token (OpenID providers), checked against the ID token's subject. */
  async userInfo(accessToken: string, subject: string | undefined): Promise<Record<string, unknown>> {
    const configuration = await this.configure();
    return {
      ...(await client.fetchUserInfo(configuration, accessToken, subject ?? client.skipSubjectCheck)),
    };
  }

  /**
   * Where to send the browser to end the provider's session (OpenID Connect RP-Initiated Logout
   * 1.0), when the provider has an end-session endpoint: with the client id, the address to come
   * back to (registered at the provider) and the ID token of the sign-in as a hint, when kept.
   */
  async endSessionUrl(
    postLogoutRedirectURI: string | undefined,
    idTokenHint: string | undefined,
  ): Promise<URL | undefined> {
    const configuration = await this.configure();
    if (!configuration.serverMetadata().end_session_endpoint) return undefined;
    return client.buildEndSessionUrl(configuration, {
      client_id: this.settings.clientId as string,
      ...(postLogoutRedirectURI ? { post_logout_redirect_uri: postLogoutRedirectURI } : {}),
      ...(idTokenHint ? { id_token_hint: idTokenHint } : {}),
    });
  }
}
