import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import { ConnectorMisconfigured, ProviderLoginFailed, RefreshRevoked } from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import {
  type ExternalIdentity,
  IdentityIncomplete,
  isReservedName,
  LoginRefused,
  ReservedUsername,
} from './identity.ts';
import { storedIdentity } from './openid-provider.ts';
import { callProvider, ProviderApiError, type ProviderFetch, providerFetch } from './provider-http.ts';
import type { SsoCallback, SsoConnector, SsoStart } from './sso.ts';
import type { LoginThrottle } from './throttle.ts';

/**
 * Sign-in through the cluster manager (`auth.clusterManager`: `host`, `bearerToken`, `insecure`).
 * The cluster manager is no OAuth provider; its documented v3 API authenticates API keys of the
 * form `<token-name>:<token-secret>` as bearer tokens. A person signs in with an API key of their
 * own (created in the cluster manager under their account), posted to the platform's form:
 *
 * 1. with the person's key: `GET https://<host>/v3/users?me=true` (the user the key belongs to:
 *    `id`, `username`, `name`, `enabled`) and `GET /v3/principals` (the caller's principals; its
 *    groups are those of `principalType: group` with `memberOf: true`, named by `name`);
 * 2. with the platform's own `bearerToken`: `GET /v3/tokens/<token-name>`, which must belong to
 *    that user, be enabled, unexpired, and not scoped to one cluster (`clusterId`): a key made
 *    for one downstream cluster does not open the platform.
 *
 * The person's key is used for those calls only: never stored, logged or echoed. Every key posted
 * is counted by the sign-in throttle before it is checked (as passwords are), against the source
 * address and against its token name under this connector, and given back unless the cluster
 * manager refused it: no counter is shared by keys of different names, so no one fills one for
 * everybody, and a source's counter bounds how many names it can make counters for. `insecure` skips
 * the check of the cluster manager's certificate. A refresh asks, with the platform's key, for
 * `GET /v3/users/<id>`: a user gone or disabled there ends the key.
 */

type ClusterManagerConfig = ProviderConfig<'clusterManager'>;

/** A key that is not a cluster-manager API key of an enabled user. */
export class ClusterManagerKeyRefused extends LoginRefused {
  override readonly name = 'ClusterManagerKeyRefused';
  override readonly code = 401;
  constructor() {
    super('the cluster manager does not accept this API key for signing in');
  }
}

/** `<token-name>:<token-secret>`, the form of the cluster manager's API keys. */
export const API_KEY_PATTERN = /^([A-Za-z0-9][A-Za-z0-9._-]{0,252}):([A-Za-z0-9]{1,512})$/;

/**
 * The throttle's subject for a key: its token name under this connector (the secret never), or
 * none for text that is no key (counted per source only).
 */
export function throttleSubject(connectorId: string, key: string): string | undefined {
  const tokenName = API_KEY_PATTERN.exec(key)?.[1];
  return tokenName === undefined ? undefined : `cluster-manager:${connectorId}:${tokenName}`;
}

interface ApiUser {
  id?: string;
  username?: string;
  name?: string;
  enabled?: boolean;
}

interface ApiPrincipal {
  principalType?: string;
  memberOf?: boolean;
  name?: string;
  loginName?: string;
}

interface ApiToken {
  userId?: string;
  enabled?: boolean;
  expired?: boolean;
  clusterId?: string;
}

/** The group names among a caller's principals (pure). */
export function principalGroups(principals: readonly ApiPrincipal[]): string[] {
  return [
    ...new Set(
      principals
        .filter((p) => p.principalType === 'group' && p.memberOf === true)
        .map((p) => p.name || p.loginName || '')
        .filter(Boolean),
    ),
  ];
}

export class ClusterManagerConnector implements SsoConnector {
  private readonly base: string;
  private readonly fetch: ProviderFetch;

  constructor(
    readonly id: string,
    private readonly config: ClusterManagerConfig,
    private readonly throttle: LoginThrottle | undefined,
    ca: string | undefined,
  ) {
    if (!config.host || !config.bearerToken)
      throw new ConnectorMisconfigured(
        `sign-in through "${id}" needs the cluster manager's host and bearerToken`,
      );
    this.base = `https://${config.host.replace(/^https?:\/\//, '').replace(/\/+$/, '')}`;
    this.fetch = providerFetch({ ca, insecure: config.insecure });
  }

  async start(): Promise<SsoStart> {
    return { form: 'access-key', transaction: {} };
  }

  private call<T>(key: string, path: string, what: string, accept: number[] = []) {
    return callProvider<T>(
      this.fetch,
      `${this.base}${path}`,
      { authorization: `Bearer ${key}`, what },
      accept,
    );
  }

  async finish(callback: SsoCallback): Promise<ExternalIdentity> {
    const key = (callback.form.get('key') ?? '').trim();
    const admitted = await this.throttle?.admit({
      source: callback.source,
      user: throttleSubject(this.id, key),
    });
    try {
      const identity = await this.verify(key);
      await admitted?.succeeded();
      return identity;
    } catch (err) {
      // Only a key the cluster manager refused stays counted; a key it accepted is no guess.
      if (!(err instanceof ClusterManagerKeyRefused)) await admitted?.succeeded();
      if (err instanceof ProviderApiError)
        throw new ProviderLoginFailed(`the cluster manager could not be asked (${err.message})`);
      throw err;
    } finally {
      admitted?.done();
    }
  }

  private async verify(key: string): Promise<ExternalIdentity> {
    const parsed = API_KEY_PATTERN.exec(key);
    if (!parsed) throw new ClusterManagerKeyRefused();
    const tokenName = parsed[1] as string;
    const users = await this.call<{ data?: ApiUser[] }>(
      key,
      '/v3/users?me=true',
      'the user of the key',
      [401, 403],
    );
    const me = users.body?.data;
    if (users.status !== 200 || !me || me.length !== 1) throw new ClusterManagerKeyRefused();
    const user = me[0] as ApiUser;
    if (!user.id || !user.username)
      throw new IdentityIncomplete('the cluster manager sent no user id or username');
    if (user.enabled === false) throw new ClusterManagerKeyRefused();
    if (isReservedName(user.username)) throw new ReservedUsername();
    const token = await this.call<ApiToken>(
      this.config.bearerToken as string,
      `/v3/tokens/${encodeURIComponent(tokenName)}`,
      'the key',
      [404],
    );
    const record = token.body;
    if (
      token.status !== 200 ||
      !record ||
      record.userId !== user.id ||
      record.enabled === false ||
      record.expired === true ||
      (record.clusterId ?? '') !== ''
    )
      throw new ClusterManagerKeyRefused();
    const principals = await this.call<{ data?: ApiPrincipal[] }>(key, '/v3/principals', "the user's groups");
    return {
      connector: this.id,
      userId: user.id,
      username: user.username,
      preferredUsername: user.name || undefined,
      groups: principalGroups(principals.body?.data ?? []),
    };
  }

  async refresh(identity: SsoIdentity): Promise<ExternalIdentity> {
    if (!identity.userId) throw new RefreshRevoked('the key holds no cluster-manager user id');
    const answer = await this.call<ApiUser>(
      this.config.bearerToken as string,
      `/v3/users/${encodeURIComponent(identity.userId)}`,
      'the user',
      [404],
    );
    if (answer.status === 404 || answer.body?.enabled === false)
      throw new RefreshRevoked('the user is gone or disabled in the cluster manager');
    return storedIdentity(this.id, identity);
  }
}
