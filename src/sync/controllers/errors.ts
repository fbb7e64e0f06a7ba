import { ApiException } from '@kubernetes/client-node';
import { errorReason, RuntimeError } from '../../runtime/errors.ts';
import { RestrictedFieldPatched, WholeObjectPatchInvalid } from '../patches/apply.ts';
import { ExpressionFailure } from '../patches/expression-failures.ts';
import { ReferencePatchError } from '../patches/reference-patches.ts';

/**
 * A host object with the translated name exists and is not ours (another controller's, a user's,
 * another virtual cluster's). The syncer never touches it; the virtual object stays unsynced
 * until the name is free.
 */
export class HostObjectConflict extends RuntimeError {}

/** The host object we synced lost its bookkeeping (someone edited it): it is left alone. */
export class HostObjectNotManaged extends RuntimeError {}

/**
 * After the patches the object is one the host may not hold from a virtual cluster (a Secret
 * turned into a service-account token): nothing is written.
 */
export class HostObjectIneligible extends RuntimeError {}

/** Kinds whose content must never appear in an Event, a condition or a log line. */
const SECRET_KINDS = new Set(['Secret']);

function apiMessage(err: ApiException<unknown>): string {
  const body = err.body as { message?: unknown } | string | undefined;
  if (typeof body === 'object' && body !== null && typeof body.message === 'string') return body.message;
  return `HTTP ${err.code}`;
}

/**
 * A one-line description of why an object did not sync, safe to put in an Event, a condition
 * or a log line. For Secrets only the error class and the failing patch are given: an
 * expression's error (or an apiserver validation message) can quote the value it worked on.
 */
export function describeSyncError(kind: string, err: unknown): string {
  const reason = errorReason(err);
  const secret = SECRET_KINDS.has(kind);
  // These name only the patch and the field: nothing of the object's content.
  if (err instanceof RestrictedFieldPatched || err instanceof WholeObjectPatchInvalid) {
    return `${reason}: ${err.message}`;
  }
  if (err instanceof ExpressionFailure || err instanceof ReferencePatchError) {
    return secret ? `${reason} in ${err.patch}` : `${reason}: ${err.message}`;
  }
  if (err instanceof ApiException) {
    return secret ? `${reason} (HTTP ${err.code})` : `${reason}: ${apiMessage(err)}`;
  }
  if (secret) return reason;
  return err instanceof Error ? `${reason}: ${err.message}` : reason;
}
