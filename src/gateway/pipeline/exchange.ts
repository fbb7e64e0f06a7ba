import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestAttributes } from '../../authz/attributes.ts';
import type { UpgradeConnection } from '../access-proxy/index.ts';
import type { AuditRecord } from '../audit/auditor.ts';
import type { Negotiated } from '../body.ts';

/**
 * One request as the HTTP server received it: what every stage of the pipeline (route →
 * authenticate → negotiate → throttle → scope → receive → audit → dispatch → encode) reads.
 * Nothing in it changes: each stage returns what it adds, and the pipeline (`../server.ts`) hands
 * that to the stages after it, and to encode as an {@link Answering}.
 */
export interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  /** `GET`, `POST`, ...; `HEAD` as sent (answered like `GET`, without a body). */
  readonly method: string;
  /** The path as sent, not percent-decoded. */
  readonly path: string;
  /** The query with its `?`, or empty. */
  readonly search: string;
  /** The client's address (trusted proxies resolved). */
  readonly source: string;
  /** Whether the client reached the gateway over HTTPS (trusted proxies resolved). */
  readonly secure: boolean;
  /** `performance.now()` when the request arrived. */
  readonly started: number;
  /** `Date.now()` when the request arrived (audit timestamps). */
  readonly receivedAt: number;
  /** Aborted when the client goes away before the answer is complete. */
  readonly signal: AbortSignal;
  /** An upgrade request's connection (the access proxy's exec, attach, port-forward); `response` is bound to it. */
  readonly upgrade: UpgradeConnection | undefined;
}

/**
 * What the encode stage answers a request with, its only writer: the exchange and what the stages
 * had established when the answer (or a refusal) was known. Each field comes from one stage.
 */
export interface Answering {
  readonly exchange: Exchange;
  /** The route stage's attributes (metrics and audit label the request with them); none before routing. */
  readonly attributes: RequestAttributes | undefined;
  /** The negotiate stage's format; {@link JSON_ONLY} before it ran. */
  readonly negotiated: Negotiated;
  /** The audit stage's record, when the request is audited. */
  readonly audit: AuditRecord | undefined;
  /** The throttle stage's slot (a long-lived request's), given back when the answer is complete. */
  readonly release: (() => void) | undefined;
}

/** `application/json` both ways: what a request is answered in until its Accept header was read. */
export const JSON_ONLY: Negotiated = Object.freeze({ format: 'json', upstreamAccept: 'application/json' });
