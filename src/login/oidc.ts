import { readFileSync } from 'node:fs';
import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import {
  AuthorizationCodeClient,
  ConnectorMisconfigured,
  clientOf,
  ProviderLoginFailed,
} from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import { type ExternalIdentity, identityFromClaims } from './identity.ts';
import { type Claims, OpenIdProviderConnector } from './openid-provider.ts';
import { readConnectorData } from './sso.ts';

/**
 * An OIDC relying party for one connector (`auth.oidc`, `connectors[].oidc`): discovery from
 * `issuerUrl` (TLS with `caFile`, or none checked with `insecureCa`), the authorization-code flow
 * with PKCE, `state` and `nonce` (`code-flow.ts`), the ID token's signature, issuer, audience
 * (`clientId`, authorized party), expiry and nonce checked by openid-client, the `resource`
 * parameter on authorization and token requests, UserInfo when `getUserInfo`, claims mapped by
 * `identityFromClaims`, and the end-session URL of RP-initiated logout (`postLogoutRedirectURI`).
 */

type OidcConfig = ProviderConfig<'oidc'>;

export { ConnectorMisconfigured, ProviderLoginFailed };

function caOf(config: OidcConfig): string | undefined {
  if (!config.caFile) return undefined;
  try {
    return readFileSync(config.caFile, 'utf8');
  } catch {
    throw new ConnectorMisconfigured('the caFile of the OpenID connector cannot be read');
  }
}

export class OidcConnector extends OpenIdProviderConnector {
  protected readonly flow: AuthorizationCodeClient;

  constructor(
    readonly id: string,
    private readonly config: OidcConfig,
  ) {
    super();
    this.flow = new AuthorizationCodeClient({
      ...clientOf(id, config),
      server: { issuer: config.issuerUrl ?? '' },
      tls: { ca: caOf(config), insecure: config.insecureCa },
      clientAuth: 'basic',
      resource: config.resource,
    });
  }

  protected scopes() {
    return this.config.scopes;
  }

  protected usesUserInfo() {
    return this.config.getUserInfo === true;
  }

  protected override keepsIdToken() {
    return true;
  }

  protected async identityOf(claims: Claims): Promise<ExternalIdentity> {
    return identityFromClaims(this.id, claims, this.config);
  }

  /**
   * Where to send the browser to end the provider's session after the platform's (RP-initiated
   * logout): the provider's end-session endpoint with `postLogoutRedirectURI` and, when the
   * sign-in's identity kept it, its ID token as `id_token_hint`. Undefined when the provider has no
   * end-session endpoint.
   */
  endSessionUrl(identity?: Pick<SsoIdentity, 'connectorData'>): Promise<URL | undefined> {
    const { idToken } = identity ? readConnectorData(identity) : {};
    return this.flow.endSessionUrl(this.config.postLogoutRedirectURI, idToken);
  }
}
