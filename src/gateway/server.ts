import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { badRequest, StatusError } from '../api/status.ts';
import type { AuthenticatedIdentity } from '../identity/authenticate.ts';
import {
  type AccessProxyDeps,
  callerImpersonationRefusal,
  forward,
  type UpgradeConnection,
} from './access-proxy/index.ts';
import { isAccessProxyPath, type ProxyLookup } from './access-proxy/route.ts';
import { upgradeResponse } from './access-proxy/upgrade.ts';
import type { Auditor } from './audit/auditor.ts';
import { isRelay } from './endpoints/endpoint.ts';
import type { KeyAuthenticator } from './key-authentication.ts';
import type { GatewayMetrics } from './metrics.ts';
import { auditFailedAuthentication, beginAudit } from './pipeline/audit.ts';
import { authenticateExchange, needsKey } from './pipeline/authenticate.ts';
import { dispatch } from './pipeline/dispatch.ts';
import { type EncodeDeps, type Outcome, respond } from './pipeline/encode.ts';
import { type Answering, type Exchange, JSON_ONLY } from './pipeline/exchange.ts';
import { NegotiationCache, negotiateExchange } from './pipeline/negotiate.ts';
import { receiveBody } from './pipeline/receive.ts';
import type { EndpointTable, Routed } from './pipeline/route.ts';
import { checkRoutedScope } from './pipeline/scope.ts';
import type { TrustedProxies } from './pipeline/source.ts';
import { holdWatchSlot, isLongLived, type Throttle } from './pipeline/throttle.ts';
import type { ProxyDeps } from './proxy/proxy.ts';

/**
 * The management gateway's HTTP server: wiring only. Each request goes through the pipeline
 * (`pipeline/`): route → authenticate → negotiate → throttle → scope → receive → audit → dispatch,
 * and encode once with what they came to (the access proxy: its relay in place of dispatch). The
 * stages are small modules with their own tests; the endpoints (`endpoints/`, and those other
 * components hand in) are one interface (`src/http/endpoint.ts`).
 */

export interface GatewayServerDeps {
  readonly endpoints: EndpointTable;
  readonly authenticator: KeyAuthenticator;
  readonly throttle: Throttle;
  readonly proxy: ProxyDeps;
  /** The access proxy into clusters, virtual clusters and spaces. */
  readonly accessProxy: AccessProxyDeps;
  readonly auditor: Auditor;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly trustedProxies: TrustedProxies;
  /** The Project whose namespace `namespace` is, and the namespace of a Project, if any. */
  readonly lookup: ProxyLookup;
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

export async function startGatewayServer(
  deps: GatewayServerDeps,
  options: GatewayServerOptions,
): Promise<GatewayServer> {
  const encode: EncodeDeps = { metrics: deps.metrics, logger: deps.logger };
  const serve = pipeline(deps, encode);
  const tls = options.tls !== undefined;
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    void serve(receivedExchange(request, response, deps.trustedProxies, tls));
  };
  const upgraded = new Set<Duplex>();
  // An upgrade request goes through the same stages, answered (refusals too) on its connection.
  const handleUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    const response = upgradeResponse(request, socket);
    void serve(receivedExchange(request, response, deps.trustedProxies, tls, { socket, head }));
  };
  const serverOptions: http.ServerOptions = {
    requestTimeout: options.requestTimeoutMs ?? 60_000,
    keepAliveTimeout: 65_000,
    maxHeaderSize: 64 * 1024,
    // Only the access proxy upgrades connections; elsewhere an upgrade request is an ordinary one.
    shouldUpgradeCallback: (request) => isAccessProxyPath(pathOf(request.url ?? '/')),
  };
  const server = options.tls
    ? https.createServer({ ...serverOptions, cert: options.tls.cert, key: options.tls.key }, handle)
    : http.createServer(serverOptions, handle);
  server.on('clientError', answerUnreadable);
  server.on('upgrade', handleUpgrade);
  await listen(server, options.port, options.host);
  const port = (server.address() as AddressInfo).port;
  const scheme = options.tls ? 'https' : 'http';
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return { port, url: `${scheme}://${host}:${port}`, close: () => close(server, upgraded) };
}

/**
 * The stages one request goes through, in order, each handed what the earlier ones returned; then
 * encode, once, with what they came to (a stage's refusal is thrown, and answered as a Status).
 */
function pipeline(deps: GatewayServerDeps, encode: EncodeDeps): (exchange: Exchange) => Promise<void> {
  const negotiation = new NegotiationCache();
  return async (exchange) => {
    // What the stages established so far, for encode to answer with (a refusal included).
    let answering: Answering = {
      exchange,
      attributes: undefined,
      negotiated: JSON_ONLY,
      audit: undefined,
      release: undefined,
    };
    let outcome: Outcome;
    try {
      outcome = await walk(deps, negotiation, exchange, (established) => {
        answering = { ...answering, ...established };
      });
    } catch (error) {
      outcome = { kind: 'error', error };
    }
    await respond(encode, answering, outcome).catch((error: unknown) => {
      // Encode failed to answer (a defect): the connection is cut rather than left hanging.
      encode.logger.error({ err: error }, 'gateway answer failed');
      exchange.response.destroy();
    });
  };
}

