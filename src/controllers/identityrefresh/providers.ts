import type { ConfigStatus } from '../../api/config.ts';
import type { SsoIdentity } from '../../api/ownedaccesskey.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';

/** What the key's sign-in connector answered when asked again. */
export type ProviderAnswer =
  /** The identity as the provider now states it, to write on the key; its User and teams already follow it. */
  | { readonly outcome: 'refreshed'; readonly identity: SsoIdentity }
  /** The key's sign-in method is no longer configured. */
  | { readonly outcome: 'connectorRemoved' }
  /** The key's connector keeps nothing it could ask again with (password, SAML). */
  | { readonly outcome: 'nothingToRefresh' };

/**
 * The sign-in connectors as the identity refresh controller asks them. Sign-in (`src/login`)
 * implements it and the composition root hands it over, so controllers never import login.
 */
export interface IdentityProviders {
  /**
   * Asks the connector `identity` was signed in through again, with what it kept
   * (`connectorData`), through the same mapping and group rules as a sign-in, and makes the User
   * `user` (never created again) and its team memberships follow the answer. Throws when the
   * provider could not be asked (transient) or no longer vouches for the person as `user`
   * ({@link endsTheKey}).
   */
  refresh(user: string, identity: SsoIdentity): Promise<ProviderAnswer>;
  /**
   * Whether a failure of {@link refresh} ends the key: the provider refused the grant or the
   * person, or the platform refuses who the provider now says the person is. Its message says why.
   */
  endsTheKey(err: unknown): err is Error;
}

/** Builds the connectors' side for a controller: its (fenced) API client and the platform config. */
export type IdentityProvidersFactory = (deps: {
  readonly api: KubeApi;
  readonly config: () => ConfigStatus;
}) => IdentityProviders;
