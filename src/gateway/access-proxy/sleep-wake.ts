import { parseGoDuration } from '../../api/duration.ts';
import type { Condition } from '../../api/meta.ts';
import { forbidden, StatusError, sanitize } from '../../api/status.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { findCondition } from '../../runtime/conditions.ts';
import { isProvisioned } from './managed-targets.ts';

/**
 * Sleep mode at the access proxy (issue 27, the contract in docs/virtual-clusters.md): what a
 * request to a project's virtual cluster does for the instance's state, pure. An instance asleep
 * (`Sleeping=True`) is woken by the request (the gateway writes `sleepmode.platform/last-activity`)
 * and the request waits until it is ready, bounded by the client's timeout; an awake one's requests
 * are its activity, written at most once per {@link ACTIVITY_INTERVAL_MS}. `wake.ts` does the I/O.
 */

/** An awake instance's activity is written at most this often (per instance, per gateway replica). */
export const ACTIVITY_INTERVAL_MS = 10_000;
/** How long a request waits for an instance to wake when the client names no `timeout`. */
export const DEFAULT_WAKE_WAIT_MS = 60_000;
/** The longest a request waits for a wake, whatever `timeout` it names (a waking control plane takes seconds, not hours). */
export const MAX_WAKE_WAIT_MS = 300_000;
/** Retry-After of the 503 answered when the instance was not ready in time. */
export const WAKE_RETRY_AFTER_SECONDS = 5;

/**
 * What a request does before it is relayed:
 * - `relay`: at once (an awake instance, a registered one, one not made yet: the relay answers as
 *   usual); `activity`: the request is the instance's activity (throttled).
 * - `wake`: the instance sleeps: write the wake request now, then wait until it is ready.
 * - `wait`: the instance was woken (its `Sleeping` went False after it last stopped being Ready)
 *   and is not ready yet: wait, as the request that woke it does.
 */
export type WakeAction =
  | { readonly kind: 'relay'; readonly activity: boolean }
  | { readonly kind: 'wake' }
  | { readonly kind: 'wait' };

type Conditions = readonly Condition[] | undefined;

const isTrue = (condition: Condition | undefined) => condition?.status === 'True';

/** Ready to serve: `Ready=True` and not `Sleeping=True` (what a waiting request waits for). */
export function isAwake(instance: Pick<VirtualClusterInstance, 'status'>): boolean {
  const conditions = instance.status?.conditions;
  return isTrue(findCondition(conditions, 'Ready')) && !isTrue(findCondition(conditions, 'Sleeping'));
}

/**
 * The instance was woken and is starting: `Sleeping` is present and not True, `Ready` is not True,
 * and `Sleeping` changed after `Ready` did (it stopped being Ready when it fell asleep, then woke).
 * Not waited for: an instance not Ready for another reason after it woke (its apiserver went away
 * later: `Ready` changed after `Sleeping`), nor one being made for the first time (both conditions
 * written at once: the relay answers for it, `NotProvisioned` or unreachable, as before sleep mode).
 */
function isWaking(conditions: Conditions): boolean {
  const sleeping = findCondition(conditions, 'Sleeping');
  const ready = findCondition(conditions, 'Ready');
  if (!sleeping || isTrue(sleeping) || isTrue(ready)) return false;
  if (!ready) return false;
  return Date.parse(sleeping.lastTransitionTime ?? '') > Date.parse(ready.lastTransitionTime ?? '');
}

/**
 * What a request allowed through to `instance` (undefined: not in the cache) does first. Only a
 * provisioned instance sleeps and has activity; a registered one is relayed to as it is.
 */
export function wakeAction(
  instance: Pick<VirtualClusterInstance, 'spec' | 'status'> | undefined,
): WakeAction {
  if (!instance || !isProvisioned(instance)) return { kind: 'relay', activity: false };
  const conditions = instance.status?.conditions;
  if (isTrue(findCondition(conditions, 'Sleeping'))) return { kind: 'wake' };
  if (isWaking(conditions)) return { kind: 'wait' };
  return { kind: 'relay', activity: isAwake(instance) };
}

/** When the instance fell asleep: `status.sleepingSince`, else its `Sleeping` condition's transition time. */
export function sleepingSince(instance: Pick<VirtualClusterInstance, 'status'>): string | undefined {
  const status = instance.status;
  return status?.sleepingSince ?? findCondition(status?.conditions, 'Sleeping')?.lastTransitionTime;
}