/** The stages before encode: what the request comes to. `established` records each stage's output for encode. */
async function walk(
  deps: GatewayServerDeps,
  negotiation: NegotiationCache,
  exchange: Exchange,
  established: (output: Partial<Omit<Answering, 'exchange'>>) => void,
): Promise<Outcome> {
  // route
  const routed = deps.endpoints.route(exchange.method, exchange.path, exchange.search, deps.lookup);
  // The headers of a path's endpoint go on every answer there, refusals of the stages included.
  const headers =
    routed.kind === 'endpoint' || routed.kind === 'refused' ? routed.endpoint?.answerHeaders?.() : undefined;
  if (headers) for (const [name, value] of Object.entries(headers)) exchange.response.setHeader(name, value);
  if (routed.kind === 'refused') throw routed.error;
  const attributes = routed.attributes;
  established({ attributes });
  // authenticate; a failure: throttle (counted; 401 or 429), audit
  let identity: AuthenticatedIdentity | undefined;
  if (needsKey(routed)) {
    const authenticated = authenticateExchange(deps, exchange);
    const settled = authenticated instanceof Promise ? await authenticated : authenticated;
    if (settled.failed) {
      const { failure, keyId } = settled.failed;
      const refusal = await deps.throttle.refusal(exchange.source, failure, keyId);
      auditFailedAuthentication(deps.auditor, exchange, attributes, refusal, failure);
      throw refusal;
    }
    identity = settled.identity;
  }
  if (routed.kind === 'unknown') throw routed.error;
  if (routed.kind === 'cluster') return proxyOutcome(deps, exchange, routed, identity, established);
  const negotiated = negotiateExchange(negotiation, exchange, routed);
  established({ negotiated });
  // throttle (watches), scope
  established({ release: holdWatchSlot(deps.throttle, exchange, { identity, attributes }) });
  checkRoutedScope(identity, routed);
  // receive (the body, decoded for resource writes), audit
  const { bytes, body, requestObject } = await receiveBody(exchange, routed);
  const sensitive = routed.kind === 'endpoint' && routed.endpoint.sensitive === true;
  established({
    audit: beginAudit(deps.auditor, exchange, { attributes, identity, requestObject, sensitive }),
  });
  // dispatch
  const answer = await dispatch(
    { proxy: deps.proxy, throttle: deps.throttle },
    { exchange, routed, query: new URLSearchParams(exchange.search), bytes, body, identity, negotiated },
  );
  return isRelay(answer) ? { kind: 'relay', relay: answer } : { kind: 'answer', answer, sensitive };
}

/**
 * The stages of a request of the access proxy once authenticated: caller impersonation refused,
 * throttle (a long-lived connection holds a slot), scope, audit; then the relay, which encode
 * counts when its headers go out and completes when it ends.
 */
function proxyOutcome(
  deps: GatewayServerDeps,
  exchange: Exchange,
  routed: Extract<Routed, { kind: 'cluster' }>,
  identity: AuthenticatedIdentity | undefined,
  established: (output: Partial<Omit<Answering, 'exchange'>>) => void,
): Outcome {
  if (!identity) throw new StatusError(500, 'InternalError', 'a proxied request without an identity');
  const impersonating = callerImpersonationRefusal(exchange.request.rawHeaders);
  if (impersonating) throw impersonating;
  const attributes = routed.attributes;
  const longLived = isLongLived(exchange, attributes);
  // An upgraded connection is cut by its socket (the response is detached from it once upgraded).
  const upgrade = exchange.upgrade;
  const cut = upgrade ? () => upgrade.socket.destroy() : undefined;
  established({ release: holdWatchSlot(deps.throttle, exchange, { identity, attributes }, cut) });
  checkRoutedScope(identity, routed);
  established({ audit: beginAudit(deps.auditor, exchange, { attributes, identity, sensitive: false }) });
  return {
    kind: 'forwarded',
    longLived,
    run: (answering) =>
      forward(deps.accessProxy, {
        route: routed.route,
        identity,
        request: exchange.request,
        response: exchange.response,
        search: exchange.search,
        signal: exchange.signal,
        longLived,
        ...(upgrade ? { upgrade } : {}),
        answering,
      }),
  };
}

/** A request as the pipeline starts with it: nothing decided yet (exported for bench/gateway/stages.ts). */
export function receivedExchange(
  request: IncomingMessage,
  response: ServerResponse,
  trustedProxies: TrustedProxies,
  tls: boolean,
  upgrade?: UpgradeConnection,
): Exchange {
  const url = request.url ?? '/';
  const queryStart = url.indexOf('?');
  const peer = request.socket.remoteAddress ?? '';
  const abort = new AbortController();
  // The response closes when it is finished or when the client went away; only the latter aborts.
  response.once('close', () => {
    if (!response.writableFinished) abort.abort(new Error('client went away'));
  });
  return {
    request,
    response,
    method: request.method ?? 'GET',
    path: queryStart < 0 ? url : url.slice(0, queryStart),
    search: queryStart < 0 ? '' : url.slice(queryStart),
    source: trustedProxies.clientAddress(peer, request.headers['x-forwarded-for']),
    secure: trustedProxies.clientSecure(peer, tls, request.headers['x-forwarded-proto']),
    started: performance.now(),
    receivedAt: Date.now(),
    signal: abort.signal,
    upgrade,
  };
}

/** Malformed HTTP: a Status, then the connection closes (as the HTTP parser left it unusable). */
function answerUnreadable(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const status = JSON.stringify(
    badRequest(`the request could not be read (${error.code ?? 'error'})`).toStatus(),
  );
  socket.end(
    `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(status)}\r\nconnection: close\r\n\r\n${status}`,
  );
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function close(server: http.Server, upgraded: ReadonlySet<Duplex>): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    // Idle keep-alive connections end now; watches and upgraded connections end with the server.
    server.closeIdleConnections();
    setTimeout(() => {
      server.closeAllConnections();
      for (const socket of upgraded) socket.destroy();
    }, 5000).unref();
  });
}

function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart < 0 ? url : url.slice(0, queryStart);
}
