import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { gatewayTimeout, StatusError, serviceUnavailable } from '../../api/status.ts';
import type { HeaderMap } from '../proxy/upstream.ts';
import type { TargetConnection } from './target.ts';
import { TargetConnectTimeout } from './target-agents.ts';

/**
 * The access proxy's byte relay: a client's request to a target's API server and the answer back,
 * neither decoded (JSON, YAML, protobuf, CBOR, any patch type pass as they are). Headers cross
 * minus the hop-by-hop ones and the client's `authorization`; the platform's credential for the
 * target and the caller's impersonation are added. Answers stream with back-pressure, so watches
 * and `logs -f` pass event by event. Failures before the answer's headers are `Status` errors
 * naming the target (503 unreachable, 502 a broken exchange, 504 no answer in time); the target's
 * credential never appears in any of them.
 */

/** What a relayed request is: the client's request and where it goes on the target. */
export interface RelayRequest {
  /** The client's request (its method, headers, and body stream). */
  readonly request: IncomingMessage;
  /** The path on the target's API server, from `/`, percent-encoding kept. */
  readonly upstreamPath: string;
  /** The client's query with its `?`, or empty. */
  readonly search: string;
  /** The caller's impersonation headers (`impersonationHeaders(identity)`). */
  readonly impersonation: HeaderMap;
  /** Aborted when the client goes away: the request to the target is cut. */
  readonly signal: AbortSignal;
  /**
   * A watch, `follow=true` or an upgrade: no idle timeout once the answer started (it may stay
   * silent for minutes); the time to the answer's headers is limited all the same.
   */
  readonly longLived: boolean;
}

export interface RelayOptions {
  /** Time from the request's end (its body sent) to the target's answer headers. Default 60 s. */
  readonly headersTimeoutMs?: number;
}

export const DEFAULT_HEADERS_TIMEOUT_MS = 60_000;

/**
 * Hop-by-hop headers (RFC 9110 section 7.6.1 and the obsolete ones still seen): they concern one
 * connection, never the next.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Request headers the platform sets itself, whatever the client sent. */
const REPLACED_REQUEST_HEADERS = new Set(['authorization', 'host']);

/** Headers a client may not send on a proxied request: the pipeline refuses them, the relay never passes them. */
export const isImpersonationHeader = (name: string): boolean => name.toLowerCase().startsWith('impersonate-');

/**
 * The identity headers of kube-apiserver's front-proxy (request-header) authentication, in their
 * conventional names: believed from a client certificate of the front-proxy CA, which a target's
 * credential could be; a caller's never cross.
 */
const isFrontProxyIdentity = (name: string): boolean =>
  name === 'x-remote-user' || name === 'x-remote-group' || name.startsWith('x-remote-extra-');

/**
 * The headers of `raw` (`rawHeaders`: name, value, name, value...) that cross to the next hop,
 * lower-cased, repeated ones kept: minus hop-by-hop headers and those `Connection` names. With
 * `upgrade`, `Connection: Upgrade` and `Upgrade` are kept (they are the request).
 */
export function endToEndHeaders(raw: readonly string[], upgrade = false): Record<string, string[]> {
  const named = new Set<string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase());
  }
  const headers: Record<string, string[]> = Object.create(null);
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || named.has(name)) continue;
    const values = headers[name];
    if (values) values.push(raw[i + 1]!);
    else headers[name] = [raw[i + 1]!];
  }
  if (upgrade) {
    const protocol = headerOf(raw, 'upgrade');
    if (protocol !== undefined) {
      headers.connection = ['Upgrade'];
      headers.upgrade = [protocol];
    }
  }
  return headers;
}

/** The headers sent to the target: the client's end-to-end ones, the platform's credential, the caller's impersonation. */
export function upstreamHeaders(
  raw: readonly string[],
  credentials: Readonly<Record<string, string>>,
  impersonation: HeaderMap,
  upgrade = false,
): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = Object.create(null);
  for (const [name, values] of Object.entries(endToEndHeaders(raw, upgrade))) {
    if (REPLACED_REQUEST_HEADERS.has(name) || isImpersonationHeader(name) || isFrontProxyIdentity(name))
      continue;
    headers[name] = values;
  }
  for (const [name, value] of Object.entries(credentials)) headers[name.toLowerCase()] = value;
  for (const [name, value] of Object.entries(impersonation)) headers[name.toLowerCase()] = value;
  return headers;
}

/**
 * Sends the client's request to the target (its body piped as it comes) and resolves with the
 * target's answer once its headers arrived, or with the upgraded socket. Rejects with a `Status`
 * naming the target when no answer comes. A 401 of the target (to the platform's credential, the
 * caller's identity is impersonated) is the caller's to answer: see {@link refusedCredentials}.
 */
