import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestAttributes } from '../../authz/attributes.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { UpgradeConnection } from '../access-proxy/index.ts';
import type { AuditRecord } from '../audit/auditor.ts';
import type { Negotiated } from '../body.ts';

/**
 * One request on its way through the pipeline (route → authenticate → throttle → scope → audit →
 * dispatch → encode): what the HTTP server received, and what each stage adds to it. Stages read
 * what earlier ones wrote; only `encode` writes the response.
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
  /** JSON until the Accept header was read. */
  negotiated: Negotiated;
  /** The routed attributes (metrics and audit label the request with them once known). */
  attributes: RequestAttributes | undefined;
  identity: AuthenticatedIdentity | undefined;
  audit: AuditRecord | undefined;
  /** Resources to give back when the answer is complete (a watch slot). */
  release: (() => void) | undefined;
  /** Set by `encode` once the answer is written (or streaming). */
  finished: boolean;
}

/** `application/json` both ways: what a request is answered in until its Accept header was read. */
export const JSON_ONLY: Negotiated = Object.freeze({ format: 'json', upstreamAccept: 'application/json' });
