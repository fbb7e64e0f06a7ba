import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import {
  type AuthorizationCodeClient,
  type CodeTransaction,
  describeFailure,
  type Grant,
  ProviderLoginFailed,
  RefreshRevoked,
} from './code-flow.ts';
import type { ExternalIdentity } from './identity.ts';
import {
  connectorDataOf,
  readConnectorData,
  type SsoCallback,
  type SsoConnector,
  type SsoStart,
} from './sso.ts';

/**
 * What the connectors of OpenID providers share (`oidc`, the code-hosting provider with groups,
 * the web-identity provider): the code flow with a checked ID token, UserInfo where the provider
 * puts what is needed there, the refresh token kept as connectorData, and a refresh that maps the
 * provider's new answer exactly as a sign-in does, for the same user only.
 */

export type Claims = Readonly<Record<string, unknown>>;

export abstract class OpenIdProviderConnector implements SsoConnector {
  protected abstract readonly flow: AuthorizationCodeClient;
  abstract readonly id: string;

  /** Scopes besides `openid`. */
  protected abstract scopes(): readonly string[];
  /** Extra authorization request parameters. */
  protected parameters(): Readonly<Record<string, string>> {
    return {};
  }
  /** Whether the identity needs the UserInfo claims (merged under the ID token's). */
  protected abstract usesUserInfo(): boolean;
  /** Whether the ID token is kept in connectorData (the hint of an end-session request). */
  protected keepsIdToken(): boolean {
    return false;
  }

  /** What connectorData keeps of a grant (the ID token of an earlier grant when this one has none). */
  private connectorDataFor(grant: Grant, previous?: string): string | undefined {
    const idToken = this.keepsIdToken() ? (grant.idToken ?? previous) : undefined;
    return connectorDataOf({ refreshToken: grant.refreshToken, ...(idToken ? { idToken } : {}) });
  }
  /** The identity for these claims (refusals as LoginRefused); `grant` for further provider calls. */
  protected abstract identityOf(claims: Claims, grant: Grant): Promise<ExternalIdentity>;

  async start(): Promise<SsoStart> {
    const { url, transaction } = await this.flow.start(this.scopes(), this.parameters());
    return { redirect: url, transaction };
  }

  private async claimsOf(grant: Grant, idClaims: Claims): Promise<Claims> {
    if (!this.usesUserInfo()) return idClaims;
    const subject = typeof idClaims.sub === 'string' ? idClaims.sub : undefined;
    try {
      return { ...(await this.flow.userInfo(grant.accessToken, subject)), ...idClaims };
    } catch (err) {
      throw new ProviderLoginFailed(
        `the UserInfo of the identity provider was refused: ${describeFailure(err)}`,
      );
    }
  }

  async finish(callback: SsoCallback, transaction: unknown): Promise<ExternalIdentity> {
    const grant = await this.flow.exchange(callback.url, transaction as CodeTransaction);
    const identity = await this.identityOf(await this.claimsOf(grant, grant.claims ?? {}), grant);
    return { ...identity, connectorData: this.connectorDataFor(grant) };
  }

  /**
   * The identity after a refresh-token grant: the new ID token (and UserInfo) mapped as at sign-in.
   * A provider that sends no new ID token on refresh is asked through UserInfo when the identity
   * uses it; otherwise the grant standing is all it says, and the identity is kept.
   */
  async refresh(identity: SsoIdentity): Promise<ExternalIdentity> {
    const { refreshToken, idToken } = readConnectorData(identity);
    if (!refreshToken) throw new RefreshRevoked('this sign-in left no refresh token to refresh with');
    const grant = await this.flow.refresh(refreshToken);
    const connectorData = this.connectorDataFor(grant, idToken);
    if (!grant.claims && !this.usesUserInfo()) return { ...storedIdentity(this.id, identity), connectorData };
    const claims = await this.claimsOf(grant, grant.claims ?? { sub: identity.userId });
    const fresh = await this.identityOf(claims, grant);
    if (fresh.userId !== identity.userId)
      throw new RefreshRevoked('the identity provider answered the refresh for another user');
    return { ...fresh, connectorData };
  }
}

/** A stored identity as the connector's identity again (nothing new learned). */
export function storedIdentity(connector: string, identity: SsoIdentity): ExternalIdentity {
  return {
    connector,
    userId: identity.userId ?? '',
    username: identity.username ?? '',
    preferredUsername: identity.preferredUsername,
    email: identity.email,
    emailVerified: identity.emailVerified,
    groups: identity.groups ?? [],
    extraClaims: identity.extraClaims,
    connectorData: identity.connectorData,
  };
}
