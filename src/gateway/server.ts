import { randomUUID } from 'node:crypto';
import type https from 'node:https';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { V1Secret } from '@kubernetes/client-node';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import type { ConfigStatus } from '../api/config.ts';
import { PLATFORM_CONFIG_KEY, safeParseConfig } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import { GROUP_VERSION } from '../api/meta.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import type { Project } from '../api/project.ts';
import type { KindInfo } from '../api/registry.ts';
import {
  accessKeyExpired,
  badRequest,
  failureStatus,
  forbidden,
  internalError,
  invalid,
  notAcceptable,
  notFound,
  reasonForCode,
  requestEntityTooLarge,
  StatusError,
  serviceUnavailable,
  tooManyRequests,
  unauthorized,
} from '../api/status.ts';
import type { RequestAttributes } from '../authz/attributes.ts';
import { checkScope, PLATFORM_CLI_NON_RESOURCE_PATHS } from '../authz/scope.ts';
import type { Stored } from '../controllers/resources.ts';
import type { AuthenticatedIdentity, AuthenticationResult } from '../identity/authenticate.ts';
import { AccessKeyExpired } from '../identity/authenticate.ts';
import { AuthenticatorNotReady } from '../identity/authenticator.ts';
import { MalformedAccessKey, parseAccessKey, type RandomBytes } from '../identity/keys.ts';
import { projectMembers } from '../identity/members.ts';
import { formatMicroTime } from '../runtime/clock.ts';
import type { Store } from '../runtime/store.ts';
import type { Auditor, AuditRecord } from './audit/auditor.ts';
import type { AuditOutcome, AuditRequestInfo, AuditUser } from './audit/event.ts';
import { ANONYMOUS_USER } from './audit/event.ts';
import { type ReviewedAttributes, subjectAccessAllowed } from './proxy/sar.ts';
import {
  encodeBody,
  MAX_BODY_BYTES,
  mediaType,
  type Negotiated,
  negotiate,
  type ParsedPatch,
  parseObjectBody,
  parsePatchBody,
} from './pipeline/body.ts';
import { apiGroup, apiGroupList, apiResourceList, apiVersions, versionInfo } from './discovery/documents.ts';
import type { GatewayMetrics } from './metrics.ts';
import { createWithGeneratedName } from './names.ts';
import { openApiV2, openApiV3GroupVersion, openApiV3Index } from './discovery/openapi.ts';
import {
  ACCESS_KEY_EXTRA,
  type HeaderMap,
  impersonationHeaders,
  type Upstream,
  type UpstreamResponse,
  upstreamFailure,
} from './proxy/upstream.ts';
import type { AuthFailureLimiter } from './pipeline/throttle.ts';
import {
  BASE_PATH,
  type NonResourceEndpoint,
  type ResourceRoute,
  routeRequest,
  upstreamPath,
} from './pipeline/route.ts';
import {
  parseTokenReview,
  reviewDecision,
  reviewTarget,
  TOKEN_REVIEW_BASE,
  tokenReviewResponse,
} from './endpoints/token-review.ts';
import {
  checkOwnKeyWrite,
  isPlatformAdmin,
  ownerAccessKeys,
  ownerFieldSelector,
  ownsKey,
  type PreparedKeyCreate,
  prepareKeyCreate,
  sanitizeKeys,
} from './endpoints/access-key-rules.ts';
import {
  extensionEndpoint,
  type IssuedKey,
  SCOPE_CHECKED_BY_HANDLER,
  type VirtualEndpoints,
} from './virtual/extension.ts';

/**
 * The management gateway's HTTP server (fastify): authenticates every request's access key from
 * the informer caches, checks the key's scope, and sends the call to kube-apiserver impersonating
 * the key's identity, so that Kubernetes RBAC decides; serves discovery, OpenAPI and the virtual
 * resources; answers every error as a Kubernetes `Status`; audits and counts every request.
 * The only apiserver call per proxied request is the proxied call itself.
 */

export interface GatewayAuthenticator {
  /** From the caches, or a read past them for a key they do not know yet. */
  authenticate(token: string): AuthenticationResult | Promise<AuthenticationResult>;
  /** From the caches alone: for callers whose recent failures keep them off the apiserver. */
  authenticateCached(token: string): AuthenticationResult;
  ready(): boolean;
  readonly users: Store<Stored<User>>;
  readonly teams: Store<Stored<Team>>;
  readonly keys: Store<Stored<OwnedAccessKey>>;
}

export interface GatewayServerDeps {
  readonly upstream: Upstream;
  readonly authenticator: GatewayAuthenticator;
  /** The Project whose namespace `namespace` is, if any. */
  readonly projectOfNamespace: (namespace: string) => string | undefined;
  /** The platform-config Secret from the cache. */
  readonly configSecret: () => V1Secret | undefined;
  readonly platformNamespace: string;
  readonly random: RandomBytes;
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  readonly limiter: AuthFailureLimiter;
  readonly auditor: Auditor;
  readonly version: string;
  readonly virtualEndpoints: VirtualEndpoints;
  readonly readiness: () => { ready: boolean; notReady: string[] };
  /**
   * Public documents served without authentication (OIDC discovery and JWKS): the document for a
   * path, or undefined when the path is not one.
   */
  readonly publicDocument?: (path: string) => Promise<unknown>;
}

export interface GatewayServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** PEM; HTTPS when given, plain HTTP (behind an ingress) otherwise. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Take the client address from X-Forwarded-For (only behind a trusted proxy). */
  readonly trustProxy?: boolean;
  /** Time to receive a whole request. Default 60 s. */
  readonly requestTimeoutMs?: number;
}

export interface GatewayServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

/** The platform config as parsed, memoized per Secret resourceVersion. */
class ConfigView {
  private cached:
    | { resourceVersion: string | undefined; raw: string | undefined; status: ConfigStatus | undefined }
    | undefined;

  constructor(private readonly secret: () => V1Secret | undefined) {}

