import { ApiException } from '@kubernetes/client-node';

/**
 * Errors are classes: the class name is the condition reason, the Event reason and the metric
 * label (see `errorReason`). Subclasses must not be minified away; keep `name` set explicitly.
 */
export class RuntimeError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Thrown by a reconciler when retrying cannot help (invalid spec, missing permission that only a
 * human can grant). The controller does not requeue the key; the reconciler is expected to set
 * a `Stalled` condition whose reason is the error's class name.
 */
export class TerminalError extends RuntimeError {}

/** The watch or list resourceVersion is too old (HTTP 410 Gone); the informer must relist. */
export class ResourceVersionExpiredError extends RuntimeError {}

/** A watch stream stayed silent longer than the server timeout plus slack (a half-open connection). */
export class WatchStalledError extends RuntimeError {}

/** A watch stream carried an ERROR event other than 410. */
export class WatchErrorEventError extends RuntimeError {
  constructor(
    readonly code: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** A request did not get an answer in time. */
export class RequestTimeoutError extends RuntimeError {}

/** The leader could not renew its lease within the renew deadline. */
export class LeaderElectionLostError extends RuntimeError {}

/** A finalizer may not be added to an object that is being deleted. */
export class ObjectBeingDeletedError extends RuntimeError {}

/** The name of an error's class, for condition reasons, Event reasons and metric labels. */
export function errorReason(err: unknown): string {
  if (err instanceof ApiException) return apiReason(err);
  if (err instanceof Error) {
    const name = err.constructor?.name;
    return name && name !== 'Object' ? name : err.name || 'Error';
  }
  return 'UnknownError';
}

/**
 * A message for conditions, Events and logs: an API error's `Status.message` (client-node's own
 * message repeats the whole body and the response headers), else the error's message.
 */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const message = parseBody(err.body)?.message;
    return typeof message === 'string' && message !== '' ? message : `the apiserver answered ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The Kubernetes `Status.reason` of an API error (`Conflict`, `NotFound`...), else `ApiError<code>`. */
function apiReason(err: ApiException<unknown>): string {
  const body = parseBody(err.body);
  const reason = body?.reason;
  return typeof reason === 'string' && reason !== '' ? reason : `ApiError${err.code}`;
}

function parseBody(body: unknown): Record<string, unknown> | undefined {
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : undefined;
}

export function isApiError(err: unknown, code?: number): err is ApiException<unknown> {
  return err instanceof ApiException && (code === undefined || err.code === code);
}

export const isNotFound = (err: unknown): boolean => isApiError(err, 404);
/** 409: a name that exists (`AlreadyExists`) or a stale resourceVersion (`Conflict`). */
export const isConflict = (err: unknown): boolean => isApiError(err, 409);

/** A create failed because the name exists: 409 with reason `AlreadyExists` (not a resourceVersion conflict). */
export function isAlreadyExists(err: unknown): boolean {
  if (!isApiError(err, 409)) return false;
  const reason = parseBody(err.body)?.reason;
  return reason === undefined || reason === 'AlreadyExists';
}
