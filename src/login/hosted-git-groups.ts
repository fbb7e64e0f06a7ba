import { AuthorizationCodeClient, ConnectorMisconfigured, clientOf } from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import {
  type ExternalIdentity,
  IdentityIncomplete,
  isReservedName,
  ReservedUsername,
  requireGroups,
} from './identity.ts';
import { type Claims, OpenIdProviderConnector } from './openid-provider.ts';
import type { ProviderAddresses } from './providers.ts';

/**
 * Sign-in through the code-hosting provider organized in groups (`auth.hostedGitGroups`,
 * `connectors[].hostedGitGroups`). The provider documents itself as an OpenID provider at its base
 * URL (`baseURL`, else its public address; discovery at `<baseURL>/.well-known/openid-configuration`),
 * so the sign-in is OpenID Connect: scopes `openid profile email`, the ID token checked, and the
 * UserInfo answer read for what the provider puts there: `groups` (the full paths of the user's
 * groups). User id `sub`, username `nickname` (the provider's username; `preferred_username` when
 * absent), display name `name`.
 *
 * `groups` is a whitelist: when set, only the user's groups that it lists enter the identity, and
 * a user in none of them is refused.
 */

type HostedGitGroupsConfig = ProviderConfig<'hostedGitGroups'>;

const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
const texts = (value: unknown) =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string' && item !== '') : [];

export class HostedGitGroupsConnector extends OpenIdProviderConnector {
  protected readonly flow: AuthorizationCodeClient;

  constructor(
    readonly id: string,
    private readonly config: HostedGitGroupsConfig,
    addresses: ProviderAddresses,
  ) {
    super();
    const baseURL = config.baseURL || addresses.hostedGitGroups.baseURL;
    try {
      new URL(baseURL);
    } catch {
      throw new ConnectorMisconfigured(`the baseURL of "${id}" is not a URL`);
    }
    this.flow = new AuthorizationCodeClient({
      ...clientOf(id, config),
      server: { issuer: baseURL },
      tls: { ca: addresses.ca },
      clientAuth: 'basic',
    });
  }

  protected scopes() {
    return ['profile', 'email'];
  }

  protected usesUserInfo() {
    return true;
  }

  protected async identityOf(claims: Claims): Promise<ExternalIdentity> {
    const userId = text(claims.sub);
    const username = text(claims.nickname) ?? text(claims.preferred_username);
    if (!userId || !username) throw new IdentityIncomplete('the provider sent no user id or username');
    if (isReservedName(username)) throw new ReservedUsername();
    return {
      connector: this.id,
      userId,
      username,
      preferredUsername: text(claims.name),
      email: text(claims.email),
      emailVerified: typeof claims.email_verified === 'boolean' ? claims.email_verified : undefined,
      groups: requireGroups(texts(claims.groups), this.config.groups, true),
    };
  }
}
