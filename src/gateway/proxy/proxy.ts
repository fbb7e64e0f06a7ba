import { GROUP_VERSION } from '../../api/meta.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { forwardedSearch, type ParsedPatch, patchContentType, type RequestBody } from '../body.ts';
import type { Relay } from '../endpoints/endpoint.ts';
import { type ResourceRoute, upstreamPath } from '../paths.ts';
import { type Redaction, redactionFor } from './redact.ts';
import { type HeaderMap, type Upstream, type UpstreamResponse, upstreamFailure } from './upstream.ts';

/**
 * The impersonating proxy: a request on a stored kind sent to kube-apiserver as it came (path,
 * query, body), as the caller (or, for the gateway's own checked writes, as the gateway), and its
 * answer relayed back. Watches go on the stream pool with `timeoutSeconds` capped; answers about
 * access keys are redacted whatever their shape.
 */

export interface ProxyCall {
  /** The client's method (`HEAD` is sent as `GET`). */
  readonly method: string;
  readonly attributes: RequestAttributes;
  readonly resource: ResourceRoute;
  /** The client's query, with its `?` (or a replacement, such as an owner's field selector). */
  readonly search: string;
  readonly body: RequestBody | undefined;
  /** The Accept header to send (JSON, or a JSON flavour such as a Table). */
  readonly accept: string;
  readonly userAgent: string | string[] | undefined;
  readonly signal: AbortSignal;
}

export interface ProxyDeps {
  readonly upstream: Upstream;
  /** The longest watch (`timeoutSeconds` is cut to it). */
  readonly maxWatchSeconds: number;
}

const USER_AGENT = /^[\x20-\x7e]*$/;

/**
 * The caller's User-Agent, to send with a write made for the caller: kube-apiserver names the
 * field manager of a write without `fieldManager` after it, so the caller's own name stays (a
 * caller that sent none, or one that is not printable ASCII, is named after the gateway).
 */
export function callerUserAgent(userAgent: string | string[] | undefined): HeaderMap {
  return typeof userAgent === 'string' && USER_AGENT.test(userAgent) ? { 'user-agent': userAgent } : {};
}

/**
 * Sends the call upstream with `headers` (impersonation, or none to act as the gateway) and
 * returns the answer to relay. `redaction` defaults to the resource's.
 */
export async function proxy(
  deps: ProxyDeps,
  call: ProxyCall,
  headers: HeaderMap,
  redaction: Redaction | undefined = redactionFor(call.attributes),
): Promise<Relay> {
  const { attributes } = call;
  const requestHeaders: HeaderMap = { ...headers, ...callerUserAgent(call.userAgent), accept: call.accept };
  let payload: string | undefined;
  if (call.body !== undefined) {
    const patch = attributes.verb === 'patch' ? (call.body as ParsedPatch) : undefined;
    requestHeaders['content-type'] = patch ? patchContentType(patch) : 'application/json';
    payload = JSON.stringify(
      patch ? patch.value : withTypeMeta(call.body as Record<string, unknown>, call.resource, attributes),
    );
  }
  const watch = attributes.verb === 'watch';
  let search = forwardedSearch(call.search);
  if (watch) {
    const query = new URLSearchParams(search.slice(1));
    query.set('timeoutSeconds', cappedWatchTimeout(query.get('timeoutSeconds'), deps.maxWatchSeconds));
    search = `?${query.toString()}`;
  }
  let response: UpstreamResponse;
  try {
    response = await deps.upstream.request({
      method: call.method === 'HEAD' ? 'GET' : (call.method as 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'),
      path: upstreamPath(attributes),
      search,
      headers: requestHeaders,
      ...(payload !== undefined ? { body: payload } : {}),
      signal: call.signal,
      stream: watch,
    });
  } catch (error) {
    throw upstreamFailure(error, call.signal);
  }
  return { relay: response, redaction };
}

/** Fills `apiVersion`/`kind` a client left out (the server may infer them from the endpoint). */
function withTypeMeta(
  object: Record<string, unknown>,
  route: ResourceRoute,
  attributes: RequestAttributes,
): Record<string, unknown> {
  if (attributes.verb === 'delete' || attributes.verb === 'deletecollection') return object;
  const kind = route.info?.kind ?? route.parent.kind;
  return { ...object, apiVersion: object.apiVersion ?? GROUP_VERSION, kind: object.kind ?? kind };
}

/**
 * The `timeoutSeconds` a watch is sent upstream with: the client's, at most `max`; `max` when
 * absent or 0 (the apiserver's "its own default"). A value that is no number is passed on, for
 * the apiserver to refuse.
 */
export function cappedWatchTimeout(requested: string | null, max: number): string {
  if (requested === null || requested === '') return String(max);
  if (!/^\d{1,12}$/.test(requested)) return requested;
  const value = Number(requested);
  return String(value === 0 ? max : Math.min(value, max));
}
