import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';

/**
 * HTTP to identity providers' APIs (code hosting, directories, the cluster manager): TLS with the
 * configured roots (or none checked when the configuration says so), a time limit, a cap on the
 * answer's size, and failures as {@link ProviderApiError} carrying the status only: never a token,
 * never the provider's body (which may echo what was sent).
 */

export interface ProviderTls {
  /** Extra trusted roots (PEM text). */
  readonly ca?: string | undefined;
  /** Do not check the provider's certificate (the configuration's `insecure` / `insecureCa`). */
  readonly insecure?: boolean | undefined;
}

/** A call to a provider's API failed: `status` is its HTTP status, 0 when it could not be reached. */
export class ProviderApiError extends Error {
  override readonly name = 'ProviderApiError';
  constructor(
    readonly status: number,
    what: string,
  ) {
    super(
      status === 0
        ? `${what}: the provider could not be reached`
        : `${what}: the provider answered ${status}`,
    );
  }
}

/** How long one provider call may take, unless the caller passes a signal of its own. */
const PROVIDER_CALL_TIMEOUT_MS = 15_000;
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** PEM text as given, or read from a file when the value is a path (`rootCA`, `ca`). */
export function pemOrFile(value: string | undefined): string | undefined {
  if (!value) return undefined;
  return value.includes('-----BEGIN') ? value : readFileSync(value, 'utf8');
}

/** `fetch` bound to the TLS settings (the system's roots when none are given). */
export type ProviderFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

const dispatchers = new Map<string, Dispatcher>();

function dispatcherFor(tls: ProviderTls): Dispatcher | undefined {
  if (!tls.ca && tls.insecure !== true) return undefined;
  const key = `${tls.insecure === true}\n${tls.ca ?? ''}`;
  let dispatcher = dispatchers.get(key);
  if (!dispatcher) {
    dispatcher = new Agent({
      connect: { ...(tls.ca ? { ca: tls.ca } : {}), rejectUnauthorized: tls.insecure !== true },
    });
    dispatchers.set(key, dispatcher);
  }
  return dispatcher;
}

export function providerFetch(tls: ProviderTls, timeoutMs = PROVIDER_CALL_TIMEOUT_MS): ProviderFetch {
  const dispatcher = dispatcherFor(tls);
  return (url, init) =>
    undiciFetch(url, {
      ...(init as object),
      ...(dispatcher ? { dispatcher } : {}),
      signal: init?.signal ?? AbortSignal.timeout(timeoutMs),
    } as never) as unknown as Promise<Response>;
}

async function boundedText(response: Response): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > MAX_ANSWER_BYTES) throw new ProviderApiError(502, 'the answer is too large');
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel();
      throw new ProviderApiError(502, 'the answer is too large');
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export interface ProviderCall {
  readonly method?: string;
  /** `Authorization` header value, e.g. `Bearer <token>`. */
  readonly authorization?: string;
  readonly headers?: Record<string, string>;
  /** JSON body. */
  readonly json?: unknown;
  /** Form body. */
  readonly form?: Record<string, string>;
  /** What the call is for, in error messages ("the user's teams"). */
  readonly what: string;
}

export interface ProviderAnswer<T> {
  readonly status: number;
  readonly body: T;
  readonly headers: Headers;
}

/**
 * One call; a 2xx answer's JSON body (undefined for an empty body). Any other status, or an
 * unreachable provider, is {@link ProviderApiError}; callers that expect a status (404 for "not a
 * member") pass it in `accept`.
 */
export async function callProvider<T>(
  fetch: ProviderFetch,
  url: string | URL,
  call: ProviderCall,
  accept: readonly number[] = [],
): Promise<ProviderAnswer<T | undefined>> {
  const headers: Record<string, string> = { accept: 'application/json', ...call.headers };
  if (call.authorization) headers.authorization = call.authorization;
  let body: string | undefined;
  if (call.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(call.json);
  } else if (call.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(call.form).toString();
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method: call.method ?? (body === undefined ? 'GET' : 'POST'),
      headers,
      redirect: 'manual',
      ...(body !== undefined ? { body } : {}),
    });
  } catch {
    throw new ProviderApiError(0, call.what);
  }
  const text = await boundedText(response);
  const ok = response.status >= 200 && response.status < 300;
  if (!ok && !accept.includes(response.status)) throw new ProviderApiError(response.status, call.what);
  if (!ok || text.trim() === '')
    return { status: response.status, body: undefined, headers: response.headers };
  try {
    return { status: response.status, body: JSON.parse(text) as T, headers: response.headers };
  } catch {
    throw new ProviderApiError(502, `${call.what}: the answer is not JSON`);
  }
}

/** The `rel="next"` target of an RFC 8288 `Link` header, if any. */
export function nextLink(link: string | null): string | undefined {
  for (const part of (link ?? '').split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part);
    if (match) return match[1];
  }
  return undefined;
}
