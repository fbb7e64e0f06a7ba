import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import { internalError, StatusError } from '../../api/status.ts';
import type { EndpointAnswer, EndpointHeaders } from '../../http/endpoint.ts';
import { pump, readUpTo } from '../../http/streams.ts';
import type { AuditOutcome } from '../audit/event.ts';
import { encodeBody, mediaType, type Negotiated } from '../body.ts';
import type { Relay } from '../endpoints/endpoint.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { RedactingStream, redactDocuments, UnredactableAnswer } from '../proxy/redact.ts';
import { upstreamFailure } from '../proxy/upstream.ts';
import type { Answering, Exchange } from './exchange.ts';

/**
 * The encode stage, the only one that writes responses, called once per request with what the
 * stages came to ({@link Outcome}): objects in the negotiated format (JSON, or YAML), raw bodies
 * as they are, apiserver answers relayed (streamed, or read whole when they must be looked at:
 * redaction, YAML, an audit log of responses), the access proxy's relay counted as it goes, and
 * every error as a Kubernetes `Status`. Finishing an answer counts it (metrics), completes its
 * audit record and gives back what the request held (a watch slot), once.
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

/** What the stages came to for one request: what encode writes. */
export type Outcome =
  /** An endpoint's answer; `sensitive`: its object never reaches the audit log. */
  | { readonly kind: 'answer'; readonly answer: EndpointAnswer; readonly sensitive: boolean }
  /** An apiserver answer an endpoint or the proxy passes on. */
  | { readonly kind: 'relay'; readonly relay: Relay }
  /**
   * The access proxy's relay, which writes the bytes itself: `run` calls `answering` when the
   * answer's headers are known (before they go out) and resolves to the code when it ends.
   */
  | {
      readonly kind: 'forwarded';
      readonly longLived: boolean;
      readonly run: (answering: (code: number) => void) => Promise<number>;
    }
  /** A refusal or failure of any stage. */
  | { readonly kind: 'error'; readonly error: unknown };

/** Writes the request's answer: the one call of the encode stage per request. */
export async function respond(deps: EncodeDeps, answering: Answering, outcome: Outcome): Promise<void> {
  const reply = new Reply(deps, answering);
  try {
    if (outcome.kind === 'answer') sendAnswer(reply, outcome.answer, outcome.sensitive);
    else if (outcome.kind === 'relay') await sendRelay(reply, outcome.relay);
    else if (outcome.kind === 'forwarded') await sendForwarded(reply, outcome);
    else sendError(reply, outcome.error);
  } catch (error) {
    // An answer that failed before it was finished (a relay too large or unredactable to pass on).
    sendError(reply, error);
  }
}

/** One request's answer under way: counted, audited and its slot given back once. */
class Reply {
  private finished = false;

  constructor(
    readonly deps: EncodeDeps,
    readonly answering: Answering,
  ) {}

  get exchange(): Exchange {
    return this.answering.exchange;
  }

  /** Counts the answer, completes the audit record, gives back what the request held. */
  finish(code: number, responseObject: unknown, annotations?: Readonly<Record<string, string>>): void {
    if (this.finished) return;
    this.finished = true;
    const { attributes, audit, release, exchange } = this.answering;
    this.deps.metrics.observe(attributes, code, (performance.now() - exchange.started) / 1000);
    if (audit) {
      const status =
        code >= 400 ? (responseObject as { message?: string; reason?: string } | undefined) : undefined;
      audit.complete({
        code,
        ...(status ? { status: 'Failure', message: status.message, reason: status.reason } : {}),
        ...(responseObject !== undefined ? { responseObject } : {}),
        ...(annotations ? { annotations } : {}),
      } as AuditOutcome);
    }
    release?.();
  }

  /**
   * An answer streamed as it comes (a relayed watch, any answer of the access proxy): counted when
   * its headers go out, with the time to them; a long-running one's audit record says so then.
   * Returns what completes it when it ends (its audit record, its slot).
   */
  streamStarted(code: number, longRunning: boolean): (code: number) => void {
    this.finished = true;
    const { attributes, audit, release, exchange } = this.answering;
    this.deps.metrics.observe(attributes, code, (performance.now() - exchange.started) / 1000, longRunning);
    if (longRunning) audit?.responseStarted({ code });
    return (ended) => {
      audit?.complete({ code: ended });
      release?.();
    };
  }
}

/**
 * The access proxy's relay: counted when its headers are known, completed when it ends. A failure
 * before that is answered as a Status; after it, the answer is cut (or, headers not yet sent, a
 * Status after all) and completed with the failure's code.
 */
