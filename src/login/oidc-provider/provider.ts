import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Provider, { type Adapter } from 'oidc-provider';
import { Agent, request as undiciRequest } from 'undici';
import type { ConfigStatus } from '../../api/config.ts';
import type { User } from '../../api/identity.ts';
import { resources } from '../../api/resources.ts';
import { StatusError } from '../../api/status.ts';
import type { Endpoint, EndpointAnswer, EndpointRequest } from '../../http/endpoint.ts';
import type { SigningKeyRing } from '../../identity/signing-key-ring.ts';
import { isNotFound } from '../../runtime/errors.ts';
import { setOwnValue } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectPath } from '../../runtime/kube-client.ts';
import { errorPage } from '../pages.ts';
import { type LoginSecrets, mac, SealBroken, seal, unseal } from '../secrets.ts';
import {
  CLIENT_AUTHENTICATION_PATHS,
  clientAuthenticationSubject,
  OIDC_PROVIDER_BASE,
  openIdProviderEnabled,
} from './clients.ts';
import { allowWildcardRedirects, providerConfiguration, providerJwks } from './configuration.ts';
import type { SecretModels } from './secret-models.ts';
import { RefreshTokenKeys } from './store.ts';

/**
 * The platform as an OpenID provider (Config `oidc`), for applications (Argo CD, Grafana, ...) that
 * sign people in through the platform's own login: oidc-provider (panva, OpenID Certified) serves
 * discovery, JWKS, the authorization code flow with PKCE (required of every client), the token
 * endpoint with refresh tokens, UserInfo and revocation under `/oidc` on the gateway's address,
 * issuer `<platform URL>/oidc`.
 *
 * - Clients are `oidc.clients`; `oidc.wildcardRedirect` lets their redirect URIs hold `*`;
 *   `oidc.enabled: false` answers 404 for everything under `/oidc`.
 * - Sign-in: oidc-provider's interaction (`/oidc/interaction/<uid>`, bound to the browser by its
 *   cookie) sends the person to the platform's login page (`/auth/login?oidc=<uid>`), password or
 *   any connector; after it, the login hands back a sealed `{uid, user}` (the login transaction
 *   key, minutes) to `/oidc/interaction/<uid>/login`, which finishes the interaction with the User
 *   only in the browser holding the interaction's cookie. Consent is implied: the clients are the
 *   platform admin's.
 * - ID tokens carry `sub` (the User's name), `preferred_username`, `name`, `email` and `groups`
 *   (`clients.ts`), signed ES256 with the platform's signing keys (`signing-keys.ts`): the JWKS is
 *   their ring (`signing-key-ring.ts`: the Secret watched), so keys rotate as they rotate.
 * - Storage: refresh tokens as OwnedAccessKeys (`store.ts`), the rest as Secrets in the platform
 *   namespace (`secret-models.ts`): every gateway replica sees what another issued.
 *
 * oidc-provider is a Node request handler (Koa); the gateway's endpoints answer whole requests. It
 * is served on a Unix socket in a directory only this process's user can enter, and the endpoint
 * forwards each request there with what the gateway established (scheme, host, client address),
 * so it runs unchanged and unreachable from the network except through the gateway.
 */

const GRANT_TTL_MS = 5 * 60_000;
/** Providers kept at once (one per issuer and configuration; the issuer follows the request's host without an external URL). */
const PROVIDERS_KEPT = 8;
const ISSUER_HEADER = 'x-platform-oidc-issuer';
const INTERACTION_PATH = /^\/interaction\/([A-Za-z0-9_-]{1,64})(\/login)?$/;

const tooManyClientFailures = (retryAfterSeconds: number) =>
  new StatusError(
    429,
    'TooManyRequests',
    'too many failed client authentications; retry later',
    { retryAfterSeconds },
    { 'Retry-After': String(retryAfterSeconds) },
  );

/** What the login hands to the interaction after a sign-in. */
interface InteractionGrant {
  readonly uid: string;
  readonly user: string;
}

