import { StatusError } from '../../api/status.ts';
import type { CredentialFailures } from '../../http/endpoint.ts';
import { type AuthFailureLimiter, userSubject } from '../../http/failure-limiter.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { type Negotiated, parseObjectBody, type RequestBody } from '../body.ts';
import type { GatewayAnswer, GatewayEndpoint, GatewayRequest } from '../endpoints/endpoint.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import { type ProxyDeps, proxy } from '../proxy/proxy.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';
import type { Throttle } from './throttle.ts';

/**
 * The dispatch stage: the routed request to its endpoint, or to the impersonating proxy.
 */

export interface DispatchDeps {
  readonly proxy: ProxyDeps;
  /** Counts the own failed credential checks of endpoints that declare `checksCredentials`. */
  readonly throttle: Pick<Throttle, 'failures'>;
}

export interface DispatchInput {
  readonly exchange: Exchange;
  readonly routed: Exclude<Routed, { kind: 'unknown' | 'cluster' }>;
  readonly query: URLSearchParams;
  /** The raw body (empty when none). */
  readonly bytes: Buffer;
  /** The body decoded by the verb, for resource writes. */
  readonly body: RequestBody | undefined;
  /** The authenticate stage's caller (none for endpoints served without a key). */
  readonly identity: AuthenticatedIdentity | undefined;
  /** The negotiate stage's format. */
  readonly negotiated: Negotiated;
}

export function dispatch(deps: DispatchDeps, input: DispatchInput): Promise<GatewayAnswer> | GatewayAnswer {
  const { exchange, routed, identity } = input;
  if (routed.kind === 'endpoint')
    return routed.endpoint.handle(endpointRequest(deps, input, routed.endpoint));
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
      accept: input.negotiated.upstreamAccept,
      userAgent: exchange.request.headers['user-agent'],
      signal: exchange.signal,
    },
    impersonation,
  );
}

function endpointRequest(
  deps: DispatchDeps,
  input: DispatchInput,
  endpoint: GatewayEndpoint,
): GatewayRequest {
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
    identity: input.identity,
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
    upstreamAccept: input.negotiated.upstreamAccept,
    credentialFailures: endpoint.checksCredentials
      ? credentialFailures(deps.throttle.failures, exchange.source)
      : undefined,
  };
}

/** The failure limiter for an endpoint's own credential checks from `source` (per user or client subject). */
function credentialFailures(failures: AuthFailureLimiter, source: string): CredentialFailures {
  const subjectOf = (subject: string | undefined) =>
    subject === undefined ? undefined : userSubject(subject);
  return {
    failed: (subject) => failures.failed(source, subjectOf(subject)),
    blockedFor: (subject) => failures.blockedFor(source, subjectOf(subject)),
  };
}
