import {
  IDP_B_SHARED_TENANTS,
  idpBGroupsWithoutTenant,
  idpBGroupsWithoutTenantReason,
} from '../api/config-warnings.ts';
import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import {
  AuthorizationCodeClient,
  type CodeTransaction,
  ConnectorMisconfigured,
  clientOf,
  ProviderLoginFailed,
  RefreshRevoked,
} from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import {
  type ExternalIdentity,
  IdentityIncomplete,
  isReservedName,
  LoginRefused,
  ReservedUsername,
  requireGroups,
} from './identity.ts';
import { callProvider, ProviderApiError, type ProviderFetch, providerFetch } from './provider-http.ts';
import { joinUrl, type ProviderAddresses } from './providers.ts';
import {
  connectorDataOf,
  readConnectorData,
  type SsoCallback,
  type SsoConnector,
  type SsoStart,
} from './sso.ts';

/**
 * Sign-in through the enterprise-identity provider (`auth.idpB`, `connectors[].idpB`): its OAuth 2.0
 * endpoints for the configured `tenant` (`<login>/<tenant>/oauth2/v2.0/authorize` and `/token`;
 * `common`, `consumers`, `organizations`, a tenant id or a tenant domain), PKCE, client secret in
 * the form, `offline_access` for a refresh token. The user comes from the graph API:
 * `GET /v1.0/me` (`id` the user id, `userPrincipalName` the username, `displayName`, `mail`).
 *
 * Groups only with a specific tenant (its id or one of its verified domains; issue 32): a shared
 * tenant (`common`, the default, `organizations`, `consumers`) signs in accounts of any tenant,
 * and anyone can create a tenant and name its groups as they like, so such a connector signs
 * people in without groups, and one configured with `groups` or `useGroupsAsWhitelist` is refused
 * ({@link idpBGroupsWithoutTenant}; admission warns naming the field). With a specific tenant,
 * every sign-in and refresh first asks the graph which tenant the token is of
 * (`GET /v1.0/organization`: `id`, `verifiedDomains`) and refuses any other; then
 * `POST /v1.0/me/getMemberGroups` with `securityEnabledOnly` = `onlySecurityGroups` gives the
 * object ids of every group the user is in (transitively). Groups are those object ids, never
 * display names (anyone who may create a group picks its display name): `groups` lists the ids
 * of which the user must be in at least one, and with `useGroupsAsWhitelist` only those enter the
 * identity.
 */

type IdpBConfig = ProviderConfig<'idpB'>;

/** The sign-in is of an account of another tenant than the one configured. */
export class ForeignTenant extends LoginRefused {
  override readonly name = 'ForeignTenant';
  constructor() {
    super('your account belongs to another tenant than the one this sign-in method admits');
  }
}

/** The tenant of a token as the graph states it. */
interface Organization {
  readonly id?: string;
  readonly verifiedDomains?: ReadonlyArray<{ readonly name?: string }>;
}

/** Whether the organization the graph answered for is the configured tenant (id or verified domain). */
export function isConfiguredTenant(tenant: string, organization: Organization | undefined): boolean {
  const wanted = tenant.toLowerCase();
  if (organization?.id && organization.id.toLowerCase() === wanted) return true;
  return (organization?.verifiedDomains ?? []).some((domain) => domain.name?.toLowerCase() === wanted);
}

export class IdpBConnector implements SsoConnector {
  private readonly flow: AuthorizationCodeClient;
  private readonly graph: string;
  private readonly fetch: ProviderFetch;
  /** A tenant id or domain: only its accounts, and their groups (shared tenants: no groups). */
  private readonly specificTenant: boolean;

