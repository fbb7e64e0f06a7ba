import type { AuthConfig } from '../api/config-auth.ts';
import { ClusterManagerConnector } from './cluster-manager.ts';
import { type LoginMethod, loginMethods } from './connectors.ts';
import { HostedGitConnector } from './hosted-git.ts';
import { HostedGitGroupsConnector } from './hosted-git-groups.ts';
import { IdpAConnector } from './idp-a.ts';
import { IdpBConnector } from './idp-b.ts';
import { OidcConnector } from './oidc.ts';
import { type ProviderAddresses, PUBLIC_PROVIDER_ADDRESSES } from './providers.ts';
import { SamlConnector } from './saml.ts';
import type { SsoConnector } from './sso.ts';
import type { LoginThrottle } from './throttle.ts';

/**
 * The connector object of each sign-in method, made from its configuration and kept while the
 * configuration stays the same (discovery results and directory tokens are cached in it); a
 * changed configuration makes a new one. Shared by the login endpoints and the identity refresh.
 */
export class ConnectorRegistry {
  private readonly cache = new Map<string, { key: string; connector: SsoConnector }>();
  private readonly addresses: ProviderAddresses;
  private readonly throttle: LoginThrottle | undefined;

  constructor(
    options: { addresses?: ProviderAddresses | undefined; throttle?: LoginThrottle | undefined } = {},
  ) {
    this.addresses = options.addresses ?? PUBLIC_PROVIDER_ADDRESSES;
    this.throttle = options.throttle;
  }

  /** The configured method named `id`, if any. */
  method(auth: AuthConfig, id: string): LoginMethod | undefined {
    return loginMethods(auth).find((candidate) => candidate.id === id);
  }

  /** The connector of a method (construction errors such as unreadable files are LoginRefused). */
  connectorFor(method: LoginMethod): SsoConnector {
    const key = `${method.kind}\n${JSON.stringify(method.config)}`;
    const cached = this.cache.get(method.id);
    if (cached && cached.key === key) return cached.connector;
    const connector = this.make(method);
    this.cache.set(method.id, { key, connector });
    return connector;
  }

  private make(method: LoginMethod): SsoConnector {
    switch (method.kind) {
      case 'oidc':
        return new OidcConnector(method.id, method.config);
      case 'saml':
        return new SamlConnector(method.id, method.config);
      case 'hostedGit':
        return new HostedGitConnector(method.id, method.config, this.addresses);
      case 'hostedGitGroups':
        return new HostedGitGroupsConnector(method.id, method.config, this.addresses);
      case 'idpA':
        return new IdpAConnector(method.id, method.config, this.addresses);
      case 'idpB':
        return new IdpBConnector(method.id, method.config, this.addresses);
      case 'clusterManager':
        return new ClusterManagerConnector(method.id, method.config, this.throttle, this.addresses.ca);
    }
  }
}
