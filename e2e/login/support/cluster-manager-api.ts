import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearer, json, type LocalHttps, startLocalHttps } from './local-https.ts';

/**
 * A local server that answers as the cluster manager documents its v3 API, for the calls the
 * platform makes, authenticated by API keys `<token-name>:<token-secret>` sent as bearer tokens:
 *
 * - `GET /v3/users?me=true`: `{data: [the caller's user]}` (`id`, `username`, `name`, `enabled`);
 * - `GET /v3/users/<id>`: one user (a key of an admin reads any);
 * - `GET /v3/principals`: `{data: [...]}` the caller's principals, its user (`me: true`) and its
 *   groups (`principalType: group`, `memberOf: true`);
 * - `GET /v3/tokens/<name>`: a token's record (`userId`, `enabled`, `expired`, `clusterId`),
 *   readable by its owner and by an admin, never its secret.
 *
 * A bad key gets 401. Served with a certificate of a CA of its own, which neither the system nor
 * the other stand-ins' CA vouch for: the platform reaches it with `insecure: true`, as a cluster
 * manager with a self-signed certificate is reached.
 */

export interface ClusterManagerUser {
  readonly id: string;
  readonly username: string;
  readonly name?: string;
  enabled: boolean;
  admin?: boolean;
  readonly groups: readonly string[];
}

interface Token {
  readonly secret: string;
  readonly userId: string;
  enabled: boolean;
  expired: boolean;
  readonly clusterId: string;
}

export interface ClusterManagerApi extends LocalHttps {
  readonly users: Map<string, ClusterManagerUser>;
  /** Makes an API key for a user (scoped to a cluster when `clusterId`); returns `<name>:<secret>`. */
  apiKey(userId: string, options?: { clusterId?: string }): string;
  /** The key of an admin of the cluster manager (made once), for the platform's `bearerToken`. */
  adminKey(): string;
  /** Marks a token expired. */
  expire(key: string): void;
  readonly calls: string[];
}

export async function startClusterManagerApi(): Promise<ClusterManagerApi> {
  const users = new Map<string, ClusterManagerUser>();
  const tokens = new Map<string, Token>();
  const calls: string[] = [];

  const caller = (req: IncomingMessage): ClusterManagerUser | undefined => {
    const [name, secret] = (bearer(req) ?? '').split(':');
    const token = tokens.get(name ?? '');
    if (!token || token.secret !== secret || !token.enabled || token.expired) return undefined;
    const user = users.get(token.userId);
    return user?.enabled ? user : undefined;
  };
  const userJson = (user: ClusterManagerUser) => ({
    id: user.id,
    type: 'user',
    username: user.username,
    name: user.name ?? '',
    enabled: user.enabled,
    principalIds: [`local://${user.id}`],
  });

  function handle(req: IncomingMessage, res: ServerResponse, url: URL) {
    calls.push(`${req.method} ${url.pathname}${url.search}`);
    const me = caller(req);
    if (!me) return json(res, 401, { type: 'error', status: 401, message: 'must authenticate' });
    if (req.method !== 'GET') return json(res, 405, { type: 'error', status: 405 });
    if (url.pathname === '/v3/users' && url.searchParams.get('me') === 'true')
      return json(res, 200, { type: 'collection', data: [userJson(me)] });
    const user = /^\/v3\/users\/([^/]+)$/.exec(url.pathname);
    if (user) {
      const found = users.get(decodeURIComponent(user[1] as string));
      if (!found || (!me.admin && found.id !== me.id)) return json(res, 404, { type: 'error', status: 404 });
      return json(res, 200, userJson(found));
    }
    if (url.pathname === '/v3/principals')
      return json(res, 200, {
        type: 'collection',
        data: [
          {
            type: 'principal',
            id: `local://${me.id}`,
            principalType: 'user',
            name: me.name ?? me.username,
            loginName: me.username,
            me: true,
            memberOf: false,
          },
          ...me.groups.map((group) => ({
            type: 'principal',
            id: `local_group://${group}`,
            principalType: 'group',
            name: group,
            me: false,
            memberOf: true,
          })),
        ],
      });
    const token = /^\/v3\/tokens\/([^/]+)$/.exec(url.pathname);
    if (token) {
      const name = decodeURIComponent(token[1] as string);
      const found = tokens.get(name);
      if (!found || (!me.admin && found.userId !== me.id))
        return json(res, 404, { type: 'error', status: 404 });
      return json(res, 200, {
        type: 'token',
        id: name,
        name,
        userId: found.userId,
        enabled: found.enabled,
        expired: found.expired,
        clusterId: found.clusterId,
      });
    }
    json(res, 404, { type: 'error', status: 404 });
  }

  const server = await startLocalHttps(handle, { ownCa: true });
  let adminKey: string | undefined;
  const apiKey = (userId: string, options: { clusterId?: string } = {}) => {
    const name = `token-${randomBytes(3).toString('hex')}`;
    const secret = randomBytes(24).toString('hex');
    tokens.set(name, { secret, userId, enabled: true, expired: false, clusterId: options.clusterId ?? '' });
    return `${name}:${secret}`;
  };
  return {
    ...server,
    users,
    calls,
    adminKey: () => {
      if (!adminKey) {
        users.set('u-platform', {
          id: 'u-platform',
          username: 'platform-bot',
          enabled: true,
          admin: true,
          groups: [],
        });
        adminKey = apiKey('u-platform');
      }
      return adminKey;
    },
    apiKey,
    expire: (key) => {
      const token = tokens.get(key.split(':')[0] ?? '');
      if (token) token.expired = true;
    },
  };
}
