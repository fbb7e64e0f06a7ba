import type { ConfigStatus } from '../api/config.ts';
import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import { StatusError } from '../api/status.ts';
import { type CliRequest, cliQuery, cliRequestOf, oidcInteractionOf } from './carried-query.ts';
import { sealForCli, verificationCode } from './cli-handoff.ts';
import { type LoginMethod, loginMethods, passwordLoginEnabled } from './connectors.ts';
import {
  AUTH_BASE,
  authHeaders,
  cookieOf,
  deviceCookie,
  HTML,
  type LoginHttpRequest,
  type LoginHttpResponse,
  refusalStatus,
  statusAnswer,
  wantsJson,
} from './http-answers.ts';
import { LoginRefused } from './identity.ts';
import type { OidcConnector } from './oidc.ts';
import {
  accessKeyFormPage,
  cliCodePage,
  errorPage,
  handOffPage,
  keyPage,
  loginPage,
  loopbackReturn,
  signedOutPage,
} from './pages.ts';
import type { ConnectorRegistry } from './registry.ts';
import { type LoginSecrets, SealBroken, seal, unseal } from './secrets.ts';
import type { LoginService, MintedLogin } from './service.ts';

/**
 * The sign-in endpoints under `/auth`, free of any HTTP framework: each is an endpoint of the
 * gateway's table (`http-endpoints.ts`) that hands its request to one method here as a
 * {@link LoginHttpRequest} and writes the {@link LoginHttpResponse} back.
 *
 * | method, path | what |
 * |---|---|
 * | GET `/auth/login` | the login page (`?cli=` the key of a `platform login`, `&return=` its loopback address) |
 * | POST `/auth/password/login` | the password form (HTML), or JSON `{username, password}` → `{key, ...}` |
 * | POST `/auth/password/change` | JSON `{username, oldPassword, newPassword}` |
 * | GET `/auth/<id>/login` | starts a single sign-on: sealed state cookie, redirect to the provider (or the cluster manager's key form) |
 * | GET `/auth/<id>/callback` | OAuth/OIDC redirect back (`redirectURI` points here) |
 * | POST `/auth/<id>/callback` | SAML assertion consumer service (`redirectURI` points here); the key form |
 * | POST `/auth/logout` | deletes the caller's Login key (authenticated by the gateway), and says where to go next (the OpenID provider's end-session endpoint) |
 *
 * Every answer carries `auth.customHttpHeaders`. A successful sign-in answers with the key page;
 * for `platform login` (`cli`), with the key sealed to the command (`cli-handoff.ts`): handed to
 * its loopback `return` by POST, or shown to be pasted into it.
 */

const COOKIE_PREFIX = 'platform_login_';
const TRANSACTION_TTL_MS = 10 * 60_000;

interface Transaction {
  readonly connector: string;
  /** What the connector keeps from start to finish (state, nonce, PKCE verifier, request id). */
  readonly started: unknown;
  /** The `platform login` the sign-in is for, if any. */
  readonly cli?: CliRequest | undefined;
  /** The OpenID provider's interaction the sign-in is for, if any (`oidc-provider/`). */
  readonly oidc?: string | undefined;
}

/** The platform as an OpenID provider, as the login hands a sign-in back to it. */
export interface OpenIdInteractions {
  /** Where the browser goes after `user` signed in for the interaction `uid`. */
  interactionReturn(platformUrl: string, uid: string, user: string): Promise<string>;
}

export interface LoginEndpointsDeps {
  readonly service: LoginService;
  readonly connectors: ConnectorRegistry;
  readonly config: () => ConfigStatus;
  readonly secrets: () => Promise<LoginSecrets>;
  /** The management API's public URL for kubeconfigs (`<gateway>/kubernetes/management`). */
  readonly serverUrl: (request: LoginHttpRequest) => string;
  /** The platform's public URL, where `/auth` is served (`<gateway>`). */
  readonly platformUrl: (request: LoginHttpRequest) => string;
  readonly now?: () => number;
  /** Unexpected failures (never refusals), for the log; the person sees a generic page. */
  readonly onError?: (err: unknown) => void;
  /** Sign-ins for other applications (`/auth/login?oidc=<interaction>`), when the provider is served. */
  readonly openIdProvider?: OpenIdInteractions;
}