  current(): { raw: string | undefined; status: ConfigStatus | undefined } {
    const secret = this.secret();
    const resourceVersion = secret?.metadata?.resourceVersion;
    if (!this.cached || this.cached.resourceVersion !== resourceVersion) {
      const encoded = secret?.data?.[PLATFORM_CONFIG_KEY];
      const raw = encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
      const parsed = safeParseConfig(raw ?? '');
      this.cached = { resourceVersion, raw, status: parsed.ok ? parsed.config : undefined };
    }
    return this.cached;
  }
}

interface Ctx {
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  readonly started: number;
  readonly auditInfo: () => AuditRequestInfo;
  readonly negotiated: Negotiated;
  readonly signal: AbortSignal;
  attributes: RequestAttributes | undefined;
  identity: AuthenticatedIdentity | undefined;
  audit: AuditRecord | undefined;
  requestObject: unknown;
  finished: boolean;
}

const FORWARDED_QUERY = /^[\x21-\x7e]*$/;
const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The public id of a well-formed access key, for rate limits; never the secret. */
function keyIdOf(token: string | undefined): string | undefined {
  const parsed = token === undefined ? undefined : parseAccessKey(token);
  return parsed && !(parsed instanceof MalformedAccessKey) ? parsed.id : undefined;
}

/**
 * Content negotiation per distinct Accept header (clients send a handful of spellings, over and
 * over); errors are not kept, so each 406 is a fresh error.
 */
const NEGOTIATED = new Map<string, Negotiated>();
const NEGOTIATED_MAX = 256;

function negotiateCached(accept: string | undefined): Negotiated | StatusError {
  const key = accept ?? '';
  const cached = NEGOTIATED.get(key);
  if (cached) return cached;
  const negotiated = negotiate(accept);
  if (!(negotiated instanceof StatusError)) {
    if (NEGOTIATED.size >= NEGOTIATED_MAX) NEGOTIATED.clear();
    NEGOTIATED.set(key, negotiated);
  }
  return negotiated;
}
const WRITE_VERBS = new Set(['create', 'update', 'patch']);

