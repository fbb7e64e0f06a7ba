import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import { internalError, notAcceptable, StatusError } from '../../api/status.ts';
import type { EndpointAnswer, EndpointHeaders } from '../../http/endpoint.ts';
import { pump, readUpTo } from '../../http/streams.ts';
import type { AuditOutcome } from '../audit/event.ts';
import { encodeBody, mediaType, type Negotiated, negotiate } from '../body.ts';
import type { Relay } from '../endpoints/endpoint.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { RedactingStream, redactDocuments, UnredactableAnswer } from '../proxy/redact.ts';
import { upstreamFailure } from '../proxy/upstream.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';

/**
 * The encode stage, the only one that writes responses: objects in the negotiated format (JSON,
 * or YAML), raw bodies as they are, apiserver answers relayed (streamed, or read whole when they
 * must be looked at: redaction, YAML, an audit log of responses), and every error as a Kubernetes
 * `Status`. Finishing an answer counts it (metrics), completes its audit record and gives back
 * what the request held (a watch slot).
 */

export interface EncodeDeps {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
}

/** Apiserver answers up to this size are relayed as one buffer; larger ones are streamed. */
const BUFFERED_RESPONSE_BYTES = 256 * 1024;
/** The most of an apiserver answer read whole (to redact or re-encode it); more is refused (502). */
export const MAX_READ_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Headers of an apiserver answer passed on to the client. */
const RELAYED_HEADERS = ['warning', 'retry-after'] as const;

/**
 * Content negotiation per distinct Accept header: clients send a handful of spellings over and
 * over, so each is parsed once (at most `max` kept; the cache starts over when full). Refusals
 * (406) are not kept: each is a fresh error.
 */
export class NegotiationCache {
  private readonly known = new Map<string, Negotiated>();

  constructor(private readonly max = 256) {}

  /** The answer format for `accept`, or the 406 refusal. */
  negotiate(accept: string | undefined): Negotiated | StatusError {
    const key = accept ?? '';
    const cached = this.known.get(key);
    if (cached) return cached;
    const negotiated = negotiate(accept);
    if (!(negotiated instanceof StatusError)) {
      if (this.known.size >= this.max) this.known.clear();
      this.known.set(key, negotiated);
    }
    return negotiated;
  }

  get size(): number {
    return this.known.size;
  }
}

/** Verbs answered with one object (or a Status), never a list. */
const OBJECT_VERBS = new Set(['get', 'create', 'update', 'patch', 'delete']);

/**
 * A request answered with one object that asks for it first as a list of metadata
 * (`as=PartialObjectMetadataList`): kube-apiserver refuses that with 406 for its own kinds, and
 * fails with a 500 ("content is not a list") for custom resources. The gateway answers 406 for
 * every resource, as kube-apiserver does for its own.
 */
export function objectAsListRefusal(
  negotiated: Negotiated,
  verb: string | undefined,
): StatusError | undefined {
  if (verb === undefined || !OBJECT_VERBS.has(verb) || !asListFirst(negotiated)) return undefined;
  return notAcceptable('you requested PartialObjectMetadataList, but the requested object is not a list');
}

/** Whether a negotiation asks for a list of metadata first (one object per Accept header, cached). */
const AS_LIST_FIRST = new WeakMap<Negotiated, boolean>();

function asListFirst(negotiated: Negotiated): boolean {
  const known = AS_LIST_FIRST.get(negotiated);
  if (known !== undefined) return known;
  const first = negotiated.upstreamAccept.split(',')[0] ?? '';
  const asList = first
    .split(';')
    .slice(1)
    .some((parameter) => parameter.trim().toLowerCase() === 'as=partialobjectmetadatalist');
  AS_LIST_FIRST.set(negotiated, asList);
  return asList;
}

/** Whether the routed endpoint answers one of the accepted media types itself (`produces`). */
function answersItself(exchange: Exchange, routed: Routed | undefined): boolean {
  const produces = routed?.kind === 'endpoint' ? routed.endpoint.produces : undefined;
  if (!produces || produces.length === 0) return false;
  const accept = exchange.request.headers.accept ?? '';
  return accept.split(',').some((entry) => produces.includes(mediaType(entry)));
}

/**
 * Negotiates the exchange's answer format from its Accept header (throws 406); a request for a
 * media type its endpoint answers itself gets JSON for everything else (its errors).
 */
export function negotiateExchange(cache: NegotiationCache, exchange: Exchange, routed?: Routed): void {
  let negotiated = cache.negotiate(exchange.request.headers.accept);
  if (negotiated instanceof StatusError && answersItself(exchange, routed))
    negotiated = cache.negotiate(undefined);
  if (negotiated instanceof StatusError) throw negotiated;
  const refusal = exchange.attributes?.resourceRequest
    ? objectAsListRefusal(negotiated, exchange.attributes.verb)
    : undefined;
  if (refusal) throw refusal;
  exchange.negotiated = negotiated;
}

