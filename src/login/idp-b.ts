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
 * Groups (not for `consumers`: personal accounts have none): `POST /v1.0/me/getMemberGroups`
 * with `securityEnabledOnly` = `onlySecurityGroups` gives the ids of every group the user is in
 * (transitively), and `POST /v1.0/directoryObjects/getByIds` (types `group`, 1000 ids a call)
 * their display names, which are the group names. `groups`: the user must be in at least one;
 * with `useGroupsAsWhitelist` only those enter the identity.
 */

type IdpBConfig = ProviderConfig<'idpB'>;

/** Tenants whose accounts are personal only (no directory groups). */
const PERSONAL_TENANT = 'consumers';
const GET_BY_IDS_BATCH = 1000;

export class IdpBConnector implements SsoConnector {
  private readonly flow: AuthorizationCodeClient;
  private readonly graph: string;
  private readonly fetch: ProviderFetch;
  private readonly withGroups: boolean;

  constructor(
    readonly id: string,
    private readonly config: IdpBConfig,
    addresses: ProviderAddresses,
  ) {
    const tenant = config.tenant;
    if (!/^[A-Za-z0-9.-]+$/.test(tenant))
      throw new ConnectorMisconfigured(`the tenant of "${id}" is not a tenant name or id`);
    this.withGroups = tenant !== PERSONAL_TENANT;
    if (!this.withGroups && (config.groups ?? []).length > 0)
      throw new ConnectorMisconfigured(
        `"${id}" requires groups, but its tenant (consumers) signs in personal accounts, which have none`,
      );
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
    return ['offline_access', 'User.Read', ...(this.withGroups ? ['Directory.Read.All'] : [])];
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
    const groups = this.withGroups ? await this.groupNames(token) : [];
    return {
      connector: this.id,
      userId: me.id,
      username: me.userPrincipalName,
      preferredUsername: me.displayName || undefined,
      email: me.mail || me.userPrincipalName,
      groups: requireGroups(groups, this.config.groups, this.config.useGroupsAsWhitelist === true),
    };
  }

  private async groupNames(token: string): Promise<string[]> {
    const ids =
      (
        await this.call<{ value?: string[] }>(token, 'v1.0/me/getMemberGroups', "the user's groups", {
          securityEnabledOnly: this.config.onlySecurityGroups === true,
        })
      ).body?.value ?? [];
    const names: string[] = [];
    for (let start = 0; start < ids.length; start += GET_BY_IDS_BATCH) {
      const batch = ids.slice(start, start + GET_BY_IDS_BATCH);
      const objects =
        (
          await this.call<{ value?: { displayName?: string }[] }>(
            token,
            'v1.0/directoryObjects/getByIds',
            "the names of the user's groups",
            { ids: batch, types: ['group'] },
          )
        ).body?.value ?? [];
      for (const object of objects) if (object.displayName) names.push(object.displayName);
    }
    return [...new Set(names)];
  }
}
