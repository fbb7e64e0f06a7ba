import { StatusError } from '../../api/status.ts';
import {
  decodeRequestBody,
  decodesBody,
  hasBody,
  MAX_BODY_BYTES,
  type RequestBody,
  readRequestBody,
} from '../body.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';

/**
 * The receive stage: the request body, read whole (413 past {@link MAX_BODY_BYTES}) and, for
 * resource writes, decoded by the verb (400/415 thrown when it cannot be). The decoded object (or
 * the patch's value) is what the audit log records as the request object.
 */

/** What the receive stage hands to dispatch. */
export interface ReceivedBody {
  /** The raw body (empty when none). */
  readonly bytes: Buffer;
  /** The body decoded by the verb, for resource writes. */
  readonly body: RequestBody | undefined;
  /** The decoded body as the audit log records it (a patch: its document), for resource writes. */
  readonly requestObject?: unknown;
}

const EMPTY = Buffer.alloc(0);

export async function receiveBody(
  exchange: Exchange,
  routed: Exclude<Routed, { kind: 'unknown' | 'cluster' }>,
  limit = MAX_BODY_BYTES,
): Promise<ReceivedBody> {
  const bytes = hasBody(exchange.request.headers) ? await readRequestBody(exchange.request, limit) : EMPTY;
  const verb = routed.attributes.verb;
  if (routed.resource === undefined || !decodesBody(verb, bytes)) return { bytes, body: undefined };
  const body = decodeRequestBody(bytes, exchange.request.headers['content-type'], verb);
  if (body instanceof StatusError) throw body;
  const requestObject = verb === 'patch' ? (body as { value: unknown }).value : body;
  return { bytes, body, requestObject };
}
