import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { escapeHtml, json, readBody } from './local-https.ts';

/**
 * The OAuth 2.0 authorization-server half (RFC 6749, PKCE RFC 7636) of the hosted providers'
 * stand-ins that are not OpenID providers (the code-hosting provider with organizations, the
 * enterprise-identity provider): an authorization endpoint whose sign-in page asks for a username
 * (any account the stand-in knows; the provider's own authentication is not under test), and a
 * token endpoint for the authorization-code and refresh-token grants with the client's
 * credentials in the form (`client_secret_post`, as both providers document). Codes are single
 * use, bound to the redirect URI and the PKCE challenge; access tokens are opaque.
 */

export interface OAuthServerOptions {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly redirectUris: readonly string[];
  readonly knows: (username: string) => boolean;
  /**
   * The status of a token-endpoint error: 400 per RFC 6749; the code-hosting provider documents
   * answering 200 with the error in the body.
   */
  readonly errorStatus: number;
  /** The error code for a bad or spent code (RFC 6749: `invalid_grant`). */
  readonly badCodeError: string;
  readonly refreshTokens: boolean;
}

interface Grant {
  readonly account: string;
  readonly scopes: readonly string[];
}

interface Code extends Grant {
  readonly redirectUri: string;
  readonly challenge: string | undefined;
  used: boolean;
}

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
const token = (prefix: string) => `${prefix}_${randomBytes(20).toString('hex')}`;

export class OAuthServer {
  private readonly codes = new Map<string, Code>();
  private readonly accessTokens = new Map<string, Grant>();
  private readonly refreshTokens = new Map<string, Grant>();
  /** Token requests seen, by outcome (`issued`, or the error code). */
  readonly tokenRequests: string[] = [];

  constructor(private readonly options: OAuthServerOptions) {}

  /** GET shows the sign-in form; POST (the form) sends the browser back with a code. */
  async authorize(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const q = url.searchParams;
    const redirectUri = q.get('redirect_uri') ?? '';
    if (q.get('client_id') !== this.options.clientId || !this.options.redirectUris.includes(redirectUri)) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('unknown client or redirect_uri');
      return;
    }
    const back = new URL(redirectUri);
    const state = q.get('state');
    if (state !== null) back.searchParams.set('state', state);
    if (q.get('response_type') !== 'code') {
      back.searchParams.set('error', 'unsupported_response_type');
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
        `<!doctype html><title>Sign in</title><form method="post" action="${escapeHtml(url.pathname + url.search)}">
<label>Username <input name="username"></label><button type="submit">Sign in</button></form>`,
      );
      return;
    }
    const username = new URLSearchParams(await readBody(req)).get('username') ?? '';
    if (!this.options.knows(username)) {
      back.searchParams.set('error', 'access_denied');
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    const method = q.get('code_challenge_method');
    if (q.get('code_challenge') && method !== 'S256') {
      back.searchParams.set('error', 'invalid_request');
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    const code = token('code');
    this.codes.set(code, {
      account: username,
      scopes: (q.get('scope') ?? '').split(/\s+/).filter(Boolean),
      redirectUri,
      challenge: q.get('code_challenge') ?? undefined,
      used: false,
    });
    back.searchParams.set('code', code);
    res.writeHead(302, { location: back.toString() }).end();
  }

  private fail(res: ServerResponse, error: string): void {
    this.tokenRequests.push(error);
    json(res, this.options.errorStatus, { error, error_description: `refused: ${error}` });
  }

  private issue(res: ServerResponse, grant: Grant): void {
    const access = token('at');
    this.accessTokens.set(access, grant);
    const refresh = this.options.refreshTokens ? token('rt') : undefined;
    if (refresh) this.refreshTokens.set(refresh, grant);
    this.tokenRequests.push('issued');
    json(res, 200, {
      access_token: access,
      token_type: 'Bearer',
      scope: grant.scopes.join(' '),
      ...(refresh ? { refresh_token: refresh, expires_in: 3600 } : {}),
    });
  }

  async token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await readBody(req));
    if (
      form.get('client_id') !== this.options.clientId ||
      form.get('client_secret') !== this.options.clientSecret
    )
      return this.fail(res, 'invalid_client');
    if (form.get('grant_type') === 'refresh_token') {
      const grant = this.refreshTokens.get(form.get('refresh_token') ?? '');
      if (!grant) return this.fail(res, 'invalid_grant');
      // Rotation: the old refresh token is spent.
      this.refreshTokens.delete(form.get('refresh_token') ?? '');
      return this.issue(res, grant);
    }
    if (form.get('grant_type') !== 'authorization_code') return this.fail(res, 'unsupported_grant_type');
    const code = this.codes.get(form.get('code') ?? '');
    if (!code || code.used || code.redirectUri !== form.get('redirect_uri'))
      return this.fail(res, this.options.badCodeError);
    code.used = true;
    if (code.challenge && s256(form.get('code_verifier') ?? '') !== code.challenge)
      return this.fail(res, this.options.badCodeError);
    return this.issue(res, code);
  }

  /** The account and scopes of a request's access token. */
  grantOf(accessToken: string | undefined): Grant | undefined {
    return accessToken ? this.accessTokens.get(accessToken) : undefined;
  }

  /** Revokes every token of an account (the user removed the app's authorization). */
  revoke(account: string): void {
    for (const map of [this.accessTokens, this.refreshTokens])
      for (const [key, grant] of map) if (grant.account === account) map.delete(key);
  }
}