export interface OpenIdProviderDeps {
  readonly api: KubeApi;
  /** The token signing keys, shared with the gateway's direct tokens. */
  readonly signingKeys: SigningKeyRing;
  readonly config: () => ConfigStatus;
  readonly secrets: () => Promise<LoginSecrets>;
  readonly pepper: () => Promise<Uint8Array>;
  /** Where every model but refresh tokens is kept (shared by the gateway replicas). */
  readonly models: SecretModels;
  /** The platform's URL for a request (`platformUrlFor`): the issuer is it plus `/oidc`. */
  readonly platformUrl: (request: EndpointRequest) => string;
  readonly onError?: (err: unknown) => void;
  readonly now?: () => number;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export class OpenIdProvider {
  private readonly now: () => number;
  private readonly providers = new Map<string, { provider: Provider; handle: Handler }>();
  private readonly models = new Map<string, Adapter>();
  private socket: Promise<{ server: Server; agent: Agent; dir: string }> | undefined;

  constructor(private readonly deps: OpenIdProviderDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** The endpoint under `/oidc` for the gateway. */
  endpoint(): Endpoint {
    return {
      name: 'openid-provider',
      route: { kind: 'path', path: OIDC_PROVIDER_BASE, prefix: true, methods: ['GET', 'POST'] },
      authentication: 'none',
      // Codes, tokens and client secrets pass here.
      sensitive: true,
      // A client's secret is checked here: failures count as failed keys do.
      checksCredentials: true,
      handle: (request) => this.forward(request),
    };
  }

  /** Where the login sends the browser after signing in `user` for the interaction `uid`. */
  async interactionReturn(platformUrl: string, uid: string, user: string): Promise<string> {
    const { transactionKey } = await this.deps.secrets();
    const grant: InteractionGrant = { uid, user };
    const sealed = await seal(grant, transactionKey, this.now() + GRANT_TTL_MS);
    return `${platformUrl}${OIDC_PROVIDER_BASE}/interaction/${uid}/login?grant=${encodeURIComponent(sealed)}`;
  }

  async close(): Promise<void> {
    const socket = await this.socket?.catch(() => undefined);
    if (!socket) return;
    await socket.agent.close();
    await new Promise<void>((resolve) => {
      socket.server.closeAllConnections();
      socket.server.close(() => resolve());
    });
    rmSync(socket.dir, { recursive: true, force: true });
  }

  private async forward(request: EndpointRequest): Promise<EndpointAnswer> {
    if (!openIdProviderEnabled(this.deps.config()))
      throw new StatusError(
        404,
        'NotFound',
        'the platform does not act as an OpenID provider (oidc.enabled: false)',
      );
    // Guessing a client's secret is limited as guessing keys is: the gateway's failure limits,
    // per source and per client (`oidc-client:<id>`), 429 with Retry-After once crossed.
    const subject = CLIENT_AUTHENTICATION_PATHS.has(request.path)
      ? clientAuthenticationSubject(
          typeof request.headers.authorization === 'string' ? request.headers.authorization : undefined,
          Buffer.from(request.body).toString('utf8'),
        )
      : undefined;
    const failures = subject ? request.credentialFailures : undefined;
    if (subject && !failures) throw new Error('the OpenID provider endpoint must declare checksCredentials');
    if (subject && failures) {
      const wait = await failures.blockedFor(subject);
      if (wait !== undefined) throw tooManyClientFailures(wait);
    }
    const answer = await this.relay(request);
    if (subject && failures && answer.code === 401) {
      const wait = await failures.failed(subject);
      if (wait !== undefined) throw tooManyClientFailures(wait);
    }
    return answer;
  }

  /** The request as oidc-provider answers it on its socket. */
  private async relay(request: EndpointRequest): Promise<EndpointAnswer & { code: number }> {
    const { agent } = await this.listening();
    const platformUrl = new URL(this.deps.platformUrl(request));
    const query = request.query.toString();
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || name.startsWith('x-forwarded-') || name === ISSUER_HEADER) continue;
      if (['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'].includes(name))
        continue;
      setOwnValue(headers, name, Array.isArray(value) ? value.join(', ') : value);
    }
    headers['x-forwarded-proto'] = platformUrl.protocol.slice(0, -1);
    headers['x-forwarded-host'] = platformUrl.host;
    headers['x-forwarded-for'] = request.source;
    headers[ISSUER_HEADER] = `${platformUrl.origin}${OIDC_PROVIDER_BASE}`;
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const answer = await undiciRequest(`http://oidc-provider${request.path}${query ? `?${query}` : ''}`, {
      method,
      headers,
      body: method === 'POST' ? Buffer.from(request.body) : undefined,
      dispatcher: agent,
    });
    const body = Buffer.from(await answer.body.arrayBuffer());
    const out: Record<string, string | string[]> = {};
    let contentType = 'text/plain; charset=utf-8';
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      if (name === 'content-type') contentType = String(value);
      else if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'date'].includes(name))
        setOwnValue(out, name, value);
    }
    return { code: answer.statusCode, headers: out, body, contentType };
  }

  private listening(): Promise<{ server: Server; agent: Agent; dir: string }> {
    this.socket ??= (async () => {
      // A directory of this user only (mkdtemp makes it 0700): nothing else on the host connects.
      const dir = mkdtempSync(join(tmpdir(), 'platform-oidc-'));
      const path = join(dir, 'provider.sock');
      const server = createServer((req, res) => {
        this.serve(req, res).catch((err: unknown) => {
          this.deps.onError?.(err);
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
          res.end('the OpenID provider failed on the server');
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path, resolve);
      });
      return { server, agent: new Agent({ connect: { socketPath: path } }), dir };
    })();
    this.socket.catch(() => {
      this.socket = undefined;
    });
    return this.socket;
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const issuer = String(req.headers[ISSUER_HEADER] ?? '');
    delete req.headers[ISSUER_HEADER];
    const { provider, handle } = await this.providerFor(issuer);
    // Mounted at /oidc: oidc-provider sees the path below it, and `originalUrl` for its own URLs.
    const full = req.url ?? '/';
    (req as IncomingMessage & { originalUrl?: string }).originalUrl = full;
    req.url = full.slice(OIDC_PROVIDER_BASE.length) || '/';
    const path = new URL(req.url, 'http://provider');
    const interaction = INTERACTION_PATH.exec(path.pathname);
    if (!interaction || req.method !== 'GET') return handle(req, res);
    const answerPage = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(errorPage(message));
    };
    let details: Awaited<ReturnType<Provider['interactionDetails']>>;
    try {
      details = await provider.interactionDetails(req, res);
    } catch {
      return answerPage(400, 'this sign-in has expired or was started in another browser; start it again');
    }
    if (details.uid !== interaction[1])
      return answerPage(400, 'this sign-in does not belong to this browser');
    if (!interaction[2]) {
      res.writeHead(303, {
        location: `/auth/login?oidc=${encodeURIComponent(details.uid)}`,
        'cache-control': 'no-store',
      });
      res.end();
      return;
    }
    const { transactionKey } = await this.deps.secrets();
    let grant: InteractionGrant;
    try {
      grant = (await unseal(
        path.searchParams.get('grant') ?? undefined,
        transactionKey,
        this.now(),
      )) as InteractionGrant;
    } catch (err) {
      if (err instanceof SealBroken) return answerPage(400, err.message);
      throw err;
    }
    if (grant.uid !== details.uid) return answerPage(400, 'this sign-in does not belong to this browser');
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: grant.user } },
      { mergeWithLastSubmission: false },
    );
  }

  private model(name: string): Adapter {
    let model = this.models.get(name);
    if (!model) {
      model =
        name === 'RefreshToken'
          ? new RefreshTokenKeys(
              this.deps.api,
              this.deps.pepper,
              async (user) => (await this.user(user))?.metadata.uid,
            )
          : this.deps.models.model(name);
      this.models.set(name, model);
    }
    return model;
  }

  private async user(name: string): Promise<User | undefined> {
    if (!name) return undefined;
    try {
      return await this.deps.api.request<User>({
        method: 'GET',
        path: objectPath(resources.users, undefined, name),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * The provider for an issuer and the current configuration and keys, built again when any of
   * them changes; every provider shares the stores, so a change ends no sign-in.
   */
  private async providerFor(issuer: string): Promise<{ provider: Provider; handle: Handler }> {
    const config = this.deps.config();
    const now = this.now();
    const jwks = providerJwks(await this.deps.signingKeys.current(), now);
    const { transactionKey } = await this.deps.secrets();
    const oidc = config.oidc;
    const fingerprint = JSON.stringify({ issuer, oidc, kids: jwks.keys.map((key) => key.kid) });
    const known = this.providers.get(fingerprint);
    if (known) return known;
    const provider: Provider = new Provider(
      issuer,
      providerConfiguration({
        oidc,
        jwks,
        cookieKey: mac('openid provider cookies v1', transactionKey),
        model: (name) => this.model(name),
        user: (name) => this.user(name),
        grant: (fields) => new provider.Grant(fields),
      }),
    );
    provider.proxy = true;
    // Failures of the provider's own (a store that cannot be written), for the log; clients see a 500.
    provider.on('server_error', (_ctx: unknown, err: unknown) => this.deps.onError?.(err));
    if (oidc?.wildcardRedirect === true) allowWildcardRedirects(provider);
    const built = { provider, handle: provider.callback() };
    this.providers.set(fingerprint, built);
    for (const oldest of this.providers.keys()) {
      if (this.providers.size <= PROVIDERS_KEPT) break;
      this.providers.delete(oldest);
    }
    return built;
  }
}
