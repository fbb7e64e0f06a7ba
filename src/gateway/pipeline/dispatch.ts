import type { IncomingHttpHeaders } from 'node:http';
import { StatusError } from '../../api/status.ts';
import type { GatewayAnswer, GatewayRequest } from '../endpoints/endpoint.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import { type ProxyDeps, proxy } from '../proxy/proxy.ts';
import {
  decodeRequestBody,
  MAX_BODY_BYTES,
  parseObjectBody,
  type RequestBody,
  readRequestBody,
} from './body.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';
import type { Throttle } from './throttle.ts';
import { userSubject } from './throttle.ts';

/**
 * The dispatch stage: the routed request to its endpoint, or to the impersonating proxy.
 */

export interface DispatchDeps {
  readonly proxy: ProxyDeps;
  readonly throttle: Throttle;
}

export interface DispatchInput {
  readonly exchange: Exchange;
  readonly routed: Exclude<Routed, { kind: 'unknown' }>;
  readonly query: URLSearchParams;
  /** The raw body (empty when none). */
  readonly bytes: Buffer;
  /** The body decoded by the verb, for resource writes. */
  readonly body: RequestBody | undefined;
}

/** Verbs whose body is always decoded (the object or patch to write). */
const WRITE_VERBS = new Set(['create', 'update', 'patch']);

const EMPTY = Buffer.alloc(0);

/** Whether the request says it has a body (a length above 0, or chunked). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  if (length !== undefined) return length !== '0';
  return headers['transfer-encoding'] !== undefined;
}

/**
 * Whether a request of `verb` to a management API resource has its body decoded before dispatch
 * (for the proxy, the endpoint and the audit log): writes always, deletes when they carry
 * options; reads never.
 */
export function decodesBody(verb: string, bytes: Uint8Array): boolean {
  return WRITE_VERBS.has(verb) || ((verb === 'delete' || verb === 'deletecollection') && bytes.length > 0);
}

/**
 * The request body, read whole (413 past {@link MAX_BODY_BYTES}) and, for resource writes,
 * decoded by the verb (400/415 thrown when it cannot be). The decoded object (or the patch's
 * value) is what the audit log records as the request object.
 */
export async function receiveBody(
  exchange: Exchange,
  routed: Exclude<Routed, { kind: 'unknown' }>,
  limit = MAX_BODY_BYTES,
): Promise<{ bytes: Buffer; body: RequestBody | undefined }> {
  const bytes = hasBody(exchange.request.headers) ? await readRequestBody(exchange.request, limit) : EMPTY;
  const verb = routed.attributes.verb;
  if (routed.resource === undefined || !decodesBody(verb, bytes)) return { bytes, body: undefined };
  const body = decodeRequestBody(bytes, exchange.request.headers['content-type'], verb);
  if (body instanceof StatusError) throw body;
  exchange.requestObject = verb === 'patch' ? (body as { value: unknown }).value : body;
  return { bytes, body };
}

export function dispatch(deps: DispatchDeps, input: DispatchInput): Promise<GatewayAnswer> | GatewayAnswer {
  const { exchange, routed } = input;
  if (routed.kind === 'endpoint') return routed.endpoint.handle(endpointRequest(deps, input));
  const identity = exchange.identity;
  if (!identity) throw new StatusError(500, 'InternalError', 'a proxied request without an identity');
  const impersonation = impersonationHeaders(identity);
  if (impersonation instanceof StatusError) throw impersonation;
  return proxy(
    deps.proxy,
    {
      method: exchange.method,
      attributes: routed.attributes,
      resource: routed.resource,
      search: exchange.search,
      body: input.body,
      accept: exchange.negotiated.upstreamAccept,
      userAgent: exchange.request.headers['user-agent'],
      signal: exchange.signal,
    },
    impersonation,
  );
}

function endpointRequest(deps: DispatchDeps, input: DispatchInput): GatewayRequest {
  const { exchange, routed, bytes, query } = input;
  let decoded: Record<string, unknown> | undefined;
  return {
    method: exchange.method,
    path: exchange.path,
    query,
    headers: exchange.request.headers,
    source: exchange.source,
    secure: exchange.secure,
    attributes: routed.attributes,
    identity: exchange.identity,
    body: bytes,
    object: () => {
      if (decoded) return decoded;
      if (input.body !== undefined && routed.attributes.verb !== 'patch') {
        decoded = input.body as Record<string, unknown>;
        return decoded;
      }
      const parsed = parseObjectBody(bytes, exchange.request.headers['content-type']);
      if (parsed instanceof StatusError) throw parsed;
      decoded = parsed;
      return parsed;
    },
    signal: exchange.signal,
    resource: routed.resource,
    decoded: input.body,
    upstreamAccept: exchange.negotiated.upstreamAccept,
    failedAttempt: (subject) =>
      deps.throttle.failures.failed(
        exchange.source,
        subject === undefined ? undefined : userSubject(subject),
      ),
    blockedFor: (subject) =>
      deps.throttle.failures.blockedFor(
        exchange.source,
        subject === undefined ? undefined : userSubject(subject),
      ),
  };
}