/** Counts the answer, completes the audit record, gives back what the request held. Once per request. */
export function finish(
  deps: EncodeDeps,
  exchange: Exchange,
  code: number,
  responseObject: unknown,
  annotations?: Readonly<Record<string, string>>,
): void {
  if (exchange.finished) return;
  exchange.finished = true;
  deps.metrics.observe(exchange.attributes, code, (performance.now() - exchange.started) / 1000);
  if (exchange.audit) {
    const status =
      code >= 400 ? (responseObject as { message?: string; reason?: string } | undefined) : undefined;
    exchange.audit.complete({
      code,
      ...(status ? { status: 'Failure', message: status.message, reason: status.reason } : {}),
      ...(responseObject !== undefined ? { responseObject } : {}),
      ...(annotations ? { annotations } : {}),
    } as AuditOutcome);
  }
  exchange.release?.();
}

/**
 * An answer streamed as it comes (a relayed watch, log or upgraded connection, any answer of the
 * access proxy): counted when its headers go out, with the time to them; a long-running one's
 * audit record says so then. Returns what completes it when it ends (its audit record, its slot).
 */
export function streamStarted(
  deps: EncodeDeps,
  exchange: Exchange,
  code: number,
  longRunning: boolean,
): (code: number) => void {
  exchange.finished = true;
  deps.metrics.observe(exchange.attributes, code, (performance.now() - exchange.started) / 1000, longRunning);
  const audit = exchange.audit;
  if (longRunning) audit?.responseStarted({ code });
  return (ended) => {
    audit?.complete({ code: ended });
    exchange.release?.();
  };
}