export async function startGatewayServer(
  deps: GatewayServerDeps,
  options: GatewayServerOptions,
): Promise<GatewayServer> {
  const config = new ConfigView(deps.configSecret);
  const log = deps.logger;
  const sendStatus = (reply: FastifyReply, error: StatusError, format: 'json' | 'yaml' = 'json') => {
    const encoded = encodeBody(error.toStatus(), format);
    reply
      .code(error.code)
      .headers({ ...error.headers, 'content-type': encoded.contentType })
      .send(encoded.body);
  };

  const common: FastifyServerOptions = {
    logger: false,
    bodyLimit: MAX_BODY_BYTES,
    requestTimeout: options.requestTimeoutMs ?? 60_000,
    keepAliveTimeout: 65_000,
    return503OnClosing: true,
    trustProxy: options.trustProxy ?? false,
    routerOptions: {
      maxParamLength: 8192,
      onBadUrl: (_path, _req, res) => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify(badRequest('the request path is not valid percent-encoding').toStatus()));
      },
    },
    frameworkErrors: (error, _request, reply) => {
      sendStatus(reply, badRequest(`the request could not be read (${error.code ?? 'error'})`));
    },
  };
  const app: FastifyInstance = options.tls
    ? (Fastify({
        ...(common as unknown as FastifyServerOptions<https.Server>),
        https: { cert: options.tls.cert, key: options.tls.key },
      }) as unknown as FastifyInstance)
    : Fastify(common);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (_request, body, done) => {
    done(null, body);
  });
  app.setErrorHandler((error: Error & { code?: string; statusCode?: number }, _request, reply) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) {
      sendStatus(reply, requestEntityTooLarge(MAX_BODY_BYTES));
      return;
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      const status = new StatusError(
        error.statusCode,
        reasonForCode(error.statusCode),
        'the request could not be read',
      );
      sendStatus(reply, status);
      return;
    }
    log.error({ err: error }, 'gateway request failed');
    sendStatus(reply, internalError());
  });

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const started = performance.now();
    const url = request.raw.url ?? '/';
    const queryStart = url.indexOf('?');
    const path = queryStart < 0 ? url : url.slice(0, queryStart);
    const search = queryStart < 0 ? '' : url.slice(queryStart);
    const abort = new AbortController();
    // The response closes when it is finished or when the client went away; only the latter aborts.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) abort.abort(new Error('client went away'));
    });

    // Operations endpoints, unauthenticated, at the root and under the base path.
    const opsPath = path.startsWith(BASE_PATH) ? path.slice(BASE_PATH.length) : path;
    if (opsPath === '/healthz' || opsPath === '/livez') return void reply.type('text/plain').send('ok');
    if (opsPath === '/readyz') {
      const report = deps.readiness();
      return void reply
        .code(report.ready ? 200 : 503)
        .type('text/plain')
        .send(report.ready ? 'ok' : `not ready:\n${report.notReady.map((n) => `- ${n}`).join('\n')}\n`);
    }
    if (opsPath === '/metrics') {
      const text = await deps.metrics.registry.metrics();
      return void reply.type(deps.metrics.registry.contentType).send(text);
    }
    if (path.startsWith(`${TOKEN_REVIEW_BASE}/`)) {
      return tokenReview(request, reply, path.slice(TOKEN_REVIEW_BASE.length), started);
    }
    if (request.method === 'GET' && deps.publicDocument && !path.startsWith(`${BASE_PATH}/`)) {
      const document = await deps.publicDocument(path).catch((error: unknown) => {
        log.error({ err: error }, 'public document could not be built');
        return serviceUnavailable('the document is not available yet; retry shortly');
      });
      if (document instanceof StatusError) return sendStatus(reply, document);
      if (document !== undefined) {
        return void reply
          .type('application/json')
          .header('cache-control', 'public, max-age=60')
          .send(JSON.stringify(document));
      }
    }

    const negotiated = negotiateCached(request.headers.accept);
    const format = negotiated instanceof StatusError ? 'json' : negotiated.format;
    let attributes: RequestAttributes | undefined;
    // Formatted only when an audit event needs it.
    const receivedAt = Date.now();
    const ctx: Ctx = {
      request,
      reply,
      started,
      negotiated:
        negotiated instanceof StatusError
          ? { format: 'json', upstreamAccept: 'application/json' }
          : negotiated,
      signal: abort.signal,
      attributes: undefined,
      identity: undefined,
      audit: undefined,
      requestObject: undefined,
      finished: false,
      auditInfo: () => ({
        auditID: randomUUID(),
        requestURI: url,
        attributes: ctx.attributes ?? fallbackAttributes(request.method, path),
        user: ctx.identity ? auditUser(ctx.identity) : ANONYMOUS_USER,
        sourceIPs: [request.ip],
        ...(request.headers['user-agent'] ? { userAgent: request.headers['user-agent'] } : {}),
        requestReceivedTimestamp: formatMicroTime(receivedAt),
      }),
    };
    try {
      if (path !== BASE_PATH && !path.startsWith(`${BASE_PATH}/`)) throw notFound();
      const route = routeRequest(
        request.method,
        path.slice(BASE_PATH.length) || '/',
        new URLSearchParams(search),
      );
      if (route instanceof StatusError) {
        // Unknown paths: 404 after authentication, as kube-apiserver answers.
        await authenticate(ctx);
        throw route;
      }
      attributes = withProject(route.attributes, deps.projectOfNamespace);
      ctx.attributes = attributes;
      if (
        route.kind === 'nonResource' &&
        route.endpoint === 'version' &&
        config.current().status?.authenticateVersionEndpoint !== true
      ) {
        return send(ctx, 200, versionInfo(deps.version), 'json');
      }
      // Synchronous unless a recent failure makes the rate limiter decide (or record) first.
      const authenticating = authenticate(ctx);
      if (authenticating) await authenticating;
      const identity = ctx.identity!;
      const extension = extensionEndpoint(attributes);
      // Discovery and OpenAPI are the same for every caller and name no project: every key may
      // read them (kubectl cannot work without), whatever its scope narrows.
      const discovery =
        route.kind === 'nonResource' &&
        attributes.verb === 'get' &&
        PLATFORM_CLI_NON_RESOURCE_PATHS.includes(attributes.path);
      const scope =
        discovery || (extension !== undefined && SCOPE_CHECKED_BY_HANDLER.has(extension))
          ? { allowed: true as const }
          : checkScope(identity.accessKey.scope, attributes);
      if (!scope.allowed) throw forbidden(`${describe(attributes, identity)}: ${scope.reason}`);
      if (negotiated instanceof StatusError) throw negotiated;

      let body: Record<string, unknown> | ParsedPatch | undefined;
      if (
        route.kind === 'resource' &&
        (WRITE_VERBS.has(attributes.verb) || (attributes.verb === 'delete' && hasBody(request)))
      ) {
        body = decodeBody(request, attributes.verb);
        ctx.requestObject = attributes.verb === 'patch' ? (body as ParsedPatch).value : body;
      }
      // The audit event's request info is built only when an audit log is being written.
      ctx.audit = deps.auditor.enabled ? deps.auditor.begin(ctx.auditInfo(), ctx.requestObject) : undefined;
      if (route.kind === 'nonResource') return nonResource(ctx, route.endpoint);
      return await resource(ctx, route, body);
    } catch (error) {
      const status = toGatewayError(error, log);
      finish(ctx, status.code, status.toStatus(), () => sendStatus(reply, status, format));
    }
  };

  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: '*',
    // An async handler that sends must return the reply, or fastify may end a streamed answer early.
    handler: async (request, reply) => {
      await handler(request, reply);
      return reply;
    },
  });

  // ---------------------------------------------------------------------------------------------

  /**
   * Authenticates the request's bearer key into `ctx.identity` or throws its `Status`. A key whose
   * secret verifies is accepted whatever failures others made with its id or from its source:
   * only failing attempts are throttled (429 once a source or key id is over its limit).
   * Returns a promise only when something asynchronous is needed (a read past the caches for a
   * key they do not know yet, the rate limiter after a failure): the common case is synchronous.
   */
  function authenticate(ctx: Ctx): Promise<void> | undefined {
    const header = ctx.request.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    const token = match?.[1] ?? '';
    const source = ctx.request.ip;
    if (!deps.authenticator.ready())
      throw serviceUnavailable('the gateway is starting: its caches are not synced yet');
    // Callers that failed recently are judged on the caches alone: no apiserver reads for them.
    const suspect = deps.limiter.watching() && deps.limiter.mayBeBlocked(source, keyIdOf(token));
    let result: AuthenticationResult | Promise<AuthenticationResult>;
    try {
      result = suspect
        ? deps.authenticator.authenticateCached(token)
        : deps.authenticator.authenticate(token);
    } catch (error) {
      if (error instanceof AuthenticatorNotReady) {
        throw serviceUnavailable('the gateway is starting: its caches are not synced yet');
      }
      throw error;
    }
    if (result instanceof Promise) return result.then((settled) => conclude(ctx, settled, token, source));
    return conclude(ctx, result, token, source);
  }

  function conclude(
    ctx: Ctx,
    result: AuthenticationResult,
    token: string,
    source: string,
  ): Promise<void> | undefined {
    if (result.ok) {
      ctx.identity = result.identity;
      return undefined;
    }
    return refused(ctx, result, token, source);
  }

  async function refused(
    ctx: Ctx,
    result: Extract<AuthenticationResult, { ok: false }>,
    token: string | undefined,
    source: string,
  ): Promise<void> {
    const wait = await deps.limiter.failed(source, result.keyId ?? keyIdOf(token));
    if (wait !== undefined) throw tooManyRequests(wait);
    const error = result.failure instanceof AccessKeyExpired ? accessKeyExpired() : unauthorized();
    deps.auditor.failedAuthentication(ctx.auditInfo(), {
      code: error.code,
      status: 'Failure',
      message: error.message,
      reason: error.reason,
      annotations: { 'authentication.platform/failure': result.failure.name },
    });
    throw error;
  }

  function finish(ctx: Ctx, code: number, responseObject: unknown, write: () => void): undefined {
    if (ctx.finished) return;
    ctx.finished = true;
    write();
    deps.metrics.observe(ctx.attributes, code, (performance.now() - ctx.started) / 1000);
    const failed = code >= 400;
    const status = responseObject as { message?: string; reason?: string } | undefined;
    ctx.audit?.complete({
      code,
      ...(failed ? { status: 'Failure', message: status?.message, reason: status?.reason } : {}),
      ...(responseObject !== undefined ? { responseObject } : {}),
    } as AuditOutcome);
    return undefined;
  }

  function send(ctx: Ctx, code: number, value: unknown, forceFormat?: 'json' | 'yaml'): undefined {
    const encoded = encodeBody(value, forceFormat ?? ctx.negotiated.format);
    finish(ctx, code, value, () => {
      ctx.reply.code(code).header('content-type', encoded.contentType).send(encoded.body);
    });
    return undefined;
  }

  function nonResource(ctx: Ctx, endpoint: NonResourceEndpoint): undefined {
    const served = (info: KindInfo) => {
      const parent = 'subresourceOf' in info ? info.subresourceOf : undefined;
      const name = extensionEndpoint({
        resource: parent?.plural ?? info.plural,
        subresource: parent?.subresource ?? '',
      } as RequestAttributes);
      return name === undefined || deps.virtualEndpoints[name] !== undefined;
    };
    switch (endpoint) {
      case 'api':
        return send(ctx, 200, apiVersions(), 'json');
      case 'apis':
        return send(ctx, 200, apiGroupList(), 'json');
      case 'group':
        return send(ctx, 200, apiGroup(), 'json');
      case 'groupVersion':
        return send(ctx, 200, apiResourceList(served), 'json');
      case 'version':
        return send(ctx, 200, versionInfo(deps.version), 'json');
      case 'openapiV3':
        return send(ctx, 200, openApiV3Index(BASE_PATH), 'json');
      case 'openapiV3GroupVersion': {
        const { json } = openApiV3GroupVersion();
        return finish(ctx, 200, undefined, () =>
          ctx.reply
            .code(200)
            .header('content-type', 'application/json')
            .header('cache-control', 'public, immutable')
            .send(json),
        );
      }
      case 'openapiV2': {
        const accept = ctx.request.headers.accept ?? '';
        if (accept !== '' && !/application\/json|\*\/\*/.test(accept)) {
          throw notAcceptable('the OpenAPI v2 document is served as application/json only');
        }
        const json = openApiV2();
        return finish(ctx, 200, undefined, () =>
          ctx.reply.code(200).header('content-type', 'application/json').send(json),
        );
      }
      default:
        throw notFound();
    }
  }

  async function resource(
    ctx: Ctx,
    route: ResourceRoute,
    body: Record<string, unknown> | ParsedPatch | undefined,
  ): Promise<void> {
    const attributes = ctx.attributes!;
    const identity = ctx.identity!;
    const impersonation = impersonationHeaders(identity);
    if (impersonation instanceof StatusError) throw impersonation;
    const { resource: plural, subresource, verb } = attributes;

    const extension = extensionEndpoint(attributes);
    if (extension) {
      const handle = deps.virtualEndpoints[extension];
      if (!handle || verb !== 'create')
        throw notFound(`${plural}${subresource ? `/${subresource}` : ''} is not served`);
      const answer = await handle({
        identity,
        attributes,
        body: body as Record<string, unknown> | undefined,
        query: route.query,
        upstream: deps.upstream,
        impersonation,
        signal: ctx.signal,
        authorize: (reviewed) => allowedBySar(identity, reviewed, ctx.signal),
        projectOfNamespace: deps.projectOfNamespace,
        issueKey: (keyBody) => issueKey(identity, keyBody, ctx.signal),
      });
      return send(ctx, answer.code, answer.body);
    }
    if (plural === 'projects' && subresource === 'members') {
      if (verb !== 'get') throw methodNotAllowedFor(attributes);
      return members(ctx, impersonation);
    }
    if ((plural === 'users' || plural === 'teams') && subresource === 'accesskeys') {
      if (verb !== 'get') throw methodNotAllowedFor(attributes);
      return ownerKeys(ctx, impersonation);
    }
    if (plural === 'configs') return configs(ctx, body as Record<string, unknown> | undefined);
    if (plural === 'ownedaccesskeys') return accessKeys(ctx, route, body, impersonation);
    if (!route.parent.stored) throw notFound();
    return proxy(ctx, route, body, impersonation);
  }

  /** The plain impersonated proxy: the same call on kube-apiserver, as the caller. */
  async function proxy(
    ctx: Ctx,
    route: ResourceRoute,
    body: Record<string, unknown> | ParsedPatch | undefined,
    headers: HeaderMap,
    options: { transform?: (value: unknown) => unknown; search?: string } = {},
  ): Promise<void> {
    const attributes = ctx.attributes!;
    const search = options.search ?? forwardedSearch(ctx.request.raw.url ?? '');
    const requestHeaders: HeaderMap = { ...headers, accept: ctx.negotiated.upstreamAccept };
    const userAgent = ctx.request.headers['user-agent'];
    if (typeof userAgent === 'string' && /^[\x20-\x7e]*$/.test(userAgent))
      requestHeaders['user-agent'] = userAgent;
    let payload: string | undefined;
    if (body !== undefined) {
      const patch = attributes.verb === 'patch' ? (body as ParsedPatch) : undefined;
      requestHeaders['content-type'] = patch ? patchContentType(patch) : 'application/json';
      payload = JSON.stringify(
        patch ? patch.value : withTypeMeta(body as Record<string, unknown>, route, attributes),
      );
    }
    const watch = attributes.verb === 'watch';
    let response: UpstreamResponse;
    try {
      response = await deps.upstream.request({
        method: upstreamMethod(ctx.request.method),
        path: upstreamPath(attributes),
        search,
        headers: requestHeaders,
        ...(payload !== undefined ? { body: payload } : {}),
        signal: ctx.signal,
        stream: watch,
      });
    } catch (error) {
      throw upstreamFailure(error, ctx.signal);
    }
    return relay(ctx, response, options.transform);
  }

  /** Sends an apiserver answer on: streamed when nothing needs to look at it, decoded otherwise. */
  async function relay(
    ctx: Ctx,
    response: UpstreamResponse,
    transform?: (value: unknown) => unknown,
  ): Promise<void> {
    const { statusCode } = response;
    const contentType = headerValue(response.headers['content-type']) ?? 'application/json';
    const isJson = mediaType(contentType) === 'application/json';
    const watch = ctx.attributes?.verb === 'watch' && statusCode === 200;
    const wantsResponse = ctx.audit?.level === 'RequestResponse';
    const passHeaders: Record<string, string> = { 'content-type': contentType };
    for (const name of ['warning', 'retry-after'] as const) {
      const value = headerValue(response.headers[name]);
      if (value !== undefined) passHeaders[name] = value;
    }
    if (watch) {
      ctx.audit?.responseStarted({ code: statusCode });
      const stream = transform ? response.body.pipe(lineTransform(transform)) : response.body;
      response.body.on('error', () => stream.destroy());
      ctx.finished = true;
      deps.metrics.observe(ctx.attributes, statusCode, (performance.now() - ctx.started) / 1000);
      ctx.reply.raw.once('close', () => ctx.audit?.complete({ code: statusCode }));
      // Headers go out at once (a watch may stay silent for minutes); then events as they come.
      ctx.reply.hijack();
      const raw = ctx.reply.raw;
      raw.writeHead(statusCode, { ...passHeaders, 'cache-control': 'no-cache, private' });
      raw.flushHeaders();
      pipeline(stream, raw).catch(() => {
        // The client went away or the apiserver ended the watch: nothing to answer any more.
      });
      return;
    }
    if (!transform && ctx.negotiated.format === 'json' && !wantsResponse) {
      // Small answers (most GETs) are read whole and sent with their length in one write: a
      // piped stream would go out chunked, in more writes, at a higher CPU cost per request.
      const length = Number(headerValue(response.headers['content-length']) ?? Number.NaN);
      const body =
        length <= BUFFERED_RESPONSE_BYTES ? Buffer.from(await response.body.arrayBuffer()) : response.body;
      finish(ctx, statusCode, undefined, () => {
        ctx.reply.code(statusCode).headers(passHeaders).send(body);
      });
      return;
    }
    const text = await response.body.text();
    let value: unknown;
    if (isJson) {
      try {
        value = JSON.parse(text);
      } catch {
        value = undefined;
      }
    }
    if (value === undefined) {
      finish(ctx, statusCode, undefined, () => ctx.reply.code(statusCode).headers(passHeaders).send(text));
      return;
    }
    const out = transform && statusCode < 400 ? transform(value) : value;
    send(ctx, statusCode, out);
  }

  async function members(ctx: Ctx, impersonation: HeaderMap): Promise<void> {
    const attributes = ctx.attributes!;
    const path = upstreamPath({ ...attributes, subresource: '' });
    const answer = await deps.upstream
      .json<Project>({ method: 'GET', path, headers: impersonation, signal: ctx.signal })
      .catch((error: unknown) => {
        throw upstreamFailure(error, ctx.signal);
      });
    if (answer.statusCode !== 200)
      return send(
        ctx,
        answer.statusCode,
        answer.body ??
          failureStatus(answer.statusCode, reasonForCode(answer.statusCode), 'the project could not be read'),
      );
    const users = deps.authenticator.users.list();
    const teams = deps.authenticator.teams.list();
    return send(ctx, 200, {
      apiVersion: GROUP_VERSION,
      kind: 'ProjectMembers',
      metadata: { name: attributes.name },
      ...projectMembers(answer.body, users, teams),
    });
  }

  const allowedBySar = (
    identity: AuthenticatedIdentity,
    attributes: ReviewedAttributes,
    signal: AbortSignal,
  ) => subjectAccessAllowed(deps.upstream, identity, attributes, signal);

  function rbacForbidden(identity: AuthenticatedIdentity, attributes: RequestAttributes): StatusError {
    const resource = attributes.subresource
      ? `${attributes.resource}/${attributes.subresource}`
      : attributes.resource;
    return forbidden(
      `${resource}.management.platform${attributes.name ? ` "${attributes.name}"` : ''} is forbidden: User "${identity.username}" cannot ${attributes.verb} resource "${resource}" in API group "management.platform" at the cluster scope`,
      {
        group: 'management.platform',
        kind: attributes.resource,
        ...(attributes.name ? { name: attributes.name } : {}),
      },
    );
  }

  async function ownerKeys(ctx: Ctx, _impersonation: HeaderMap): Promise<void> {
    const attributes = ctx.attributes!;
    const identity = ctx.identity!;
    const team = attributes.resource === 'teams';
    const self = team
      ? (identity.kind === 'Team' && identity.name === attributes.name) ||
        identity.groups.includes(`platform:team:${attributes.name}`)
      : identity.kind === 'User' && identity.name === attributes.name;
    if (!self && !isPlatformAdmin(identity) && !(await allowedBySar(identity, attributes, ctx.signal))) {
      throw rbacForbidden(identity, attributes);
    }
    return send(
      ctx,
      200,
      ownerAccessKeys(
        team ? 'TeamAccessKeys' : 'UserAccessKeys',
        attributes.name,
        deps.authenticator.keys.list(),
      ),
    );
  }

  async function configs(ctx: Ctx, body: Record<string, unknown> | undefined): Promise<void> {
    const attributes = ctx.attributes!;
    const identity = ctx.identity!;
    if (attributes.subresource !== '') throw notFound();
    if (attributes.verb !== 'get' && attributes.verb !== 'create') throw methodNotAllowedFor(attributes);
    if (!(await allowedBySar(identity, attributes, ctx.signal))) throw rbacForbidden(identity, attributes);
    if (attributes.verb === 'get') {
      const current = config.current();
      const parsed = safeParseConfig(current.raw ?? '');
      return send(ctx, 200, {
        apiVersion: GROUP_VERSION,
        kind: 'Config',
        metadata: { name: attributes.name },
        spec: { raw: current.raw ?? '' },
        ...(parsed.ok ? { status: parsed.config } : {}),
      });
    }
    if (config.current().status?.disableConfigEndpoint === true) {
      throw forbidden('setting the platform config through the API is disabled (disableConfigEndpoint)');
    }
    const object = body ?? {};
    const metadata = (object.metadata ?? {}) as { name?: unknown };
    const name = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : 'config';
    const spec = object.spec as { raw?: unknown } | undefined;
    if (object.kind !== undefined && object.kind !== 'Config')
      throw badRequest('the kind in the data does not match the expected kind Config');
    if (typeof spec?.raw !== 'string') {
      throw invalid('Config', name, [
        {
          field: 'spec.raw',
          reason: 'FieldValueRequired',
          message: 'the raw configuration text is required',
        },
      ]);
    }
    const parsed = safeParseConfig(spec.raw);
    if (!parsed.ok) {
      throw invalid(
        'Config',
        name,
        parsed.error.issues.map((issue) => ({
          field: issue.path ? `spec.raw: ${issue.path}` : 'spec.raw',
          reason: 'FieldValueInvalid',
          message: issue.message,
        })),
      );
    }
    if (ctx.request.url.includes('dryRun=')) {
      return send(ctx, 201, {
        apiVersion: GROUP_VERSION,
        kind: 'Config',
        metadata: { name },
        spec: { raw: spec.raw },
        status: parsed.config,
      });
    }
    await writeConfigSecret(spec.raw, ctx.signal);
    return send(ctx, 201, {
      apiVersion: GROUP_VERSION,
      kind: 'Config',
      metadata: { name },
      spec: { raw: spec.raw },
      status: parsed.config,
    });
  }

  async function writeConfigSecret(raw: string, signal: AbortSignal): Promise<void> {
    const collection = `/api/v1/namespaces/${encodeURIComponent(deps.platformNamespace)}/secrets`;
    const data = { [PLATFORM_CONFIG_KEY]: Buffer.from(raw, 'utf8').toString('base64') };
    const patch = await deps.upstream.json({
      method: 'PATCH',
      path: `${collection}/platform-config`,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ data }),
      signal,
    });
    if (patch.statusCode === 200) return;
    if (patch.statusCode === 404) {
      const created = await deps.upstream.json({
        method: 'POST',
        path: collection,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'platform-config', namespace: deps.platformNamespace },
          type: 'Opaque',
          data,
        }),
        signal,
      });
      if (created.statusCode === 201) return;
    }
    throw serviceUnavailable('the platform config could not be stored');
  }

  async function accessKeys(
    ctx: Ctx,
    route: ResourceRoute,
    body: Record<string, unknown> | ParsedPatch | undefined,
    impersonation: HeaderMap,
  ): Promise<void> {
    const attributes = ctx.attributes!;
    const identity = ctx.identity!;
    const admin = isPlatformAdmin(identity);
    const { verb, subresource } = attributes;
    if (verb === 'create' && subresource === '')
      return createKey(ctx, body as Record<string, unknown>, admin ? impersonation : {});
    if (admin) return proxy(ctx, route, body, impersonation, { transform: sanitizeKeys });
    // Callers who are not admins act on their own keys only, as the operator.
    if (verb === 'list' || verb === 'watch') {
      const query = new URLSearchParams(forwardedSearch(ctx.request.raw.url ?? '').slice(1));
      const selector = ownerFieldSelector(identity, query.get('fieldSelector'));
      query.set('fieldSelector', selector);
      return proxy(ctx, route, undefined, {}, { transform: sanitizeKeys, search: `?${query.toString()}` });
    }
    if (verb === 'deletecollection') throw forbidden('only platform admins may delete access keys in bulk');
    if (subresource === 'status' && verb !== 'get')
      throw forbidden('only platform admins may write the status of access keys');
    const current = await deps.upstream
      .json<OwnedAccessKey>({
        method: 'GET',
        path: upstreamPath({ ...attributes, subresource: '' }),
        signal: ctx.signal,
      })
      .catch((error: unknown) => {
        throw upstreamFailure(error, ctx.signal);
      });
    if (current.statusCode !== 200 || !ownsKey(identity, current.body)) {
      throw notFound(`ownedaccesskeys.management.platform "${attributes.name}" not found`, {
        name: attributes.name,
        group: 'management.platform',
        kind: 'ownedaccesskeys',
      });
    }
    if (verb === 'get') return send(ctx, 200, sanitizeKeys(current.body));
    if (verb === 'update') {
      const refusal = checkOwnKeyWrite(identity, body as Record<string, unknown>);
      if (refusal) throw refusal;
      return proxy(ctx, route, body, {}, { transform: sanitizeKeys });
    }
    if (verb === 'patch') {
      const patch = body as ParsedPatch;
      const dry = new URLSearchParams(forwardedSearch(ctx.request.raw.url ?? '').slice(1));
      dry.set('dryRun', 'All');
      const preview = await deps.upstream
        .json<Record<string, unknown>>({
          method: 'PATCH',
          path: upstreamPath(attributes),
          search: `?${dry.toString()}`,
          headers: { 'content-type': patchContentType(patch) },
          body: JSON.stringify(patch.value),
          signal: ctx.signal,
        })
        .catch((error: unknown) => {
          throw upstreamFailure(error, ctx.signal);
        });
      if (preview.statusCode !== 200 && preview.statusCode !== 201) {
        return send(
          ctx,
          preview.statusCode,
          preview.body ??
            failureStatus(preview.statusCode, reasonForCode(preview.statusCode), 'the patch was refused'),
        );
      }
      const refusal = checkOwnKeyWrite(identity, preview.body);
      if (refusal) throw refusal;
      return proxy(ctx, route, body, {}, { transform: sanitizeKeys });
    }
    return proxy(ctx, route, body, {}, { transform: sanitizeKeys });
  }

  async function createKey(ctx: Ctx, body: Record<string, unknown>, headers: HeaderMap): Promise<void> {
    const identity = ctx.identity!;
    const prepared = prepareKeyCreate(body, identity, deps.random);
    if (prepared instanceof StatusError) throw prepared;
    if (!isPlatformAdmin(identity)) {
      const refusal = checkOwnKeyWrite(identity, prepared.object);
      if (refusal) throw refusal;
    }
    const answer = await insertKey(prepared, headers, forwardedSearch(ctx.request.raw.url ?? ''), ctx.signal);
    if (answer.statusCode !== 201 && answer.statusCode !== 200) {
      return send(ctx, answer.statusCode, answer.body ?? keyCreateFailure(answer.statusCode));
    }
    const created = sanitizeKeys(answer.body) as { spec?: Record<string, unknown> };
    // The plaintext, this once.
    return send(ctx, answer.statusCode, { ...created, spec: { ...created.spec, key: prepared.plaintext } });
  }

  /** Creates a prepared key (a generated name retried on collisions, as kube-apiserver does). */
  async function insertKey(
    prepared: PreparedKeyCreate,
    headers: HeaderMap,
    search: string,
    signal: AbortSignal,
  ): Promise<{ statusCode: number; body: Record<string, unknown> | undefined }> {
    const post = async (name: string | undefined) => {
      const object =
        name === undefined
          ? prepared.object
          : { ...prepared.object, metadata: { ...(prepared.object.metadata as object), name } };
      const answer = await deps.upstream
        .json<Record<string, unknown>>({
          method: 'POST',
          path: `/apis/${GROUP_VERSION}/ownedaccesskeys`,
          search,
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify(object),
          signal,
        })
        .catch((error: unknown) => {
          throw upstreamFailure(error, signal);
        });
      if (
        answer.statusCode === 409 &&
        name !== undefined &&
        (answer.body as { reason?: string } | undefined)?.reason === 'AlreadyExists'
      ) {
        throw new NameTaken(answer);
      }
      return answer;
    };
    try {
      return prepared.generateName
        ? await createWithGeneratedName(prepared.generateName, post, {
            random: deps.random,
            isNameTaken: (error) => error instanceof NameTaken,
          })
        : await post(undefined);
    } catch (error) {
      if (error instanceof Error && error.name === 'GeneratedNameConflict') {
        throw new StatusError(409, 'AlreadyExists', error.message);
      }
      throw error;
    }
  }

  /**
   * A key the platform issues to the caller for one of its own endpoints (a kubeconfig), created
   * as the operator: the endpoint's own authorization decided; the body's owner is the caller.
   */
  async function issueKey(
    identity: AuthenticatedIdentity,
    body: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<IssuedKey> {
    const prepared = prepareKeyCreate(body, identity, deps.random);
    if (prepared instanceof StatusError) throw prepared;
    const answer = await insertKey(prepared, {}, '', signal);
    if (answer.statusCode !== 201 && answer.statusCode !== 200) {
      const status = (answer.body ?? keyCreateFailure(answer.statusCode)) as { message?: string };
      throw new StatusError(
        answer.statusCode >= 500 ? 503 : answer.statusCode,
        reasonForCode(answer.statusCode >= 500 ? 503 : answer.statusCode),
        `the access key could not be created: ${status.message ?? 'unknown error'}`,
      );
    }
    return { object: sanitizeKeys(answer.body) as Record<string, unknown>, plaintext: prepared.plaintext };
  }

  async function tokenReview(
    request: FastifyRequest,
    reply: FastifyReply,
    path: string,
    started: number,
  ): Promise<void> {
    const attributes: RequestAttributes = {
      target: 'Management',
      verb: 'create',
      resourceRequest: true,
      apiGroup: 'authentication.k8s.io',
      resource: 'tokenreviews',
      subresource: '',
      name: '',
      namespace: '',
      path: request.raw.url ?? '',
    };
    const done = (code: number, value: unknown) => {
      deps.metrics.observe(attributes, code, (performance.now() - started) / 1000);
      reply.code(code).header('content-type', 'application/json').send(JSON.stringify(value));
    };
    try {
      if (request.method !== 'POST') throw methodNotAllowedFor(attributes);
      const target = reviewTarget(path);
      if (target instanceof StatusError) throw target;
      const object = parseObjectBody(
        bodyBytes(request),
        request.headers['content-type'] ?? 'application/json',
      );
      if (object instanceof StatusError) throw object;
      const review = parseTokenReview(object);
      if (review instanceof StatusError) throw review;
      if (!deps.authenticator.ready())
        throw serviceUnavailable('the gateway is starting: its caches are not synced yet');
      const parsed = parseAccessKey(review.token);
      const keyId = parsed instanceof MalformedAccessKey ? undefined : parsed.id;
      // Per key only: the source is the reviewing apiserver, which speaks for many clients. A
      // key whose secret verifies is accepted whatever failures others made with its id.
      const suspect = keyId !== undefined && deps.limiter.mayBeBlocked('', keyId);
      const result = suspect
        ? deps.authenticator.authenticateCached(review.token)
        : await deps.authenticator.authenticate(review.token);
      const identity = reviewDecision(
        result,
        target,
        config.current().status?.projectNamespacePrefix ?? 'p-',
      );
      if (!result.ok) await deps.limiter.failed('', result.keyId ?? keyId);
      const info: AuditRequestInfo = {
        auditID: randomUUID(),
        requestURI: request.raw.url ?? '',
        attributes: { ...attributes, ...(target.kind === 'Cluster' ? { cluster: target.cluster } : {}) },
        user: ANONYMOUS_USER,
        sourceIPs: [request.ip],
        requestReceivedTimestamp: formatMicroTime(Date.now()),
      };
      deps.auditor.begin(info)?.complete({
        code: 200,
        annotations: { 'authentication.platform/authenticated': String(identity !== undefined) },
      });
      done(200, tokenReviewResponse(review, identity));
    } catch (error) {
      const status = toGatewayError(error, log);
      done(status.code, status.toStatus());
    }
  }

  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const scheme = options.tls ? 'https' : 'http';
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    port,
    url: `${scheme}://${host}:${port}`,
    close: async () => {
      await app.close();
    },
  };
}

