import { type OwnedAccessKey, PASSWORD_CONNECTOR } from '../../api/ownedaccesskey.ts';
import { errorReason, RuntimeError } from '../../runtime/errors.ts';

/**
 * Identity refresh (`spec.identityRefresh`), the pure part: when a Login key signed in through a
 * provider that can be asked again is due, and what a failed refresh says.
 */

export const IDENTITY_REFRESHED_CONDITION = 'IdentityRefreshed';
/** How long an identity stays as the provider last stated it, by default. */
export const DEFAULT_IDENTITY_REFRESH_INTERVAL_MS = 10 * 60_000;

export type RefreshSchedule =
  | { readonly action: 'skip' }
  | { readonly action: 'wait'; readonly inMs: number }
  | { readonly action: 'refresh' };

/** Whether and when a key's identity is refreshed. */
export function refreshSchedule(key: OwnedAccessKey, intervalMs: number, now: number): RefreshSchedule {
  const connector = key.spec.identity?.connector;
  if (
    key.spec.type !== 'Login' ||
    !connector ||
    connector === PASSWORD_CONNECTOR ||
    !key.spec.user ||
    key.spec.disabled === true ||
    key.metadata.deletionTimestamp
  )
    return { action: 'skip' };
  const last = Date.parse(key.spec.identityRefresh ?? key.metadata.creationTimestamp ?? '');
  if (Number.isNaN(last)) return { action: 'refresh' };
  const inMs = last + intervalMs - now;
  return inMs > 0 ? { action: 'wait', inMs } : { action: 'refresh' };
}

/** A refresh that may work when tried again (an unreachable provider, a failed write): retried. */
export class RefreshFailed extends RuntimeError {}

/**
 * The failure a refresh that failed for `err` is retried with. Its message, which the condition
 * and the Warning Event carry, names only the class of `err`: a provider's answer may hold
 * anything, and stays in the log (the cause).
 */
export function refreshFailed(err: unknown): RefreshFailed {
  return new RefreshFailed(`the identity could not be refreshed (${errorReason(err)}); it is tried again`, {
    cause: err,
  });
}
