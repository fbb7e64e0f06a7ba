import { validateHeaderName, validateHeaderValue } from 'node:http';
import { badRequest, reasonForCode, StatusError } from '../api/status.ts';
import { setOwnValue } from '../runtime/json.ts';
import { LoginRefused } from './identity.ts';
import { SealBroken } from './secrets.ts';
import { LoginThrottled } from './service.ts';

/**
 * The HTTP side of the sign-in endpoints (`endpoints.ts`), free of any framework: the request and
 * answer they exchange with the gateway, the headers every answer under `/auth` carries, cookies,
 * and refusals as the platform's one Kubernetes `Status` error.
 */

export const AUTH_BASE = '/auth';

export interface LoginHttpRequest {
  readonly method: string;
  /** Path and query, e.g. `/auth/oidc/callback?code=...`. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body as text (forms and JSON), when there is one. */
  readonly body?: string | undefined;
  /** The client address (trusted proxies applied by the gateway). */
  readonly source: string;
  /** The caller's identity when the request carried a valid key (for logout). */
  readonly caller?: { readonly user: string; readonly keyName: string } | undefined;
  /** Whether the client reached the gateway over HTTPS (cookies are then `Secure`). */
  readonly secure: boolean;
}

export interface LoginHttpResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: string;
}

export const HTML = 'text/html; charset=utf-8';

/** Headers `customHttpHeaders` may not set: they frame or route the answer itself. */
const RESERVED_HEADERS = new Set([
  'connection',
  'content-encoding',
  'content-length',
  'content-type',
  'keep-alive',
  'location',
  'set-cookie',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The headers every answer under `/auth` carries: no caching, no framing, and
 * `auth.customHttpHeaders` (names in lower case; a header with an invalid name or value, or one
 * that frames the answer itself, is left out rather than breaking every sign-in).
 */
export function authHeaders(custom: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'cache-control': 'no-store', 'x-frame-options': 'DENY' };
  for (const [name, value] of Object.entries(custom ?? {})) {
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) continue;
    try {
      validateHeaderName(lower);
      validateHeaderValue(lower, value);
    } catch {
      continue;
    }
    setOwnValue(headers, lower, value);
  }
  return headers;
}

export function cookieOf(request: LoginHttpRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The cookie keeping a device token (see `throttle.ts`) for the password form. */
export const deviceCookie = (token: string, secure: boolean) =>
  `platform_device=${token}; Path=${AUTH_BASE}/password/; Max-Age=${90 * 24 * 3600}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;

export const wantsJson = (request: LoginHttpRequest) =>
  (request.headers['content-type'] ?? '').startsWith('application/json') ||
  (request.headers.accept ?? '').startsWith('application/json');

/**
 * A sign-in refusal as the platform's one Kubernetes `Status` error (src/api/status.ts): its code
 * and message, the reason Kubernetes gives that code, `Retry-After` when throttled. Anything that
 * is no refusal is a 500 without details (the caller learns nothing of what broke).
 */
export function refusalStatus(err: unknown): StatusError {
  if (err instanceof LoginThrottled) {
    return new StatusError(
      err.code,
      reasonForCode(err.code),
      err.message,
      { retryAfterSeconds: err.retryAfterSeconds },
      { 'Retry-After': String(err.retryAfterSeconds) },
    );
  }
  if (err instanceof LoginRefused) return new StatusError(err.code, reasonForCode(err.code), err.message);
  if (err instanceof SealBroken) return badRequest(err.message);
  return new StatusError(500, 'InternalError', 'the sign-in failed on the server; try again later');
}

/** A `Status` answer for JSON clients. */
export function statusAnswer(error: StatusError): LoginHttpResponse {
  return {
    status: error.code,
    headers: { ...error.headers, 'content-type': 'application/json' },
    body: JSON.stringify(error.toStatus()),
  };
}