export class LoginEndpoints {
  private readonly now: () => number;

  constructor(private readonly deps: LoginEndpointsDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** GET `/auth/login`: the login page. */
  loginPage(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    return this.answer(request, (url) => this.page(url));
  }

  /** POST `/auth/password/login`: the password form, or its JSON. */
  passwordSignIn(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    return this.answer(request, (url) => this.passwordLogin(request, url));
  }

  /** POST `/auth/password/change`. */
  changePassword(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    return this.answer(request, () => this.passwordChange(request));
  }

  /** POST `/auth/logout`: ends the caller's key. */
  signOut(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    return this.answer(request, () => this.logout(request));
  }

  /**
   * GET `/auth/<id>/login`, GET or POST `/auth/<id>/callback`: a single sign-on of the connector
   * `id`; undefined for any other path or method under `/auth` (no such sign-in page).
   */
  connectorSignIn(request: LoginHttpRequest): Promise<LoginHttpResponse | undefined> {
    return this.answer(request, async (url) => {
      const match = /^\/([^/]+)\/(login|callback)$/.exec(url.pathname.slice(AUTH_BASE.length));
      if (!match) return undefined;
      const id = decodeURIComponent(match[1] as string);
      const method = this.deps.connectors.method(this.deps.config().auth, id);
      if (!method) throw new LoginRefused(`there is no sign-in method "${id}"`);
      if (match[2] === 'login' && request.method === 'GET') return this.start(request, url, method);
      if (match[2] === 'callback' && (request.method === 'GET' || request.method === 'POST'))
        return this.callback(request, method);
      return undefined;
    });
  }

  /** What every answer under `/auth` carries (the gateway adds them to its own refusals there too). */
  answerHeaders(): Record<string, string> {
    return authHeaders(this.deps.config().auth.customHttpHeaders);
  }

  /**
   * `respond`'s answer (undefined: no such sign-in page), or its refusal as a page or Status; with
   * the headers of every answer under `/auth`.
   */
  private async answer<Answer extends LoginHttpResponse | undefined>(
    request: LoginHttpRequest,
    respond: (url: URL) => Promise<Answer> | Answer,
  ): Promise<Answer | LoginHttpResponse> {
    const url = new URL(request.url, 'http://gateway');
    const response = await Promise.resolve()
      .then(() => respond(url))
      .catch((err: unknown) => this.failure(request, err));
    if (!response) return response;
    return { ...response, headers: { ...this.answerHeaders(), ...response.headers } };
  }

  private page(url: URL, message?: string): LoginHttpResponse {
    const config = this.deps.config();
    const cli = cliRequestOf(url.searchParams);
    return {
      status: message ? 401 : 200,
      headers: { 'content-type': HTML },
      body: loginPage({
        methods: loginMethods(config.auth),
        passwordEnabled: passwordLoginEnabled(config.auth),
        legalTemplate: config.uiSettings?.legalTemplate,
        carry: cliQuery(cli, this.openIdInteraction(url)).toString(),
        verification: cli ? verificationCode(cli.key) : undefined,
        message,
      }),
    };
  }

  private async start(request: LoginHttpRequest, url: URL, method: LoginMethod): Promise<LoginHttpResponse> {
    const connector = this.deps.connectors.connectorFor(method);
    const cli = cliRequestOf(url.searchParams);
    const started = await connector.start();
    const oidc = this.openIdInteraction(url);
    const transaction: Transaction = { connector: method.id, started: started.transaction, cli, oidc };
    const { transactionKey } = await this.deps.secrets();
    const sealed = await seal(transaction, transactionKey, this.now() + TRANSACTION_TTL_MS);
    // SAML comes back by a cross-site POST, which only carries SameSite=None cookies.
    const sameSite = method.kind === 'saml' && request.secure ? 'None' : 'Lax';
    const cookie = [
      `${COOKIE_PREFIX}${encodeURIComponent(method.id)}=${sealed}`,
      `Path=${AUTH_BASE}/${encodeURIComponent(method.id)}/`,
      `Max-Age=${TRANSACTION_TTL_MS / 1000}`,
      'HttpOnly',
      `SameSite=${sameSite}`,
      ...(request.secure ? ['Secure'] : []),
    ].join('; ');
    if ('form' in started)
      return {
        status: 200,
        headers: { 'content-type': HTML, 'set-cookie': cookie },
        body: accessKeyFormPage(method),
      };
    return {
      status: 303,
      headers: { location: started.redirect.toString(), 'set-cookie': cookie },
      body: '',
    };
  }

  private async callback(request: LoginHttpRequest, method: LoginMethod): Promise<LoginHttpResponse> {
    const { transactionKey } = await this.deps.secrets();
    const cookieName = `${COOKIE_PREFIX}${encodeURIComponent(method.id)}`;
    const transaction = (await unseal(
      cookieOf(request, cookieName),
      transactionKey,
      this.now(),
    )) as Transaction;
    if (transaction.connector !== method.id) throw new SealBroken();
    const connector = this.deps.connectors.connectorFor(method);
    const identity = await connector.finish(
      {
        url: new URL(request.url, 'http://gateway'),
        form: new URLSearchParams(request.method === 'POST' ? (request.body ?? '') : ''),
        source: request.source,
      },
      transaction.started,
    );
    const response = transaction.oidc
      ? await this.openIdSignedIn(request, transaction.oidc, await this.deps.service.ssoSignIn(identity))
      : await this.signedIn(request, await this.deps.service.ssoLogin(identity), transaction.cli);
    return {
      ...response,
      headers: {
        ...response.headers,
        'set-cookie': `${cookieName}=; Path=${AUTH_BASE}/${encodeURIComponent(method.id)}/; Max-Age=0; HttpOnly`,
      },
    };
  }

  /** The interaction a sign-in is for, when the OpenID provider is served and the query names one. */
  private openIdInteraction(url: URL): string | undefined {
    return this.deps.openIdProvider ? oidcInteractionOf(url.searchParams) : undefined;
  }

  /** After a sign-in for another application: back to the OpenID provider's interaction, no key minted. */
  private async openIdSignedIn(
    request: LoginHttpRequest,
    uid: string,
    user: string,
  ): Promise<LoginHttpResponse> {
    const provider = this.deps.openIdProvider;
    if (!provider) throw new LoginRefused('the platform does not act as an OpenID provider');
    const location = await provider.interactionReturn(this.deps.platformUrl(request), uid, user);
    return { status: 303, headers: { location }, body: '' };
  }

  /**
   * The page after a sign-in: for `platform login`, the key sealed to it, handed to its loopback
   * listener (a browser on its machine) or shown to be pasted (a browser anywhere); else the key.
   */
  private async signedIn(
    request: LoginHttpRequest,
    minted: MintedLogin,
    cli: CliRequest | undefined,
  ): Promise<LoginHttpResponse> {
    const server = this.deps.serverUrl(request);
    const html = (body: string) => ({ status: 200, headers: { 'content-type': HTML }, body });
    if (!cli) return html(keyPage(minted.key, minted.user, server));
    const code = await sealForCli(cli.key, {
      key: minted.key,
      keyName: minted.keyName,
      user: minted.user,
      server,
    });
    if (cli.returnTo && loopbackReturn(cli.returnTo)) return html(handOffPage(cli.returnTo, { code }));
    return html(cliCodePage(code, minted.user, verificationCode(cli.key)));
  }

  private fields(request: LoginHttpRequest): Record<string, unknown> {
    if ((request.headers['content-type'] ?? '').startsWith('application/json')) {
      try {
        const parsed: unknown = JSON.parse(request.body ?? '');
        return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
      } catch {
        throw new LoginRefused('the body is not valid JSON');
      }
    }
    return Object.fromEntries(new URLSearchParams(request.body ?? ''));
  }

  private async passwordLogin(request: LoginHttpRequest, url: URL): Promise<LoginHttpResponse> {
    const fields = this.fields(request);
    const text = (name: string) => (typeof fields[name] === 'string' ? (fields[name] as string) : '');
    const oidc = this.openIdInteraction(url);
    if (oidc) {
      const signedIn = await this.deps.service.passwordSignIn({
        username: text('username'),
        password: text('password'),
        source: request.source,
        deviceToken: text('deviceToken') || cookieOf(request, 'platform_device'),
      });
      const response = await this.openIdSignedIn(request, oidc, signedIn.user);
      const device = signedIn.deviceToken ? deviceCookie(signedIn.deviceToken, request.secure) : undefined;
      return { ...response, headers: { ...response.headers, ...(device ? { 'set-cookie': device } : {}) } };
    }
    const minted = await this.deps.service.passwordLogin({
      username: text('username'),
      password: text('password'),
      source: request.source,
      deviceToken: text('deviceToken') || cookieOf(request, 'platform_device'),
    });
    const device = minted.deviceToken ? deviceCookie(minted.deviceToken, request.secure) : undefined;
    if (wantsJson(request)) {
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          key: minted.key,
          keyName: minted.keyName,
          user: minted.user,
          deviceToken: minted.deviceToken,
          server: this.deps.serverUrl(request),
        }),
      };
    }
    const response = await this.signedIn(request, minted, cliRequestOf(url.searchParams));
    return { ...response, headers: { ...response.headers, ...(device ? { 'set-cookie': device } : {}) } };
  }

  private async passwordChange(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    const fields = this.fields(request);
    const text = (name: string) => (typeof fields[name] === 'string' ? (fields[name] as string) : '');
    await this.deps.service.changePassword({
      username: text('username'),
      oldPassword: text('oldPassword'),
      newPassword: text('newPassword'),
      source: request.source,
      deviceToken: text('deviceToken') || undefined,
    });
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ changed: true }),
    };
  }

  private async logout(request: LoginHttpRequest): Promise<LoginHttpResponse> {
    if (!request.caller) {
      return statusAnswer(new StatusError(401, 'Unauthorized', 'sign out needs the key to end'));
    }
    const identity = await this.deps.service.logout(request.caller.user, request.caller.keyName);
    const redirect = await this.afterLogout(request, identity);
    if (wantsJson(request))
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ loggedOut: identity !== undefined, redirect }),
      };
    return {
      status: 303,
      headers: { 'content-type': HTML, location: redirect },
      body: signedOutPage(redirect),
    };
  }

  /**
   * Where the person goes after signing out: for a key of an OpenID connector, the provider's
   * end-session endpoint (RP-initiated logout: `post_logout_redirect_uri` = `postLogoutRedirectURI`,
   * `id_token_hint` the sign-in's ID token), else, or when the provider has none or cannot be
   * reached, `postLogoutRedirectURI`; for any other key, the login page.
   */
  private async afterLogout(request: LoginHttpRequest, identity: SsoIdentity | undefined): Promise<string> {
    const loginPageUrl = `${this.deps.platformUrl(request)}${AUTH_BASE}/login`;
    const connector = identity?.connector;
    const method = connector ? this.deps.connectors.method(this.deps.config().auth, connector) : undefined;
    if (method?.kind !== 'oidc') return loginPageUrl;
    const fallback = method.config.postLogoutRedirectURI || loginPageUrl;
    try {
      const oidc = this.deps.connectors.connectorFor(method) as OidcConnector;
      return (await oidc.endSessionUrl(identity))?.toString() ?? fallback;
    } catch (err) {
      // The key is gone either way; the provider's session ends with its own expiry.
      if (!(err instanceof LoginRefused)) this.deps.onError?.(err);
      return fallback;
    }
  }

  /** Refusals as an error page (browsers) or a Status (JSON clients); anything else is a 500 without details. */
  private failure(request: LoginHttpRequest, err: unknown): LoginHttpResponse {
    if (!(err instanceof LoginRefused || err instanceof SealBroken)) this.deps.onError?.(err);
    const error = refusalStatus(err);
    if (wantsJson(request)) return statusAnswer(error);
    return {
      status: error.code,
      headers: { ...error.headers, 'content-type': HTML },
      body: errorPage(error.message),
    };
  }
}
