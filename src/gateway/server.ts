import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { badRequest, StatusError } from '../api/status.ts';
import type { AuthenticationResult } from '../identity/authenticate.ts';
import type { Auditor } from './audit/auditor.ts';
import { isRelay } from './endpoints/endpoint.ts';
import type { GatewayMetrics } from './metrics.ts';
import { auditInfo, beginAudit } from './pipeline/audit.ts';
import { authenticateToken, bearerToken, type KeyAuthenticator } from './pipeline/authenticate.ts';
import {
  decodeRequestBody,
  MAX_BODY_BYTES,
  type Negotiated,
  negotiate,
  type RequestBody,
  readRequestBody,
} from './pipeline/body.ts';
import { dispatch } from './pipeline/dispatch.ts';
import { type EncodeDeps, sendAnswer, sendError, sendRelay } from './pipeline/encode.ts';
import { type Exchange, JSON_ONLY } from './pipeline/exchange.ts';
import type { EndpointTable, Routed } from './pipeline/route.ts';
import { scopeRefusal } from './pipeline/scope.ts';
import type { TrustedProxies } from './pipeline/source.ts';
import type { Throttle } from './pipeline/throttle.ts';
import type { ProxyDeps } from './proxy/proxy.ts';

/**
 * The management gateway's HTTP server: wiring only. Each request goes through the pipeline
 * (`pipeline/`): route → authenticate → throttle → scope → audit → dispatch → encode. The
 * stages are small modules with their own tests; the endpoints (`endpoints/`, and those other
 * components hand in) are one interface (`src/http/endpoint.ts`).
 */

export interface GatewayServerDeps {
  readonly endpoints: EndpointTable;
  readonly authenticator: KeyAuthenticator;
  readonly throttle: Throttle;
  readonly proxy: ProxyDeps;
  readonly auditor: Auditor;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly trustedProxies: TrustedProxies;
  /** The Project whose namespace `namespace` is, if any. */
  readonly projectOfNamespace: (namespace: string) => string | undefined;
}

export interface GatewayServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** PEM; HTTPS when given, plain HTTP (behind an ingress) otherwise. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Time to receive a whole request. Default 60 s. */
  readonly requestTimeoutMs?: number;
}

export interface GatewayServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch']);

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

