import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearer, json, type LocalHttps, startLocalHttps } from './local-https.ts';
import { OAuthServer } from './oauth-server.ts';

/**
 * A local server that answers as the code-hosting provider with organizations and teams documents
 * its enterprise edition (`https://<hostName>`): the OAuth web flow (`/login/oauth/authorize`,
 * `/login/oauth/access_token`, which answers errors with status 200 and `error` in the body, and
 * issues tokens that do not expire) and the REST API under `/api/v3` with the user's token:
 *
 * - `GET /user` (`id`, `login`, `name`, `email`: the public email, null when none);
 * - `GET /user/emails` (scope `user:email`): `[{email, primary, verified}]`;
 * - `GET /user/teams` (scope `read:org`): `[{name, slug, organization: {login}}]`, paginated by
 *   `per_page`/`page` with a `Link` header;
 * - `GET /user/memberships/orgs/{org}` (scope `read:org`): `{state: active|pending, role}`, 404 for
 *   no membership.
 *
 * A bad token gets 401 `Bad credentials`; a missing scope 403. It is a stand-in, not the provider:
 * it implements these calls only, as documented, for the accounts the test defines.
 */

export interface HostedGitAccount {
  readonly id: number;
  readonly name?: string;
  /** The public profile email (null: none, the emails API is asked). */
  readonly email?: string | null;
  readonly emails?: readonly { email: string; primary: boolean; verified: boolean }[];
  /** Organization login → membership state. */
  readonly orgs?: Readonly<Record<string, 'active' | 'pending'>>;
  readonly teams?: readonly { org: string; name: string; slug: string }[];
}

export interface HostedGitApi extends LocalHttps {
  readonly clientId: string;
  readonly clientSecret: string;
  /** Accounts by login; tests add and change them. */
  readonly accounts: Map<string, HostedGitAccount>;
  readonly oauth: OAuthServer;
  /** API calls seen (method and path), to assert what the platform asked. */
  readonly calls: string[];
}

const PAGE_SIZE_DEFAULT = 30;

export async function startHostedGitApi(redirectUris: string[]): Promise<HostedGitApi> {
  const accounts = new Map<string, HostedGitAccount>();
  const clientId = `Iv1.${randomBytes(8).toString('hex')}`;
  const clientSecret = randomBytes(20).toString('hex');
  const oauth = new OAuthServer({
    clientId,
    clientSecret,
    redirectUris,
    knows: (login) => accounts.has(login),
    errorStatus: 200,
    badCodeError: 'bad_verification_code',
    refreshTokens: false,
  });
  const calls: string[] = [];

  function page<T>(res: ServerResponse, url: URL, items: readonly T[]): void {
    const perPage = Math.min(
      Number(url.searchParams.get('per_page') ?? PAGE_SIZE_DEFAULT) || PAGE_SIZE_DEFAULT,
      100,
    );
    const current = Math.max(Number(url.searchParams.get('page') ?? '1') || 1, 1);
    const slice = items.slice((current - 1) * perPage, current * perPage);
    const headers: Record<string, string> = {};
    if (current * perPage < items.length) {
      const next = new URL(url);
      next.searchParams.set('page', String(current + 1));
      headers.link = `<${next.toString()}>; rel="next"`;
    }
    json(res, 200, slice, headers);
  }

  async function api(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname.slice('/api/v3'.length);
    calls.push(`${req.method} ${path}`);
    const grant = oauth.grantOf(bearer(req) ?? /^token\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]);
    const account = grant ? accounts.get(grant.account) : undefined;
    if (!grant || !account) return json(res, 401, { message: 'Bad credentials' });
    const needs = (scope: string) => {
      if (grant.scopes.includes(scope)) return true;
      json(res, 403, { message: `this call needs the ${scope} scope` });
      return false;
    };
    if (path === '/user')
      return json(res, 200, {
        login: grant.account,
        id: account.id,
        name: account.name ?? null,
        email: account.email ?? null,
      });
    if (path === '/user/emails')
      return needs('user:email') ? page(res, url, account.emails ?? []) : undefined;
    if (path === '/user/teams')
      return needs('read:org')
        ? page(
            res,
            url,
            (account.teams ?? []).map((team) => ({
              name: team.name,
              slug: team.slug,
              organization: { login: team.org },
            })),
          )
        : undefined;
    const membership = /^\/user\/memberships\/orgs\/([^/]+)$/.exec(path);
    if (membership) {
      if (!needs('read:org')) return;
      const org = decodeURIComponent(membership[1] as string).toLowerCase();
      const found = Object.entries(account.orgs ?? {}).find(([login]) => login.toLowerCase() === org);
      if (!found) return json(res, 404, { message: 'Not Found' });
      return json(res, 200, { state: found[1], role: 'member', organization: { login: found[0] } });
    }
    json(res, 404, { message: 'Not Found' });
  }

  const server = await startLocalHttps(async (req, res, url) => {
    if (url.pathname === '/login/oauth/authorize') return oauth.authorize(req, res, url);
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') return oauth.token(req, res);
    if (url.pathname.startsWith('/api/v3/') && req.method === 'GET') return api(req, res, url);
    json(res, 404, { message: 'Not Found' });
  });
  return { ...server, clientId, clientSecret, accounts, oauth, calls };
}
