import { readFileSync } from 'node:fs';
import { importPKCS8, SignJWT } from 'jose';
import {
  AuthorizationCodeClient,
  ConnectorMisconfigured,
  clientOf,
  ProviderLoginFailed,
} from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import {
  EmailNotVerified,
  type ExternalIdentity,
  IdentityIncomplete,
  LoginRefused,
  requireGroups,
} from './identity.ts';
import { type Claims, OpenIdProviderConnector } from './openid-provider.ts';
import { callProvider, ProviderApiError, type ProviderFetch, providerFetch } from './provider-http.ts';
import { joinUrl, type ProviderAddresses } from './providers.ts';

/**
 * Sign-in through the web-identity provider (`auth.idpA`, `connectors[].idpA`), an OpenID provider
 * at its public issuer: scopes `openid` + `scopes` (default `profile`, `email`), offline access
 * requested (`access_type=offline`, `prompt=consent`) so the identity can be refreshed. User id
 * `sub`, username the (verified) `email`, display name `name`.
 *
 * - `hostedDomains`: the ID token's `hd` claim (the user's hosted domain) must be one of them; the
 *   authorization request carries `hd` as a hint (the domain, or `*` for several).
 * - Groups come from the provider's directory API (`GET <directory>/admin/directory/v1/groups
 *   ?userKey=<email>`, every page), as group email addresses, when `serviceAccountFilePath` names a
 *   service-account key: its JSON (`client_email`, `private_key`, `token_uri`) signs a JWT bearer
 *   assertion (RFC 7523) for `adminEmail` with the read-only directory scope, exchanged at
 *   `token_uri` for an access token.
 * - `groups`: only these groups enter the identity, and a user in none is refused. Without a
 *   service account the groups cannot be known, so a configuration with `groups` and no service
 *   account refuses every sign-in (rather than letting everyone in).
 */

type IdpAConfig = ProviderConfig<'idpA'>;

export const DIRECTORY_GROUP_SCOPE = 'https://www.googleapis.com/auth/admin.directory.group.readonly';

export class HostedDomainRefused extends LoginRefused {
  override readonly name = 'HostedDomainRefused';
  constructor() {
    super('your account does not belong to a domain allowed to sign in here');
  }
}

/** The authorization request's `hd` hint: the one domain, or `*` for several (pure). */
export function hostedDomainHint(domains: readonly string[] | undefined): Record<string, string> {
  if (!domains || domains.length === 0) return {};
  return { hd: domains.length === 1 ? (domains[0] as string) : '*' };
}

/** Refuses claims whose `hd` is not an allowed hosted domain (pure; no rule without domains). */
export function checkHostedDomain(claims: Claims, domains: readonly string[] | undefined): void {
  if (!domains || domains.length === 0) return;
  if (typeof claims.hd !== 'string' || !domains.includes(claims.hd)) throw new HostedDomainRefused();
}

interface ServiceAccount {
  readonly client_email: string;
  readonly private_key: string;
  readonly private_key_id?: string;
  readonly token_uri: string;
}

function readServiceAccount(path: string): ServiceAccount {
  let parsed: Partial<ServiceAccount>;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<ServiceAccount>;
  } catch {
    throw new ConnectorMisconfigured('the service-account file of the web-identity connector cannot be read');
  }
  if (!parsed.client_email || !parsed.private_key || !parsed.token_uri)
    throw new ConnectorMisconfigured(
      'the service-account file of the web-identity connector lacks client_email, private_key or token_uri',
    );
  return parsed as ServiceAccount;
}

/** The directory API as the service account acting for `adminEmail`. */
export class DirectoryGroups {
  private token: { value: string; until: number } | undefined;

  constructor(
    private readonly account: ServiceAccount,
    private readonly adminEmail: string,
    private readonly directory: string,
    private readonly fetch: ProviderFetch,
  ) {}

