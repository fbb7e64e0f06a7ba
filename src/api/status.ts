/**
 * The Kubernetes `Status` every component answers errors with (DESIGN.md section 5): the gateway's
 * own answers, admission denials, and the causes field validation reports. One type for all, so a
 * field cause reads the same wherever it comes from. Messages never quote a token, a key or a
 * request body: they may hold secrets.
 */

import { prototypeKeyPaths } from '../runtime/json.ts';

/** The `reason` of a `details.causes[]` entry, as kube-apiserver spells field errors. */
type CauseReason =
  | 'FieldValueInvalid'
  | 'FieldValueRequired'
  | 'FieldValueForbidden'
  | 'FieldValueNotSupported'
  | 'FieldValueDuplicate'
  | 'FieldValueNotFound';

/** One problem of a request, usually with a field path such as `spec.scope.rules[0].resources[1]`. */
export interface StatusCause {
  readonly reason?: CauseReason;
  readonly message?: string;
  readonly field?: string;
}

/** A cause naming its field, as validation reports it. */
export type FieldCause = Required<StatusCause>;

interface StatusDetails {
  readonly name?: string;
  readonly group?: string;
  readonly kind?: string;
  readonly causes?: readonly StatusCause[];
  readonly retryAfterSeconds?: number;
}

export interface Status {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata: Record<string, never>;
  readonly status: 'Success' | 'Failure';
  readonly message: string;
  readonly reason: string;
  readonly details?: StatusDetails;
  readonly code: number;
}

/** An error answered with a `Status` of its own: thrown by handlers, encoded by the server. */
export class StatusError extends Error {
  override readonly name = 'StatusError';
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
    /** Extra response headers (Retry-After, WWW-Authenticate). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  toStatus(): Status {
    return failureStatus(this.code, this.reason, this.message, this.details);
  }
}

export function failureStatus(
  code: number,
  reason: string,
  message: string,
  details?: StatusDetails,
): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

/** A `Status` reporting success, as kube-apiserver answers some writes (a subresource that stores nothing to show). */
interface SuccessStatus extends Omit<Status, 'status' | 'reason'> {
  readonly status: 'Success';
}

export function successStatus(message: string, code = 200): SuccessStatus {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', message, code };
}

/** One message for every 401 except expiry, so that the answer tells nothing about the key. */
export const UNAUTHORIZED_MESSAGE =
  'Unauthorized: a valid platform access key is required (Authorization: Bearer <access key>)';
export const EXPIRED_MESSAGE = 'platform access key expired. Please login again';

export const unauthorized = () =>
  new StatusError(401, 'Unauthorized', UNAUTHORIZED_MESSAGE, undefined, {
    'WWW-Authenticate': 'Bearer realm="platform"',
  });

export const accessKeyExpired = () =>
  new StatusError(401, 'Unauthorized', EXPIRED_MESSAGE, undefined, {
    'WWW-Authenticate': 'Bearer realm="platform", error="invalid_token"',
  });

export const forbidden = (message: string, details?: StatusDetails) =>
  new StatusError(403, 'Forbidden', message, details);

export const notFound = (
  message = 'the server could not find the requested resource',
  details?: StatusDetails,
) => new StatusError(404, 'NotFound', message, details);

export const badRequest = (message: string, causes?: readonly StatusCause[]) =>
  new StatusError(400, 'BadRequest', message, causes ? { causes } : undefined);

export const methodNotAllowed = (message: string) => new StatusError(405, 'MethodNotAllowed', message);

export const notAcceptable = (message: string) => new StatusError(406, 'NotAcceptable', message);

export const conflict = (message: string, details?: StatusDetails) =>
  new StatusError(409, 'Conflict', message, details);

export const requestEntityTooLarge = (limitBytes: number) =>
  new StatusError(413, 'RequestEntityTooLarge', `the request body exceeds the limit of ${limitBytes} bytes`);

export const unsupportedMediaType = (contentType: string | undefined) =>
  new StatusError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format: ${sanitize(contentType ?? '(none)')}`,
  );

export const invalid = (
  kind: string,
  name: string,
  causes: readonly StatusCause[],
  group = 'management.platform',
) =>
  new StatusError(
    422,
    'Invalid',
    `${kind}${group ? `.${group}` : ''} "${sanitize(name)}" is invalid: ${causes
      .map((cause) => (cause.field ? `${cause.field}: ${cause.message ?? ''}` : (cause.message ?? '')))
      .join(', ')}`,
    { name, group, kind, causes },
  );

/**
 * Refuses (422, one cause per key with its field path, `metadata.labels.__proto__`) a request body
 * holding a key `__proto__` anywhere: zod drops such a key without a word (it assigns it, which
 * sets a prototype), so the body would be read as if the key were not there. No field or map of
 * the platform's kinds can hold one (the CRDs and label rules refuse it too). Call it before
 * parsing the body with its schema.
 */
export function refusePrototypeKeys(kind: string, name: string, body: unknown): void {
  const paths = prototypeKeyPaths(body);
  if (paths.length === 0) return;
  throw invalid(
    kind,
    name,
    paths.map((path) => ({
      reason: 'FieldValueNotSupported',
      field: path.map(String).join('.'),
      message: 'the key "__proto__" is not supported',
    })),
  );
}

/** A 422 from a schema's issues, each a cause with its field path (`spec.ttl`). */
export const invalidFromIssues = (
  kind: string,
  name: string,
  issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[],
) =>
  invalid(
    kind,
    name,
    issues.map((issue) => ({
      reason: 'FieldValueInvalid',
      field: issue.path.map(String).join('.'),
      message: issue.message,
    })),
  );

export const tooManyRequests = (retryAfterSeconds: number) =>
  new StatusError(
    429,
    'TooManyRequests',
    'too many failed authentications; try again later',
    { retryAfterSeconds },
    { 'Retry-After': String(retryAfterSeconds) },
  );

export const serviceUnavailable = (message: string) =>
  new StatusError(503, 'ServiceUnavailable', message, { retryAfterSeconds: 1 }, { 'Retry-After': '1' });

export const gatewayTimeout = (message: string) => new StatusError(504, 'Timeout', message);

export const internalError = () =>
  new StatusError(500, 'InternalError', 'an internal error occurred; it has been logged');

/** Cuts user-supplied text quoted in a message to something short and printable. */
export function sanitize(text: string, max = 100): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips control characters
  const clean = text.replace(/[\u0000-\u001f\u007f]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}...` : clean;
}

/** The HTTP reason phrase Kubernetes uses for a code it did not explain. */
export function reasonForCode(code: number): string {
  switch (code) {
    case 400:
      return 'BadRequest';
    case 401:
      return 'Unauthorized';
    case 403:
      return 'Forbidden';
    case 404:
      return 'NotFound';
    case 405:
      return 'MethodNotAllowed';
    case 406:
      return 'NotAcceptable';
    case 409:
      return 'Conflict';
    case 410:
      return 'Expired';
    case 413:
      return 'RequestEntityTooLarge';
    case 415:
      return 'UnsupportedMediaType';
    case 422:
      return 'Invalid';
    case 429:
      return 'TooManyRequests';
    case 503:
      return 'ServiceUnavailable';
    case 504:
      return 'Timeout';
    default:
      return code >= 500 ? 'InternalError' : 'Unknown';
  }
}
