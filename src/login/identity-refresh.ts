import type {
  IdentityProviders,
  IdentityProvidersFactory,
} from '../controllers/identityrefresh/providers.ts';
import { LoginAccounts } from './accounts.ts';
import { ConnectorMisconfigured, ProviderLoginFailed, RefreshRevoked } from './code-flow.ts';
import { LoginRefused } from './identity.ts';
import { keyIdentity, userNameFor } from './outcome.ts';
import type { ProviderAddresses } from './providers.ts';
import { ConnectorRegistry } from './registry.ts';

/**
 * The sign-in connectors as the identity refresh controller asks them
 * (`controllers/identityrefresh`): a key's connector is asked again with what it kept, the answer
 * goes through the same mapping and group rules as a sign-in (`accounts.ts`; the User is never
 * made again), and the key's new identity is handed back for the controller to write.
 */

/**
 * Whether a refresh failure ends the key: the provider refused the grant or the person, or the
 * platform refuses who the provider now says the person is. Unreachable providers, unreadable
 * configuration and failed provider calls are transient.
 */
export function endsTheKey(err: unknown): err is LoginRefused {
  if (err instanceof RefreshRevoked) return true;
  return (
    err instanceof LoginRefused &&
    !(err instanceof ProviderLoginFailed || err instanceof ConnectorMisconfigured)
  );
}

/** The identity refreshed under another username belongs to another User: not this key's. */
export class RenamedAtProvider extends LoginRefused {
  override readonly name = 'RenamedAtProvider';
  constructor() {
    super('the identity provider now gives this person another username; sign in again');
  }
}

/** The connectors' side of identity refresh; `addresses` points the providers elsewhere (tests). */
export function loginIdentityProviders(
  options: { addresses?: ProviderAddresses } = {},
): IdentityProvidersFactory {
  const connectors = new ConnectorRegistry({ addresses: options.addresses });
  return ({ api, config }): IdentityProviders => {
    const accounts = new LoginAccounts(api, config);
    return {
      endsTheKey,
      async refresh(user, identity) {
        const method = connectors.method(config().auth, identity.connector ?? '');
        if (!method) return { outcome: 'connectorRemoved' };
        const connector = connectors.connectorFor(method);
        if (!connector.refresh) return { outcome: 'nothingToRefresh' };
        const fresh = await connector.refresh(identity);
        if (userNameFor(fresh.username) !== user) throw new RenamedAtProvider();
        await accounts.applyIdentity(fresh, { createUser: false });
        return { outcome: 'refreshed', identity: keyIdentity(fresh) };
      },
    };
  };
}