export function openUpstream(
  connection: TargetConnection,
  relay: RelayRequest,
  options: RelayOptions & { readonly upgrade?: boolean } = {},
): Promise<UpstreamAnswer> {
  const upgrade = options.upgrade === true;
  const server = connection.server;
  const base = server.pathname.replace(/\/+$/, '');
  const requestOptions: http.RequestOptions = {
    protocol: server.protocol,
    hostname: server.hostname.replace(/^\[|\]$/g, ''),
    port: server.port || (server.protocol === 'https:' ? 443 : 80),
    method: relay.request.method ?? 'GET',
    path: `${base}${relay.upstreamPath}${relay.search}`,
    headers: upstreamHeaders(
      relay.request.rawHeaders,
      connection.credentials(),
      relay.impersonation,
      upgrade,
    ),
    agent: connection.agent,
  };
  const send = server.protocol === 'https:' ? https.request : http.request;
  const outgoing = send(requestOptions);
  return new Promise<UpstreamAnswer>((resolve, reject) => {
    const timeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
    // From the request's end: a large body still on its way is no silence of the target's.
    let timer: NodeJS.Timeout | undefined;
    outgoing.once('finish', () => {
      timer = setTimeout(() => outgoing.destroy(new HeadersTimeout()), timeout);
    });
    const onAbort = () => outgoing.destroy(new ClientGone());
    relay.signal.addEventListener('abort', onAbort, { once: true });
    const settle = () => clearTimeout(timer);
    outgoing.on('response', (response) => {
      settle();
      if (relay.longLived) response.socket.setTimeout(0);
      resolve({ kind: 'response', response });
    });
    outgoing.on('upgrade', (response, socket, head) => {
      settle();
      relay.signal.removeEventListener('abort', onAbort);
      socket.setTimeout(0);
      resolve({ kind: 'upgrade', response, socket, head });
    });
    outgoing.on('error', (error) => {
      settle();
      relay.signal.removeEventListener('abort', onAbort);
      reject(relayFailure(connection.description, error));
    });
    if (upgrade) outgoing.end();
    else relay.request.pipe(outgoing);
  });
}

/** The target's answer: an ordinary response (its body still to read), or an upgraded connection. */
export type UpstreamAnswer =
  | { readonly kind: 'response'; readonly response: IncomingMessage }
  | {
      readonly kind: 'upgrade';
      readonly response: IncomingMessage;
      readonly socket: Socket;
      readonly head: Buffer;
    };

/** The answer to a client whose request the target refused with 401: the platform's credential, not the caller's. */
export const refusedCredentials = (description: string): StatusError =>
  serviceUnavailable(`${description} refused the platform's credentials`);

/**
 * The target's answer passed to the client: status and end-to-end headers (at once for a
 * `longLived` answer, with the first bytes of the body otherwise), then the body as it comes,
 * with back-pressure (a slow reader slows the target, nothing piles up here).
 * Resolves when the answer ended, however: the client went away (the request to the target is
 * cut), or the target went away mid-answer (a chunked answer, a watch, then ends cleanly so its
 * client resumes or relists; one of announced length is cut, never passed off as complete).
 */
export function relayAnswer(
  answer: IncomingMessage,
  response: ServerResponse,
  longLived: boolean,
): Promise<void> {
  const headers = endToEndHeaders(answer.rawHeaders);
  response.writeHead(answer.statusCode ?? 502, headers);
  // A long-lived answer's headers tell its client the watch started; any other's leave with the
  // first bytes of its body, in one write (a write, a segment and a wake-up of the client less).
  if (longLived) response.flushHeaders();
  const announcedLength = headers['content-length'] !== undefined;
  return new Promise<void>((resolve) => {
    const done = () => {
      answer.off('close', onAnswerClosed);
      response.off('close', onClientClosed);
      resolve();
    };
    const onAnswerClosed = () => {
      if (answer.complete) return;
      answer.unpipe(response);
      if (announcedLength) response.destroy();
      else response.end();
    };
    // The request to the target is cut by the relay's signal (the client went away).
    const onClientClosed = () => done();
    answer.once('close', onAnswerClosed);
    response.once('close', onClientClosed);
    answer.pipe(response);
  });
}

class HeadersTimeout extends Error {
  override readonly name = 'HeadersTimeout';
}
class ClientGone extends Error {
  override readonly name = 'ClientGone';
}

/** Network error codes meaning the target could not be reached at all (503). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EADDRNOTAVAIL',
  // The kernel gave up on the target (no SYN-ACK, or retransmissions never acknowledged).
  'ETIMEDOUT',
]);

/**
 * A failed exchange with the target as a `Status` naming it: 503 unreachable, 504 no answer in
 * time, 502 anything else (TLS not trusted, the connection broke). Only the error's name or code
 * is told, never its message (which could carry more than the caller may see).
 */
export function relayFailure(description: string, error: unknown): StatusError {
  if (error instanceof StatusError) return error;
  if (error instanceof ClientGone)
    return new StatusError(499, 'ClientClosedRequest', 'the client closed the request');
  if (error instanceof HeadersTimeout) return gatewayTimeout(`${description} did not answer in time`);
  // The target's agent gives up on a socket that did not connect (TCP and TLS) in time: unreachable.
  if (error instanceof TargetConnectTimeout)
    return serviceUnavailable(`${description} could not be reached (connection timed out)`);
  const code = (error as { code?: unknown }).code;
  const reason = typeof code === 'string' && /^[A-Z0-9_]+$/.test(code) ? code : 'error';
  if (UNREACHABLE.has(reason)) return serviceUnavailable(`${description} could not be reached (${reason})`);
  if (/CERT|SSL|TLS|SELF_SIGNED|ERR_TLS/.test(reason))
    return new StatusError(502, 'BadGateway', `${description}: TLS with the cluster failed (${reason})`);
  return new StatusError(
    502,
    'BadGateway',
    `${description}: the connection to the cluster failed (${reason})`,
  );
}

function headerOf(raw: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1];
  return undefined;
}