  private async accessToken(): Promise<string> {
    if (this.token && this.token.until > Date.now()) return this.token.value;
    const key = await importPKCS8(this.account.private_key, 'RS256');
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: DIRECTORY_GROUP_SCOPE })
      .setProtectedHeader({
        alg: 'RS256',
        typ: 'JWT',
        ...(this.account.private_key_id ? { kid: this.account.private_key_id } : {}),
      })
      .setIssuer(this.account.client_email)
      .setSubject(this.adminEmail)
      .setAudience(this.account.token_uri)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(key);
    const answer = await callProvider<{ access_token?: string; expires_in?: number }>(
      this.fetch,
      this.account.token_uri,
      {
        form: { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion },
        what: "the directory's access token",
      },
    );
    const value = answer.body?.access_token;
    if (!value) throw new ProviderApiError(502, "the directory's access token");
    const lifetime = Math.min(answer.body?.expires_in ?? 3600, 3600);
    this.token = { value, until: Date.now() + (lifetime - 60) * 1000 };
    return value;
  }

  /** The email addresses of the groups `email` belongs to (at most 50 pages). */
  async of(email: string): Promise<string[]> {
    const token = await this.accessToken();
    const groups: string[] = [];
    let pageToken: string | undefined;
    for (let page = 0; page < 50; page++) {
      const url = new URL(joinUrl(this.directory, 'admin/directory/v1/groups'));
      url.searchParams.set('userKey', email);
      if (pageToken) url.searchParams.set('pageToken', pageToken);
      const answer = await callProvider<{ groups?: { email?: string }[]; nextPageToken?: string }>(
        this.fetch,
        url,
        { authorization: `Bearer ${token}`, what: "the user's groups in the directory" },
      );
      for (const group of answer.body?.groups ?? []) if (group.email) groups.push(group.email);
      pageToken = answer.body?.nextPageToken;
      if (!pageToken) break;
    }
    return groups;
  }
}

const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);

export class IdpAConnector extends OpenIdProviderConnector {
  protected readonly flow: AuthorizationCodeClient;
  private readonly directory: DirectoryGroups | undefined;

  constructor(
    readonly id: string,
    private readonly config: IdpAConfig,
    addresses: ProviderAddresses,
  ) {
    super();
    this.flow = new AuthorizationCodeClient({
      ...clientOf(id, config),
      server: { issuer: addresses.idpA.issuer },
      tls: { ca: addresses.ca },
      clientAuth: 'basic',
    });
    this.directory =
      config.serviceAccountFilePath && config.adminEmail
        ? new DirectoryGroups(
            readServiceAccount(config.serviceAccountFilePath),
            config.adminEmail,
            addresses.idpA.directory,
            providerFetch({ ca: addresses.ca }),
          )
        : undefined;
  }

  protected scopes() {
    return this.config.scopes;
  }

  protected override parameters() {
    return { access_type: 'offline', prompt: 'consent', ...hostedDomainHint(this.config.hostedDomains) };
  }

  protected usesUserInfo() {
    return false;
  }

  protected async identityOf(claims: Claims): Promise<ExternalIdentity> {
    const userId = text(claims.sub);
    const email = text(claims.email);
    if (!userId || !email) throw new IdentityIncomplete('the identity provider sent no subject or email');
    if (claims.email_verified !== true) throw new EmailNotVerified();
    checkHostedDomain(claims, this.config.hostedDomains);
    return {
      connector: this.id,
      userId,
      username: email,
      preferredUsername: text(claims.name),
      email,
      emailVerified: true,
      groups: await this.groupsOf(email),
    };
  }

  private async groupsOf(email: string): Promise<string[]> {
    const required = this.config.groups ?? [];
    if (!this.directory) {
      if (required.length > 0)
        throw new ConnectorMisconfigured(
          'this sign-in requires groups, which need serviceAccountFilePath and adminEmail to be read',
        );
      return [];
    }
    let groups: string[];
    try {
      groups = await this.directory.of(email);
    } catch (err) {
      if (err instanceof ProviderApiError)
        throw new ProviderLoginFailed(`the directory did not answer the user's groups (${err.message})`);
      throw err;
    }
    return requireGroups(groups, required, true);
  }
}