// -----------------------------------------------------------------------------------------------

class NameTaken extends Error {
  override readonly name = 'NameTaken';
  constructor(readonly answer: unknown) {
    super('name taken');
  }
}

/** Apiserver answers up to this size are relayed as one buffer; larger ones are streamed. */
const BUFFERED_RESPONSE_BYTES = 256 * 1024;

const keyCreateFailure = (code: number) =>
  failureStatus(code, reasonForCode(code), 'the access key could not be created');

function auditUser(identity: AuthenticatedIdentity): AuditUser {
  return {
    username: identity.username,
    ...(identity.uid ? { uid: identity.uid } : {}),
    groups: identity.groups,
    extra: { [ACCESS_KEY_EXTRA]: [identity.accessKey.name] },
  };
}

function fallbackAttributes(method: string, path: string): RequestAttributes {
  return {
    target: 'Management',
    verb: method.toLowerCase(),
    resourceRequest: false,
    apiGroup: '',
    resource: '',
    subresource: '',
    name: '',
    namespace: '',
    path: path.startsWith(BASE_PATH) ? path.slice(BASE_PATH.length) || '/' : path,
  };
}

function withProject(
  attributes: RequestAttributes,
  projectOf: (namespace: string) => string | undefined,
): RequestAttributes {
  if (attributes.project !== undefined || attributes.namespace === '') return attributes;
  const project = projectOf(attributes.namespace);
  return project === undefined ? attributes : { ...attributes, project };
}