/**
 * The value of the last-activity annotation written at `nowMs`: RFC 3339 UTC with milliseconds.
 * Never at or before `sleepingSince` (a gateway whose clock is behind the controller's must still
 * wake the instance: the controller wakes on activity later than the time it fell asleep).
 */
export function activityStamp(nowMs: number, sleepingSince?: string): string {
  const since = sleepingSince ? Date.parse(sleepingSince) : Number.NaN;
  const at = Number.isFinite(since) && nowMs <= since ? since + 1 : nowMs;
  return new Date(at).toISOString();
}

/**
 * How long a request waits for its instance to wake: its `timeout` query parameter (kube-apiserver
 * reads it as the request's own deadline) when it is a positive Go duration (`api/duration.ts`), else
 * {@link DEFAULT_WAKE_WAIT_MS}; at most {@link MAX_WAKE_WAIT_MS}.
 */
export function wakeWaitMs(search: string): number {
  const timeout = new URLSearchParams(search).get('timeout');
  const asked = timeout === null ? undefined : parseGoDuration(timeout);
  if (asked === undefined || asked <= 0) return DEFAULT_WAKE_WAIT_MS;
  return Math.min(asked, MAX_WAKE_WAIT_MS);
}

/** The 503 of a request whose instance did not get ready in time: names it, says it is waking, Retry-After. */
export function notAwakeInTime(description: string, waitedMs: number): StatusError {
  const seconds = Math.round(waitedMs / 100) / 10;
  return new StatusError(
    503,
    'ServiceUnavailable',
    `${description} is waking up from sleep and was not ready within ${seconds}s; try again shortly`,
    { retryAfterSeconds: WAKE_RETRY_AFTER_SECONDS },
    { 'Retry-After': String(WAKE_RETRY_AFTER_SECONDS) },
  );
}

/** The 503 of a request whose instance could not be woken (the wake request was not written). */
export function wakeNotRequested(description: string): StatusError {
  return new StatusError(
    503,
    'ServiceUnavailable',
    `${sanitize(description, 200)} is asleep and the platform could not ask it to wake; try again shortly`,
    { retryAfterSeconds: WAKE_RETRY_AFTER_SECONDS },
    { 'Retry-After': String(WAKE_RETRY_AFTER_SECONDS) },
  );
}

/** At most this many requests wait for one instance to wake (per gateway replica); more get a 503 at once. */
export const MAX_WAITING_PER_INSTANCE = 256;

/** The 503 of a request beyond {@link MAX_WAITING_PER_INSTANCE}: names the instance, Retry-After. */
export function tooManyWaiting(description: string): StatusError {
  return new StatusError(
    503,
    'ServiceUnavailable',
    `${sanitize(description, 200)} is waking up from sleep and ${MAX_WAITING_PER_INSTANCE} requests already wait for it; try again shortly`,
    { retryAfterSeconds: WAKE_RETRY_AFTER_SECONDS },
    { 'Retry-After': String(WAKE_RETRY_AFTER_SECONDS) },
  );
}

/**
 * The 403 of a request that would wake an instance its caller may not even read: only a person who
 * may get the VirtualClusterInstance wakes it (or keeps it awake), not any holder of a key that
 * reaches the path (an unscoped key of someone outside the project).
 */
export function wakeRefused(description: string): StatusError {
  return forbidden(
    `${sanitize(description, 200)} is asleep, and only a person who may get its VirtualClusterInstance wakes it`,
  );
}

/**
 * At most one activity write per key per interval, for a bounded number of keys: `due` says
 * whether a write may go now and, when it may, counts it. Beyond `maxKeys` the least recently
 * written key is forgotten (its next request writes again: harmless, only an extra write).
 */
export class ActivityThrottle {
  private readonly written = new Map<string, number>();

  constructor(
    private readonly intervalMs = ACTIVITY_INTERVAL_MS,
    private readonly maxKeys = 4096,
  ) {}

  /** Whether a write would be due now, without counting one (`due` counts it). */
  wouldBeDue(key: string, nowMs: number): boolean {
    const last = this.written.get(key);
    return last === undefined || nowMs - last >= this.intervalMs || nowMs < last;
  }

  due(key: string, nowMs: number): boolean {
    if (!this.wouldBeDue(key, nowMs)) return false;
    this.written.delete(key);
    this.written.set(key, nowMs);
    for (const oldest of this.written.keys()) {
      if (this.written.size <= this.maxKeys) break;
      this.written.delete(oldest);
    }
    return true;
  }

  /** Forgets `key` (its instance was deleted). */
  forget(key: string): void {
    this.written.delete(key);
  }

  get size(): number {
    return this.written.size;
  }
}
