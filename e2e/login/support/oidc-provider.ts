import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { decodeJwt, importJWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';
import { Agent, fetch as undiciFetch } from 'undici';
import { createCertificateAuthority, issueCertificate } from '../../../src/pki/certificates.ts';

/**
 * A real, certified OpenID provider for the tests: `oidc-provider` (panva) on HTTPS with a test
 * CA, one confidential client, PKCE required, refresh tokens, and accounts the test defines. Its
 * login page (`/interaction/<uid>`) is a plain form asking for a username (any of the accounts;
 * no password: the provider's authentication is not what is tested), consent is implied.
 *
 * `tamper` makes it misbehave as a compromised or mixed-up provider would, by rewriting the ID
 * token of the token response (signed again with the provider's own key): another audience, or
 * another nonce, which the relying party must refuse; or claims of any name, which it must take
 * as data.
 */

export interface TestAccount {
  readonly claims: Record<string, unknown>;
}

export interface TestOidcProvider {
  readonly issuer: string;
  readonly caPem: string;
  readonly caFile: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly accounts: Map<string, TestAccount>;
  /**
   * Set to rewrite the next ID tokens: another audience or nonce, or `claims` added to (or
   * replacing) the account's (own keys, `__proto__` included, as the provider signs them).
   */
  tamper: { audience?: string; nonce?: string; claims?: Record<string, unknown> } | undefined;
  /** Token requests seen (grant types), to assert a replayed code reached the provider. */
  readonly tokenRequests: string[];
  /** Resource indicators (RFC 8707) asked for, at the authorization and the token endpoint. */
  readonly resourceRequests: string[];
  /** The audience of each access token issued for a resource (a JWT; UserInfo's have none). */
  readonly accessTokenAudiences: string[];
  /** Revokes a refresh token at the provider (RFC 7009), as a user withdrawing consent does. */
  revoke(refreshToken: string): Promise<void>;
  close(): Promise<void>;
}

function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The claims of each scope (oidc-provider's `claims` setting); the default is a generic enterprise provider's. */
const DEFAULT_CLAIMS: Record<string, string[]> = {
  openid: ['sub'],
  email: ['email', 'email_verified'],
  profile: ['preferred_username', 'name'],
  groups: ['groups'],
  extra: ['department', 'employee_id'],
  // A directory's own names for who someone is (usernameClaim, platformUsernameClaim, ...).
  directory: ['employee_number', 'login_name', 'work_email', 'roles'],
};

/** The scope of the resource servers (RFC 8707) the provider issues access tokens for. */
const RESOURCE_SCOPE = 'api:read';

/** The provider's pages of RP-initiated logout: a plain confirmation form, and what follows it. */
async function logoutSource(ctx: { body: unknown }, form: string) {
  ctx.body = `<!doctype html><title>Sign out</title><h1>Sign out of the test identity provider?</h1>${form}
<button id="logout-yes" type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>`;
}
async function postLogoutSuccessSource(ctx: { body: unknown }) {
  ctx.body = '<!doctype html><title>Signed out</title><h1 id="signed-out">Signed out</h1>';
}

export async function startTestOidcProvider(options: {
  redirectUris: string[];
  postLogoutRedirectUris?: string[];
  caDir: string;
  /** Scope → claims, to answer as a particular provider documents its claims. */
  claims?: Record<string, string[]>;
  /**
   * Claims of scopes go to UserInfo only, not into the ID token, when an access token is issued
   * (oidc-provider's conformIdTokenClaims), as providers that keep groups out of ID tokens do.
   */
  claimsInUserInfoOnly?: boolean;
  /** Serve RP-initiated logout (an end-session endpoint in discovery). Default true. */
  endSession?: boolean;
}): Promise<TestOidcProvider> {
  const claimsConfig = options.claims ?? DEFAULT_CLAIMS;
  const ca = await createCertificateAuthority('test-oidc-ca', 3600);
  const serving = await issueCertificate(ca, {
    commonName: 'oidc',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validForSeconds: 3600,
  });
  const { writeFileSync } = await import('node:fs');
  const caFile = `${options.caDir}/oidc-ca-${randomBytes(4).toString('hex')}.pem`;
  writeFileSync(caFile, ca.certPem);
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' };
  const signingKey = await importJWK(jwk, 'RS256');
  const clientId = 'platform';
  const clientSecret = randomBytes(24).toString('hex');
  const accounts = new Map<string, TestAccount>();
  const tokenRequests: string[] = [];
  const resourceRequests: string[] = [];
  const accessTokenAudiences: string[] = [];

  const server = createServer({ cert: serving.certPem, key: serving.keyPem });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: options.redirectUris,
        post_logout_redirect_uris: options.postLogoutRedirectUris ?? [],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    pkce: { required: () => true },
    conformIdTokenClaims: options.claimsInUserInfoOnly === true,
    claims: claimsConfig,
    scopes: ['offline_access', ...Object.keys(claimsConfig)],
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: options.endSession !== false,
        logoutSource,
        postLogoutSuccessSource,
      },
      revocation: { enabled: true },
      // Any https resource indicator names a resource server taking JWT access tokens.
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: async (_ctx: unknown, indicator: string) => {
          resourceRequests.push(indicator);
          if (!indicator.startsWith('https://')) throw new Error('not a resource of this provider');
          return { scope: RESOURCE_SCOPE, audience: indicator, accessTokenFormat: 'jwt' };
        },
      },
    },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    issueRefreshToken: () => true,
    async findAccount(_ctx: unknown, id: string) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account.claims }) };
    },
    async loadExistingGrant(ctx: {
      oidc: {
        client: { clientId: string };
        session: { accountId: string };
        params: { scope: string };
        resourceServers?: Record<string, unknown>;
      };
    }) {
      const grant = new provider.Grant({
        accountId: ctx.oidc.session.accountId,
        clientId: ctx.oidc.client.clientId,
      });
      grant.addOIDCScope(ctx.oidc.params.scope);
      grant.addOIDCClaims(Object.values(claimsConfig).flat());
      for (const indicator of Object.keys(ctx.oidc.resourceServers ?? {}))
        grant.addResourceScope(indicator, RESOURCE_SCOPE);
      await grant.save();
      return grant;
    },
  });

  const state: TestOidcProvider = {
    issuer,
    caPem: ca.certPem,
    caFile,
    clientId,
    clientSecret,
    accounts,
    tamper: undefined,
    tokenRequests,
    resourceRequests,
    accessTokenAudiences,
    revoke: async (refreshToken) => {
      const response = await undiciFetch(`${issuer}/token/revocation`, {
        method: 'POST',
        dispatcher: new Agent({ connect: { ca: ca.certPem } }),
        headers: {
          authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }).toString(),
      });
      if (response.status !== 200) throw new Error(`revocation answered ${response.status}`);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path !== '/token' || ctx.method !== 'POST') return;
    tokenRequests.push(String(ctx.status));
    const body = ctx.body as { id_token?: string; access_token?: string } | undefined;
    if (body?.access_token?.split('.').length === 3) {
      const { aud } = decodeJwt(body.access_token);
      accessTokenAudiences.push(...(Array.isArray(aud) ? aud : aud ? [aud] : []));
    }
    if (!state.tamper || !body?.id_token) return;
    const claims = decodeJwt(body.id_token);
    body.id_token = await new SignJWT({
      ...claims,
      ...(state.tamper.audience ? { aud: state.tamper.audience } : {}),
      ...(state.tamper.nonce ? { nonce: state.tamper.nonce } : {}),
      ...state.tamper.claims,
    })
      .setProtectedHeader({ alg: 'RS256', kid: 'test-key', typ: 'JWT' })
      .sign(signingKey);
  });

  const callback = provider.callback();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', issuer);
    const interaction = /^\/interaction\/([\w-]+)$/.exec(url.pathname);
    if (!interaction) return callback(req, res);
    void (async () => {
      try {
        const details = await provider.interactionDetails(req, res);
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
            `<!doctype html><title>Test identity provider</title><h1>Test identity provider</h1>
<form method="post" action="/interaction/${escapeHtml(details.uid)}">
<label>Username <input name="username" autofocus></label> <button type="submit">Sign in</button></form>`,
          );
          return;
        }
        const form = await readForm(req);
        if (details.prompt.name === 'consent' && details.session) {
          // Consent asked for explicitly (prompt=consent): the person agrees to what was asked.
          const grant = new provider.Grant({
            accountId: details.session.accountId,
            clientId: String(details.params.client_id),
          });
          grant.addOIDCScope(String(details.params.scope));
          grant.addOIDCClaims(Object.values(claimsConfig).flat());
          const grantId = await grant.save();
          await provider.interactionFinished(
            req,
            res,
            { consent: { grantId } },
            { mergeWithLastSubmission: true },
          );
          return;
        }
        const username = form.get('username') ?? '';
        if (!accounts.has(username)) {
          await provider.interactionFinished(req, res, {
            error: 'access_denied',
            error_description: 'unknown account',
          });
          return;
        }
        await provider.interactionFinished(
          req,
          res,
          { login: { accountId: username } },
          { mergeWithLastSubmission: false },
        );
      } catch (err) {
        res.writeHead(400).end(String((err as Error).message));
      }
    })();
  });
  return state;
}