function describe(attributes: RequestAttributes, identity: AuthenticatedIdentity): string {
  const what = attributes.resourceRequest
    ? `${attributes.resource}${attributes.subresource ? `/${attributes.subresource}` : ''}.${attributes.apiGroup}${attributes.name ? ` "${attributes.name}"` : ''}`
    : attributes.path;
  return `${what} is forbidden for User "${identity.username}"`;
}

function methodNotAllowedFor(attributes: RequestAttributes): StatusError {
  const resource = attributes.subresource
    ? `${attributes.resource}/${attributes.subresource}`
    : attributes.resource;
  return new StatusError(
    405,
    'MethodNotAllowed',
    `the server does not allow this method on the requested resource (${attributes.verb} ${resource})`,
  );
}

function hasBody(request: FastifyRequest): boolean {
  const body = request.body;
  return Buffer.isBuffer(body) && body.length > 0;
}

function bodyBytes(request: FastifyRequest): Uint8Array {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

function decodeBody(request: FastifyRequest, verb: string): Record<string, unknown> | ParsedPatch {
  const bytes = bodyBytes(request);
  const contentType = request.headers['content-type'];
  if (verb === 'patch') {
    const patch = parsePatchBody(bytes, contentType);
    if (patch instanceof StatusError) throw patch;
    return patch;
  }
  const object = parseObjectBody(bytes, contentType ?? (verb === 'delete' ? 'application/json' : undefined));
  if (object instanceof StatusError) throw object;
  return object;
}

function patchContentType(patch: ParsedPatch): string {
  return patch.type === 'json'
    ? 'application/json-patch+json'
    : patch.type === 'merge'
      ? 'application/merge-patch+json'
      : 'application/apply-patch+yaml';
}

/** Fills `apiVersion`/`kind` a client left out (the server may infer them from the endpoint). */
function withTypeMeta(
  object: Record<string, unknown>,
  route: ResourceRoute,
  attributes: RequestAttributes,
): Record<string, unknown> {
  if (attributes.verb === 'delete') return object;
  const kind = route.info?.kind ?? route.parent.kind;
  return { ...object, apiVersion: object.apiVersion ?? GROUP_VERSION, kind: object.kind ?? kind };
}

function upstreamMethod(method: string): 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' {
  return method === 'HEAD' ? 'GET' : (method as 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE');
}

/** The query of the request, passed on as sent (kube-apiserver validates it). */
function forwardedSearch(url: string): string {
  const index = url.indexOf('?');
  if (index < 0) return '';
  const search = url.slice(index);
  return FORWARDED_QUERY.test(search) ? search : `?${new URLSearchParams(search.slice(1)).toString()}`;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function toGatewayError(error: unknown, log: Logger): StatusError {
  if (error instanceof StatusError) return error;
  log.error({ err: error }, 'gateway request failed');
  return internalError();
}

/** Applies `transform` to each JSON line of a watch stream. */
function lineTransform(transform: (value: unknown) => unknown): Transform {
  let buffered = '';
  const convert = (line: string) => {
    try {
      return `${JSON.stringify(transform(JSON.parse(line)))}\n`;
    } catch {
      return `${line}\n`;
    }
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      buffered += chunk.toString('utf8');
      let out = '';
      let newline = buffered.indexOf('\n');
      while (newline >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line !== '') out += convert(line);
        newline = buffered.indexOf('\n');
      }
      callback(null, out);
    },
    flush(callback) {
      callback(null, buffered.trim() === '' ? '' : convert(buffered.trim()));
    },
  });
}
