import * as http from 'node:http';
import * as https from 'node:https';
import { ApiException } from '@kubernetes/client-node';
import { ownValue } from './json.ts';

/* What the API client's requests and its watches share. */

/** The node module that sends requests to `url`. */
export function transport(url: URL): typeof https | typeof http {
  return url.protocol === 'https:' ? https : http;
}

/** Why `signal` aborted, as an Error. */
export function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('request aborted');
}

/** An apiserver's answer other than 2xx as client-node's ApiException (its Status message when it sent one). */
export function apiException(
  code: number,
  text: string,
  headers: http.IncomingHttpHeaders,
): ApiException<unknown> {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text
  }
  const flatHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flatHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return new ApiException(
    code,
    statusMessage(body) ?? (ownValue(http.STATUS_CODES, String(code)) || 'error'),
    body,
    flatHeaders,
  );
}

function statusMessage(body: unknown): string | undefined {
  return typeof body === 'object' &&
    body !== null &&
    typeof (body as { message?: unknown }).message === 'string'
    ? (body as { message: string }).message
    : undefined;
}