  constructor(
    readonly id: string,
    private readonly config: IdpBConfig,
    addresses: ProviderAddresses,
  ) {
    const tenant = config.tenant;
    if (!/^[A-Za-z0-9.-]+$/.test(tenant))
      throw new ConnectorMisconfigured(`the tenant of "${id}" is not a tenant name or id`);
    const field = idpBGroupsWithoutTenant(config);
    if (field)
      throw new ConnectorMisconfigured(`"${id}" sets ${field}, but ${idpBGroupsWithoutTenantReason('idpB')}`);
    this.specificTenant = !(IDP_B_SHARED_TENANTS as readonly string[]).includes(tenant.toLowerCase());
    const login = joinUrl(addresses.idpB.login, tenant);
    this.graph = addresses.idpB.graph;
    this.fetch = providerFetch({ ca: addresses.ca });
    this.flow = new AuthorizationCodeClient({
      ...clientOf(id, config),
      server: {
        issuer: login,
        authorization: joinUrl(login, 'oauth2/v2.0/authorize'),
        token: joinUrl(login, 'oauth2/v2.0/token'),
      },
      tls: { ca: addresses.ca },
      clientAuth: 'post',
    });
  }

  private scopes(): string[] {
    return ['offline_access', 'User.Read', ...(this.specificTenant ? ['Directory.Read.All'] : [])];
  }

  async start(): Promise<SsoStart> {
    const { url, transaction } = await this.flow.start(this.scopes());
    return { redirect: url, transaction };
  }

  async finish(callback: SsoCallback, transaction: unknown): Promise<ExternalIdentity> {
    const grant = await this.flow.exchange(callback.url, transaction as CodeTransaction);
    try {
      const identity = await this.identityFor(grant.accessToken);
      return { ...identity, connectorData: connectorDataOf({ refreshToken: grant.refreshToken }) };
    } catch (err) {
      if (err instanceof ProviderApiError)
        throw new ProviderLoginFailed(`the graph API refused the sign-in (${err.message})`);
      throw err;
    }
  }

  async refresh(identity: SsoIdentity): Promise<ExternalIdentity> {
    const { refreshToken } = readConnectorData(identity);
    if (!refreshToken) throw new RefreshRevoked('this sign-in left no refresh token to refresh with');
    const grant = await this.flow.refresh(refreshToken);
    const fresh = await this.identityFor(grant.accessToken);
    if (fresh.userId !== identity.userId)
      throw new RefreshRevoked('the identity provider answered the refresh for another user');
    return { ...fresh, connectorData: connectorDataOf({ refreshToken: grant.refreshToken }) };
  }

  private call<T>(token: string, path: string, what: string, json?: unknown) {
    return callProvider<T>(this.fetch, joinUrl(this.graph, path), {
      authorization: `Bearer ${token}`,
      what,
      ...(json !== undefined ? { json } : {}),
    });
  }

  private async identityFor(token: string): Promise<ExternalIdentity> {
    const me = (
      await this.call<{
        id?: string;
        displayName?: string;
        userPrincipalName?: string;
        mail?: string | null;
      }>(token, 'v1.0/me?$select=id,displayName,userPrincipalName,mail', 'the user')
    ).body;
    if (!me?.id || !me.userPrincipalName)
      throw new IdentityIncomplete('the identity provider sent no user id or user principal name');
    if (isReservedName(me.userPrincipalName)) throw new ReservedUsername();
    if (this.specificTenant) await this.checkTenant(token);
    const groups = this.specificTenant ? await this.groupIds(token) : [];
    return {
      connector: this.id,
      userId: me.id,
      username: me.userPrincipalName,
      preferredUsername: me.displayName || undefined,
      email: me.mail || me.userPrincipalName,
      groups: requireGroups(groups, this.config.groups, this.config.useGroupsAsWhitelist === true),
    };
  }

  /** Refuses a token of another tenant ({@link ForeignTenant}). */
  private async checkTenant(token: string): Promise<void> {
    const organizations =
      (
        await this.call<{ value?: Organization[] }>(
          token,
          'v1.0/organization?$select=id,verifiedDomains',
          "the user's tenant",
        )
      ).body?.value ?? [];
    if (organizations.length !== 1 || !isConfiguredTenant(this.config.tenant, organizations[0]))
      throw new ForeignTenant();
  }

  /** Object ids of every group the user is in (transitively). */
  private async groupIds(token: string): Promise<string[]> {
    const ids =
      (
        await this.call<{ value?: unknown[] }>(token, 'v1.0/me/getMemberGroups', "the user's groups", {
          securityEnabledOnly: this.config.onlySecurityGroups === true,
        })
      ).body?.value ?? [];
    return [...new Set(ids.filter((id): id is string => typeof id === 'string' && id !== ''))];
  }
}