function write(
  exchange: Exchange,
  code: number,
  headers: OutgoingHttpHeaders,
  body: string | Uint8Array,
): void {
  const response = exchange.response;
  if (response.headersSent || response.destroyed) return;
  response.writeHead(code, { ...headers, 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

const plainHeaders = (headers: EndpointHeaders | undefined): OutgoingHttpHeaders =>
  (headers ?? {}) as OutgoingHttpHeaders;

/** An object in the negotiated format. `sensitive`: never in the audit log. */
export function sendObject(
  deps: EncodeDeps,
  exchange: Exchange,
  code: number,
  value: unknown,
  headers?: EndpointHeaders,
  sensitive = false,
  annotations?: Readonly<Record<string, string>>,
): void {
  const encoded = encodeBody(value, exchange.negotiated.format);
  write(exchange, code, { ...plainHeaders(headers), 'content-type': encoded.contentType }, encoded.body);
  finish(deps, exchange, code, sensitive && code < 400 ? undefined : value, annotations);
}

/** A `Status` for an error: the gateway's own, or a 500 (logged) for anything unexpected. */
export function sendError(deps: EncodeDeps, exchange: Exchange, error: unknown): void {
  // A client that went away mid-answer (the relayed body fails with the abort's reason) is 499,
  // not an error of the gateway's.
  const status =
    error instanceof StatusError
      ? error
      : exchange.signal.aborted
        ? upstreamFailure(error, exchange.signal)
        : unexpected(deps, error);
  if (exchange.response.headersSent) {
    // Too late for a Status: the answer was already under way.
    exchange.response.destroy();
    finish(deps, exchange, status.code, status.toStatus());
    return;
  }
  const encoded = encodeBody(status.toStatus(), exchange.negotiated.format);
  write(exchange, status.code, { ...status.headers, 'content-type': encoded.contentType }, encoded.body);
  finish(deps, exchange, status.code, status.toStatus());
}

function unexpected(deps: EncodeDeps, error: unknown): StatusError {
  deps.logger.error({ err: error }, 'gateway request failed');
  return internalError();
}

/** An endpoint's answer. */
export function sendAnswer(
  deps: EncodeDeps,
  exchange: Exchange,
  answer: EndpointAnswer,
  sensitive: boolean,
): void {
  if ('object' in answer) {
    sendObject(
      deps,
      exchange,
      answer.code,
      answer.object,
      answer.headers,
      sensitive,
      answer.auditAnnotations,
    );
    return;
  }
  write(
    exchange,
    answer.code,
    { ...plainHeaders(answer.headers), 'content-type': answer.contentType },
    answer.body,
  );
  finish(deps, exchange, answer.code, undefined, answer.auditAnnotations);
}

/**
 * An apiserver answer passed on. Streamed as it comes when nothing needs to look at it (a watch,
 * or a large answer); read whole when it is small (one write with its length is cheaper than a
 * chunked stream), when it must be redacted, re-encoded as YAML, or logged with its body.
 */
export async function sendRelay(deps: EncodeDeps, exchange: Exchange, relay: Relay): Promise<void> {
  const response = relay.relay;
  const code = response.statusCode;
  const contentType = headerValue(response.headers['content-type']) ?? 'application/json';
  const headers: OutgoingHttpHeaders = { 'content-type': contentType };
  for (const name of RELAYED_HEADERS) {
    const value = headerValue(response.headers[name]);
    if (value !== undefined) headers[name] = value;
  }
  if (exchange.attributes?.verb === 'watch' && code === 200) {
    await streamWatch(deps, exchange, relay, headers);
    return;
  }
  const wantsBody = exchange.audit?.level === 'RequestResponse';
  if (!relay.redaction && exchange.negotiated.format === 'json' && !wantsBody) {
    await passOn(deps, exchange, response, headers);
    return;
  }
  await rewrite(deps, exchange, relay, headers, mediaType(contentType) === 'application/json');
}

/** A watch: headers at once (a watch may stay silent for minutes), then events as they come, redacted. */
async function streamWatch(
  deps: EncodeDeps,
  exchange: Exchange,
  { relay: response, redaction }: Relay,
  headers: OutgoingHttpHeaders,
): Promise<void> {
  const code = response.statusCode;
  const ended = streamStarted(deps, exchange, code, true);
  const stream = redaction ? response.body.pipe(new RedactingStream(redaction)) : response.body;
  response.body.once('error', (error) => stream.destroy(error));
  const raw = exchange.response;
  raw.writeHead(code, { ...headers, 'cache-control': 'no-cache, private' });
  raw.flushHeaders();
  try {
    await pump(stream, raw);
  } catch {
    // The client went away, the apiserver ended the watch, or an event could not be redacted
    // (the stream is cut rather than passed on): nothing to answer any more.
  } finally {
    ended(code);
  }
}

/**
 * An answer nothing needs to look at, passed on as it is. Most are small: read whole, they go
 * out in one write with their length (the apiserver sends many without one). Past the limit,
 * what was read goes first and the rest is streamed.
 */
async function passOn(
  deps: EncodeDeps,
  exchange: Exchange,
  response: Relay['relay'],
  headers: OutgoingHttpHeaders,
): Promise<void> {
  const code = response.statusCode;
  const start = await readUpTo(response.body, BUFFERED_RESPONSE_BYTES);
  if (start.complete) {
    write(
      exchange,
      code,
      headers,
      start.chunks.length === 1 ? start.chunks[0]! : Buffer.concat(start.chunks),
    );
    finish(deps, exchange, code, undefined);
    return;
  }
  const raw = exchange.response;
  raw.writeHead(code, headers);
  for (const chunk of start.chunks) raw.write(chunk);
  await pump(response.body, raw).catch(() => {
    // The client went away, or the apiserver broke off: the answer is incomplete either way.
  });
  finish(deps, exchange, code, undefined);
}

/**
 * An answer read whole to be redacted, re-encoded (YAML) or audited with its body. One that
 * must be redacted but cannot be read is not passed on (502).
 */
async function rewrite(
  deps: EncodeDeps,
  exchange: Exchange,
  { relay: response, redaction }: Relay,
  headers: OutgoingHttpHeaders,
  isJson: boolean,
): Promise<void> {
  const code = response.statusCode;
  const text = await readBounded(response.body);
  const asItCame = () => {
    if (redaction) throw unredactable();
    write(exchange, code, headers, text);
    finish(deps, exchange, code, undefined);
  };
  if (!isJson) return asItCame();
  let documents: { single: unknown } | { many: unknown[] };
  try {
    documents = redactDocuments(text, redaction ?? ((value) => value));
  } catch (error) {
    if (!(error instanceof UnredactableAnswer)) throw error;
    return asItCame();
  }
  if ('many' in documents) {
    // A stream of events read whole (the apiserver ended it): passed on as it came, one per line.
    write(exchange, code, headers, documents.many.map((value) => `${JSON.stringify(value)}\n`).join(''));
    finish(deps, exchange, code, undefined);
    return;
  }
  sendObject(deps, exchange, code, documents.single, pick(headers, RELAYED_HEADERS));
}

async function readBounded(body: Relay['relay']['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_READ_RESPONSE_BYTES) {
      body.destroy();
      throw new StatusError(502, 'BadGateway', 'the answer of the cluster is too large to pass on');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const unredactable = () =>
  new StatusError(
    502,
    'BadGateway',
    'the answer of the cluster could not be checked for secrets; it was not passed on',
  );

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function pick(headers: OutgoingHttpHeaders, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) if (typeof headers[name] === 'string') out[name] = headers[name] as string;
  return out;
}