export async function startGatewayServer(
  deps: GatewayServerDeps,
  options: GatewayServerOptions,
): Promise<GatewayServer> {
  const encode: EncodeDeps = { metrics: deps.metrics, logger: deps.logger };
  const tls = options.tls !== undefined;

  /** authenticate → throttle: the caller's identity into the exchange, or the refusal thrown. */
  function authenticate(exchange: Exchange): Promise<void> | undefined {
    const token = bearerToken(exchange.request.headers.authorization);
    const result = authenticateToken(
      deps.authenticator,
      token,
      deps.throttle.cachedOnly(exchange.source, token),
    );
    if (result instanceof Promise) return result.then((settled) => conclude(exchange, settled));
    return conclude(exchange, result);
  }

  function conclude(exchange: Exchange, result: AuthenticationResult): Promise<void> | undefined {
    if (result.ok) {
      exchange.identity = result.identity;
      return undefined;
    }
    return deps.throttle.refusal(exchange.source, result.failure, result.keyId).then((refusal) => {
      deps.auditor.failedAuthentication(auditInfo(exchange), {
        code: refusal.code,
        status: 'Failure',
        message: refusal.message,
        reason: refusal.reason,
        annotations: { 'authentication.platform/failure': result.failure.name },
      });
      throw refusal;
    });
  }

  async function serve(exchange: Exchange): Promise<void> {
    // The headers of a path's endpoint go on every answer there, refusals of the stages included.
    const headers = deps.endpoints.pathEndpoint(exchange.path)?.answerHeaders?.();
    if (headers)
      for (const [name, value] of Object.entries(headers)) exchange.response.setHeader(name, value);
    // route
    const query = new URLSearchParams(exchange.search);
    const routed = deps.endpoints.route(exchange.method, exchange.path, query, deps.projectOfNamespace);
    if (routed instanceof StatusError) throw routed;
    exchange.routed = routed;
    exchange.attributes = routed.attributes;
    const endpoint = routed.kind === 'endpoint' ? routed.endpoint : undefined;
    const authentication =
      typeof endpoint?.authentication === 'function' ? endpoint.authentication() : endpoint?.authentication;
    // authenticate, throttle (failures)
    if (authentication !== 'none') {
      const pending = authenticate(exchange);
      if (pending) await pending;
    }
    if (routed.kind === 'unknown') throw routed.error;
    const negotiated = negotiateCached(exchange.request.headers.accept);
    if (negotiated instanceof StatusError) throw negotiated;
    exchange.negotiated = negotiated;
    // throttle (watches), scope
    const identity = exchange.identity;
    if (identity) {
      if (routed.attributes.verb === 'watch') {
        const slot = deps.throttle.watchSlot(identity.username);
        if (slot instanceof StatusError) throw slot;
        exchange.release = slot;
      }
      const refusal = scopeRefusal(identity, routed.attributes, endpoint?.scope);
      if (refusal) throw refusal;
    }
    // audit (with the request body, decoded for resource writes)
    const bytes = hasBody(exchange.request) ? await readRequestBody(exchange.request, MAX_BODY_BYTES) : EMPTY;
    let body: RequestBody | undefined;
    const verb = routed.attributes.verb;
    const decodes =
      WRITE_VERBS.has(verb) || ((verb === 'delete' || verb === 'deletecollection') && bytes.length > 0);
    if (routed.resource !== undefined && decodes) {
      const decoded = decodeRequestBody(bytes, exchange.request.headers['content-type'], verb);
      if (decoded instanceof StatusError) throw decoded;
      body = decoded;
      exchange.requestObject = verb === 'patch' ? (decoded as { value: unknown }).value : decoded;
    }
    const sensitive = endpoint?.sensitive === true;
    beginAudit(deps.auditor, exchange, sensitive);
    // dispatch, encode
    const answer = await dispatch(
      { proxy: deps.proxy, throttle: deps.throttle },
      { exchange, routed: routed as Exclude<Routed, { kind: 'unknown' }>, query, bytes, body },
    );
    if (isRelay(answer)) await sendRelay(encode, exchange, answer);
    else sendAnswer(encode, exchange, answer, sensitive);
  }

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const url = request.url ?? '/';
    const queryStart = url.indexOf('?');
    const peer = request.socket.remoteAddress ?? '';
    const abort = new AbortController();
    // The response closes when it is finished or when the client went away; only the latter aborts.
    response.once('close', () => {
      if (!response.writableFinished) abort.abort(new Error('client went away'));
    });
    const exchange: Exchange = {
      request,
      response,
      method: request.method ?? 'GET',
      path: queryStart < 0 ? url : url.slice(0, queryStart),
      search: queryStart < 0 ? '' : url.slice(queryStart),
      source: deps.trustedProxies.clientAddress(peer, request.headers['x-forwarded-for']),
      secure: deps.trustedProxies.clientSecure(peer, tls, request.headers['x-forwarded-proto']),
      started: performance.now(),
      receivedAt: Date.now(),
      signal: abort.signal,
      negotiated: JSON_ONLY,
      routed: undefined,
      attributes: undefined,
      identity: undefined,
      audit: undefined,
      requestObject: undefined,
      release: undefined,
      finished: false,
    };
    serve(exchange).catch((error: unknown) => {
      sendError(encode, exchange, error);
    });
  };

  const serverOptions: http.ServerOptions = {
    requestTimeout: options.requestTimeoutMs ?? 60_000,
    keepAliveTimeout: 65_000,
    maxHeaderSize: 64 * 1024,
  };
  const server = options.tls
    ? https.createServer({ ...serverOptions, cert: options.tls.cert, key: options.tls.key }, handle)
    : http.createServer(serverOptions, handle);
  // Malformed HTTP: a Status, then the connection closes (as the HTTP parser left it unusable).
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    if (!socket.writable) return socket.destroy();
    const status = JSON.stringify(
      badRequest(`the request could not be read (${error.code ?? 'error'})`).toStatus(),
    );
    socket.end(
      `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(status)}\r\nconnection: close\r\n\r\n${status}`,
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const scheme = options.tls ? 'https' : 'http';
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    port,
    url: `${scheme}://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Idle keep-alive connections end now; watches end with the server.
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5000).unref();
      }),
  };
}

const EMPTY = Buffer.alloc(0);

/** Whether the request says it has a body (a length above 0, or chunked). */
function hasBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return request.headers['transfer-encoding'] !== undefined;
}
