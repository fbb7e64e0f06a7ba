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
  NotInAllowedGroups,
  ReservedUsername,
} from './identity.ts';
import {
  callProvider,
  nextLink,
  ProviderApiError,
  type ProviderFetch,
  pemOrFile,
  providerFetch,
} from './provider-http.ts';
import { joinUrl, type ProviderAddresses } from './providers.ts';
import {
  connectorDataOf,
  readConnectorData,
  type SsoCallback,
  type SsoConnector,
  type SsoStart,
} from './sso.ts';

/**
 * Sign-in through the code-hosting provider organized in organizations and teams
 * (`auth.hostedGit`, `connectors[].hostedGit`): its OAuth 2.0 web flow (authorize at
 * `<web>/login/oauth/authorize`, token at `<web>/login/oauth/access_token`, client credentials in
 * the form, PKCE), then its REST API with the user's token: `GET /user` (and `GET /user/emails`
 * when the profile shows no email), `GET /user/teams`, and for each configured organization
 * `GET /user/memberships/orgs/{org}` (an `active` membership counts). The enterprise edition lives
 * at `https://<hostName>` with its API under `/api/v3`, trusted through `rootCA` (PEM or a file).
 *
 * Groups are `<org>:<team>`. With `orgs` the user must be an active member of at least one listed
 * organization and, where an organization lists `teams`, of at least one of them (by name or
 * slug); only the teams of the listed organizations that pass enter the groups. Without `orgs`
 * every team of the user does. The access token is kept as connectorData: the provider's tokens
 * do not expire, so a refresh asks the API again with it, and a revoked token ends the key.
 */

type HostedGitConfig = ProviderConfig<'hostedGit'>;

export const HOSTED_GIT_SCOPES = ['user:email', 'read:org'];

export interface TeamMembership {
  /** The organization's login. */
  readonly org: string;
  readonly name: string;
  readonly slug: string;
}

const sameOrg = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * The groups a user gets under `orgs` (pure): see the module comment. `memberOf` tells whether the
 * user is an active member of an organization; `teams` are all the user's teams.
 */
export function hostedGitGroups(
  orgs: HostedGitConfig['orgs'],
  memberOf: (org: string) => boolean,
  teams: readonly TeamMembership[],
): string[] {
  const format = (org: string, team: TeamMembership) => `${org}:${team.name}`;
  if (!orgs || orgs.length === 0) return [...new Set(teams.map((team) => format(team.org, team)))];
  const groups: string[] = [];
  let admitted = false;
  for (const org of orgs) {
    if (!memberOf(org.name)) continue;
    const inOrg = teams.filter((team) => sameOrg(team.org, org.name));
    const wanted = org.teams ?? [];
    const kept =
      wanted.length === 0
        ? inOrg
        : inOrg.filter((team) => wanted.includes(team.name) || wanted.includes(team.slug));
    if (wanted.length === 0 || kept.length > 0) admitted = true;
    groups.push(...kept.map((team) => format(org.name, team)));
  }
  if (!admitted) throw new NotInAllowedGroups();
  return [...new Set(groups)];
}

interface ApiUser {
  id?: number;
  login?: string;
  name?: string | null;
  email?: string | null;
}

export class HostedGitConnector implements SsoConnector {
  private readonly flow: AuthorizationCodeClient;
  private readonly api: string;
  private readonly fetch: ProviderFetch;

  constructor(
    readonly id: string,
    private readonly config: HostedGitConfig,
    addresses: ProviderAddresses,
  ) {
    const enterprise = config.hostName ? `https://${config.hostName.replace(/^https?:\/\//, '')}` : undefined;
    const web = enterprise ?? addresses.hostedGit.web;
    this.api = enterprise ? joinUrl(enterprise, 'api/v3') : addresses.hostedGit.api;
    let ca: string | undefined;
    try {
      ca =
        [enterprise ? pemOrFile(config.rootCA) : undefined, addresses.ca].filter(Boolean).join('\n') ||
        undefined;
    } catch {
      throw new ConnectorMisconfigured(`the rootCA of "${id}" cannot be read`);
    }
    this.fetch = providerFetch({ ca });
    this.flow = new AuthorizationCodeClient({
      ...clientOf(id, config),
      server: {
        issuer: web,
        authorization: joinUrl(web, 'login/oauth/authorize'),
        token: joinUrl(web, 'login/oauth/access_token'),
      },
      tls: { ca },
      clientAuth: 'post',
    });
  }

