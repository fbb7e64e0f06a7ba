import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearer, json, type LocalHttps, readBody, startLocalHttps } from './local-https.ts';
import { OAuthServer } from './oauth-server.ts';

/**
 * A local server that answers as the enterprise-identity provider documents its login service and
 * graph API, for one tenant:
 *
 * - `/<tenant>/oauth2/v2.0/authorize` and `/<tenant>/oauth2/v2.0/token` (the v2 endpoints; tenant
 *   `common`, `organizations`, or this tenant's id or domain; errors as 400 `invalid_grant`,
 *   rotating refresh tokens for `offline_access`);
 * - `GET /v1.0/me` (`id`, `displayName`, `userPrincipalName`, `mail`, honouring `$select`);
 * - `GET /v1.0/organization` → `{value: [{id, verifiedDomains: [{name}]}]}`, the tenant of the
 *   token: this tenant, or for an account of `otherTenant` that one (an account signs in through
 *   any tenant's endpoints here; what the platform does with the tenant is under test);
 * - `POST /v1.0/me/getMemberGroups` `{securityEnabledOnly}` → `{value: [group ids]}`, every group
 *   the user is in (transitively), only security groups when asked, scope `Directory.Read.All`;
 * - `POST /v1.0/directoryObjects/getByIds` `{ids, types}` → `{value: [{id, displayName, ...}]}`.
 *
 * Unknown or revoked tokens get 401 `InvalidAuthenticationToken`. A stand-in: these calls only.
 */

export interface IdpBGroup {
  readonly id: string;
  readonly displayName: string;
  readonly securityEnabled: boolean;
}

export interface IdpBAccount {
  readonly id: string;
  readonly displayName?: string;
  readonly mail?: string;
  /** Ids of the groups the user is in, directly or through other groups. */
  readonly groups: readonly string[];
  /** An account of `otherTenant` rather than this tenant. */
  readonly ofOtherTenant?: boolean;
}

/** A tenant: its id and its verified domain. */
export interface IdpBTenant {
  readonly id: string;
  readonly domain: string;
}

export interface IdpBApi extends LocalHttps {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly tenantId: string;
  readonly tenantDomain: string;
  /** Another tenant, anyone's to create, whose accounts are marked `ofOtherTenant`. */
  readonly otherTenant: IdpBTenant;
  /** Accounts by user principal name. */
  readonly accounts: Map<string, IdpBAccount>;
  readonly groups: Map<string, IdpBGroup>;
  readonly oauth: OAuthServer;
}

export async function startIdpBApi(redirectUris: string[]): Promise<IdpBApi> {
  const accounts = new Map<string, IdpBAccount>();
  const groups = new Map<string, IdpBGroup>();
  const clientId = randomUUID();
  const clientSecret = randomBytes(20).toString('base64url');
  const tenantId = randomUUID();
  const tenantDomain = 'contoso.example';
  const otherTenant: IdpBTenant = { id: randomUUID(), domain: 'fabrikam.example' };
  const tenants = new Set(['common', 'organizations', tenantId, tenantDomain]);
  const oauth = new OAuthServer({
    clientId,
    clientSecret,
    redirectUris,
    knows: (upn) => accounts.has(upn),
    errorStatus: 400,
    badCodeError: 'invalid_grant',
    refreshTokens: true,
  });

  async function graph(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const grant = oauth.grantOf(bearer(req));
    const account = grant ? accounts.get(grant.account) : undefined;
    if (!grant || !account)
      return json(res, 401, {
        error: { code: 'InvalidAuthenticationToken', message: 'Access token is invalid.' },
      });
    const upn = grant.account;
    if (url.pathname === '/v1.0/me' && req.method === 'GET') {
      const me: Record<string, unknown> = {
        id: account.id,
        displayName: account.displayName ?? null,
        userPrincipalName: upn,
        mail: account.mail ?? null,
      };
      const select = url.searchParams.get('$select')?.split(',');
      return json(
        res,
        200,
        select ? Object.fromEntries(Object.entries(me).filter(([k]) => select.includes(k))) : me,
      );
    }
    if (url.pathname === '/v1.0/organization' && req.method === 'GET') {
      const tenant = account.ofOtherTenant ? otherTenant : { id: tenantId, domain: tenantDomain };
      return json(res, 200, { value: [{ id: tenant.id, verifiedDomains: [{ name: tenant.domain }] }] });
    }
    if (!grant.scopes.some((scope) => scope.toLowerCase() === 'directory.read.all'))
      return json(res, 403, {
        error: { code: 'Authorization_RequestDenied', message: 'Insufficient privileges.' },
      });
    const body = JSON.parse((await readBody(req)) || '{}') as Record<string, unknown>;
    if (url.pathname === '/v1.0/me/getMemberGroups' && req.method === 'POST') {
      const securityOnly = body.securityEnabledOnly === true;
      const value = account.groups.filter((id) => !securityOnly || groups.get(id)?.securityEnabled);
      return json(res, 200, { value });
    }
    if (url.pathname === '/v1.0/directoryObjects/getByIds' && req.method === 'POST') {
      const ids = Array.isArray(body.ids) ? (body.ids as string[]) : [];
      if (ids.length > 1000) return json(res, 400, { error: { code: 'Request_BadRequest' } });
      const value = ids
        .map((id) => groups.get(id))
        .filter((group): group is IdpBGroup => group !== undefined)
        .map((group) => ({ '@odata.type': '#microsoft.graph.group', ...group }));
      return json(res, 200, { value });
    }
    json(res, 404, { error: { code: 'Request_ResourceNotFound' } });
  }

  const server = await startLocalHttps(async (req, res, url) => {
    const login = /^\/([^/]+)\/oauth2\/v2\.0\/(authorize|token)$/.exec(url.pathname);
    if (login) {
      if (!tenants.has(login[1] as string))
        return json(res, 400, { error: 'invalid_request', error_description: 'unknown tenant' });
      if (login[2] === 'authorize') return oauth.authorize(req, res, url);
      if (req.method === 'POST') return oauth.token(req, res);
    }
    if (url.pathname.startsWith('/v1.0/')) return graph(req, res, url);
    json(res, 404, { error: 'not_found' });
  });
  return { ...server, clientId, clientSecret, tenantId, tenantDomain, otherTenant, accounts, groups, oauth };
}