async function sendForwarded(reply: Reply, outcome: Extract<Outcome, { kind: 'forwarded' }>): Promise<void> {
  let ended: ((code: number) => void) | undefined;
  try {
    const code = await outcome.run((started) => {
      ended = reply.streamStarted(started, outcome.longLived);
    });
    ended?.(code);
  } catch (error) {
    if (!ended) throw error;
    const status = statusOf(reply, error);
    writeStatus(reply.exchange, status, reply.answering.negotiated);
    ended(status.code);
  }
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
function sendObject(
  reply: Reply,
  code: number,
  value: unknown,
  headers?: EndpointHeaders,
  sensitive = false,
  annotations?: Readonly<Record<string, string>>,
): void {
  const encoded = encodeBody(value, reply.answering.negotiated.format);
  write(
    reply.exchange,
    code,
    { ...plainHeaders(headers), 'content-type': encoded.contentType },
    encoded.body,
  );
  reply.finish(code, sensitive && code < 400 ? undefined : value, annotations);
}

/** A `Status` for an error: the gateway's own, or a 500 (logged) for anything unexpected. */
function sendError(reply: Reply, error: unknown): void {
  const status = statusOf(reply, error);
  writeStatus(reply.exchange, status, reply.answering.negotiated);
  reply.finish(status.code, status.toStatus());
}

/** The Status an error is answered with. */
function statusOf(reply: Reply, error: unknown): StatusError {
  // A client that went away mid-answer (the relayed body fails with the abort's reason) is 499,
  // not an error of the gateway's.
  if (error instanceof StatusError) return error;
  const signal = reply.exchange.signal;
  return signal.aborted ? upstreamFailure(error, signal) : unexpected(reply.deps, error);
}

/** Writes `status`; too late for one (the answer is under way), the connection is cut instead. */
function writeStatus(exchange: Exchange, status: StatusError, negotiated: Negotiated): void {
  if (exchange.response.headersSent) {
    exchange.response.destroy();
    return;
  }
  const encoded = encodeBody(status.toStatus(), negotiated.format);
  write(exchange, status.code, { ...status.headers, 'content-type': encoded.contentType }, encoded.body);
}

function unexpected(deps: EncodeDeps, error: unknown): StatusError {
  deps.logger.error({ err: error }, 'gateway request failed');
  return internalError();
}

/** An endpoint's answer. */
function sendAnswer(reply: Reply, answer: EndpointAnswer, sensitive: boolean): void {
  if ('object' in answer) {
    sendObject(reply, answer.code, answer.object, answer.headers, sensitive, answer.auditAnnotations);
    return;
  }
  write(
    reply.exchange,
    answer.code,
    { ...plainHeaders(answer.headers), 'content-type': answer.contentType },
    answer.body,
  );
  reply.finish(answer.code, undefined, answer.auditAnnotations);
}

/**
 * An apiserver answer passed on. Streamed as it comes when nothing needs to look at it (a watch,
 * or a large answer); read whole when it is small (one write with its length is cheaper than a
 * chunked stream), when it must be redacted, re-encoded as YAML, or logged with its body.
 */
async function sendRelay(reply: Reply, relay: Relay): Promise<void> {
  const { attributes, audit, negotiated } = reply.answering;
  const response = relay.relay;
  const code = response.statusCode;
  const contentType = headerValue(response.headers['content-type']) ?? 'application/json';
  const headers: OutgoingHttpHeaders = { 'content-type': contentType };
  for (const name of RELAYED_HEADERS) {
    const value = headerValue(response.headers[name]);
    if (value !== undefined) headers[name] = value;
  }
  if (attributes?.verb === 'watch' && code === 200) {
    await streamWatch(reply, relay, headers);
    return;
  }
  const wantsBody = audit?.level === 'RequestResponse';
  if (!relay.redaction && negotiated.format === 'json' && !wantsBody) {
    await passOn(reply, response, headers);
    return;
  }
  await rewrite(reply, relay, headers, mediaType(contentType) === 'application/json');
}

/** A watch: headers at once (a watch may stay silent for minutes), then events as they come, redacted. */
async function streamWatch(
  reply: Reply,
  { relay: response, redaction }: Relay,
  headers: OutgoingHttpHeaders,
): Promise<void> {
  const code = response.statusCode;
  const ended = reply.streamStarted(code, true);
  const stream = redaction ? response.body.pipe(new RedactingStream(redaction)) : response.body;
  response.body.once('error', (error) => stream.destroy(error));
  const raw = reply.exchange.response;
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
async function passOn(reply: Reply, response: Relay['relay'], headers: OutgoingHttpHeaders): Promise<void> {
  const exchange = reply.exchange;
  const code = response.statusCode;
  const declared = declaredLength(response.headers['content-length']);
  if (declared !== undefined && declared <= BUFFERED_RESPONSE_BYTES) {
    // Its length is known and small (most apiserver answers): read whole by undici's own
    // consumer, without a listener per chunk (bench/gateway: the cheaper read per proxied GET).
    write(exchange, code, headers, Buffer.from(await response.body.arrayBuffer()));
    reply.finish(code, undefined);
    return;
  }
  const start = await readUpTo(response.body, BUFFERED_RESPONSE_BYTES);
  if (start.complete) {
    write(
      exchange,
      code,
      headers,
      start.chunks.length === 1 ? start.chunks[0]! : Buffer.concat(start.chunks),
    );
    reply.finish(code, undefined);
    return;
  }
  const raw = exchange.response;
  raw.writeHead(code, headers);
  for (const chunk of start.chunks) raw.write(chunk);
  await pump(response.body, raw).catch(() => {
    // The client went away, or the apiserver broke off: the answer is incomplete either way.
  });
  reply.finish(code, undefined);
}

/**
 * An answer read whole to be redacted, re-encoded (YAML) or audited with its body. One that
 * must be redacted but cannot be read is not passed on (502).
 */
async function rewrite(
  reply: Reply,
  { relay: response, redaction }: Relay,
  headers: OutgoingHttpHeaders,
  isJson: boolean,
): Promise<void> {
  const code = response.statusCode;
  const text = await readBounded(response.body);
  const exchange = reply.exchange;
  const asItCame = () => {
    if (redaction) throw unredactable();
    write(exchange, code, headers, text);
    reply.finish(code, undefined);
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
    reply.finish(code, undefined);
    return;
  }
  sendObject(reply, code, documents.single, pick(headers, RELAYED_HEADERS));
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

/** A `Content-Length` the answer declares (undici holds the body to it), if one. */
function declaredLength(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) return undefined;
  return Number(value);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function pick(headers: OutgoingHttpHeaders, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) if (typeof headers[name] === 'string') out[name] = headers[name] as string;
  return out;
}