  async start(): Promise<SsoStart> {
    const { url, transaction } = await this.flow.start(HOSTED_GIT_SCOPES);
    return { redirect: url, transaction };
  }

  async finish(callback: SsoCallback, transaction: unknown): Promise<ExternalIdentity> {
    const grant = await this.flow.exchange(callback.url, transaction as CodeTransaction);
    try {
      return await this.identityFor(grant.accessToken);
    } catch (err) {
      if (err instanceof ProviderApiError)
        throw new ProviderLoginFailed(`the code-hosting provider's API refused the sign-in (${err.message})`);
      throw err;
    }
  }

  async refresh(identity: SsoIdentity): Promise<ExternalIdentity> {
    const { accessToken } = readConnectorData(identity);
    if (!accessToken) throw new RefreshRevoked('this sign-in left no token to refresh with');
    let fresh: ExternalIdentity;
    try {
      fresh = await this.identityFor(accessToken);
    } catch (err) {
      if (err instanceof ProviderApiError && err.status === 401)
        throw new RefreshRevoked('the code-hosting provider no longer accepts the token of this sign-in');
      throw err;
    }
    if (fresh.userId !== identity.userId)
      throw new RefreshRevoked('the code-hosting provider answered the refresh for another user');
    return fresh;
  }

  private get<T>(token: string, path: string, what: string, accept: number[] = []) {
    return callProvider<T>(
      this.fetch,
      path.startsWith('https://') || path.startsWith('http://') ? path : joinUrl(this.api, path),
      {
        authorization: `Bearer ${token}`,
        headers: { accept: 'application/vnd.github+json' },
        what,
      },
      accept,
    );
  }

  /** Every page of a list (`per_page=100`, following `Link: rel="next"`, at most 20 pages). */
  private async list<T>(token: string, path: string, what: string): Promise<T[]> {
    const items: T[] = [];
    let next: string | undefined = joinUrl(this.api, `${path}?per_page=100`);
    for (let page = 0; next && page < 20; page++) {
      const answer: Awaited<ReturnType<typeof this.get<T[]>>> = await this.get<T[]>(token, next, what);
      items.push(...(Array.isArray(answer.body) ? answer.body : []));
      next = nextLink(answer.headers.get('link'));
    }
    return items;
  }

  private async identityFor(token: string): Promise<ExternalIdentity> {
    const user = (await this.get<ApiUser>(token, 'user', 'the user')).body;
    if (!user || typeof user.id !== 'number' || !user.login)
      throw new IdentityIncomplete('the code-hosting provider sent no user id or login');
    if (isReservedName(user.login)) throw new ReservedUsername();
    let email = user.email || undefined;
    if (!email) {
      const emails = await this.list<{ email?: string; primary?: boolean; verified?: boolean }>(
        token,
        'user/emails',
        "the user's emails",
      );
      email = emails.find((entry) => entry.primary && entry.verified)?.email;
    }
    const teams = (
      await this.list<{ name?: string; slug?: string; organization?: { login?: string } }>(
        token,
        'user/teams',
        "the user's teams",
      )
    )
      .filter((team) => team.name && team.organization?.login)
      .map((team) => ({
        org: team.organization?.login as string,
        name: team.name as string,
        slug: team.slug ?? '',
      }));
    const members = new Set<string>();
    for (const org of this.config.orgs ?? []) {
      const answer = await this.get<{ state?: string }>(
        token,
        `user/memberships/orgs/${encodeURIComponent(org.name)}`,
        'an organization membership',
        [403, 404],
      );
      if (answer.status === 200 && answer.body?.state === 'active') members.add(org.name.toLowerCase());
    }
    const groups = hostedGitGroups(this.config.orgs, (org) => members.has(org.toLowerCase()), teams);
    return {
      connector: this.id,
      userId: String(user.id),
      username: user.login,
      preferredUsername: user.name || undefined,
      email,
      emailVerified: email ? true : undefined,
      groups,
      connectorData: connectorDataOf({ accessToken: token }),
    };
  }
}
