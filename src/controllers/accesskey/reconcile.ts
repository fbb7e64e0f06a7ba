import type { ConfigStatus } from '../../api/config.ts';
import type { OwnedAccessKey, OwnedAccessKeyStatus } from '../../api/ownedaccesskey.ts';
import { resources, type Stored } from '../../api/resources.ts';
import {
  type AccessKeyLifetimeLimits,
  AccessKeyWithoutCreationTimestamp,
  accessKeyExpiry,
} from '../../identity/expiry.ts';
import { deleteObject } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ConditionInput } from '../../runtime/conditions.ts';
import { errorMessage, isConflict, RuntimeError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';

/** What to do with a key at `now`: pure, so the decision is table-tested without a cluster. */
export type KeyLifecycleDecision =
  | { action: 'delete'; expiry: Date | null }
  | { action: 'keep'; expiry: Date | null; recheckInMs?: number };

export function decideKeyLifecycle(
  key: OwnedAccessKey,
  limits: AccessKeyLifetimeLimits,
  now: Date,
): KeyLifecycleDecision {
  let expiry: Date | null;
  try {
    expiry = accessKeyExpiry(key, limits);
  } catch (err) {
    // A key with a limit but no creation time is broken: fail closed.
    if (err instanceof AccessKeyWithoutCreationTimestamp)
      return key.spec.disabled ? { action: 'keep', expiry: null } : { action: 'delete', expiry: null };
    throw err;
  }
  if (expiry === null) return { action: 'keep', expiry };
  const remaining = expiry.getTime() - now.getTime();
  // A disabled key is kept (it authenticates nothing anyway): disabling is how an admin keeps one.
  if (remaining <= 0) return key.spec.disabled ? { action: 'keep', expiry } : { action: 'delete', expiry };
  return { action: 'keep', expiry, recheckInMs: remaining };
}

export const READY_CONDITION = 'Ready';

/**
 * The key's `Ready` condition for a lifecycle decision: True `Active` (until when, or that it
 * does not expire), True `Disabled` when `spec.disabled` (the key is as its spec asks: kept, and
 * refused; a GitOps tool must not wait for it, and Argo CD's script shows it Suspended), False
 * `Expired` once its deadline has passed (the key is being deleted). The message depends on the
 * object alone, never on `now`, so reconciling an unchanged key writes nothing.
 */
export function keyReadyCondition(key: OwnedAccessKey, decision: KeyLifecycleDecision): ConditionInput {
  const base = {
    type: READY_CONDITION,
    ...(key.metadata.generation !== undefined ? { observedGeneration: key.metadata.generation } : {}),
  };
  const expiry = decision.expiry?.toISOString();
  if (key.spec.disabled)
    return {
      ...base,
      status: 'True',
      reason: 'Disabled',
      message: 'the key is disabled (spec.disabled) and authenticates nothing',
    };
  if (decision.action === 'delete')
    return {
      ...base,
      status: 'False',
      reason: 'Expired',
      message: expiry
        ? `the key expired at ${expiry} and is being deleted`
        : 'the key has a lifetime limit but no creation time, so it counts as expired and is being deleted',
    };
  return {
    ...base,
    status: 'True',
    reason: 'Active',
    message: expiry ? `the key is active until ${expiry}` : 'the key is active and does not expire',
  };
}

export interface AccessKeyReconcilerDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  keys: Store<Stored<OwnedAccessKey>>;
  /** The current platform configuration (see `platformConfigReader`). */
  config: () => ConfigStatus;
}

/**
 * Deletes each OwnedAccessKey at its deadline, with a delayed requeue at the exact time (no
 * polling; a restart recomputes every deadline from the objects), and records the computed expiry
 * in `status.expirationTimestamp` and the key's state in the `Ready` condition, in one status
 * write (none when both are unchanged).
 */
export function accessKeyReconciler(deps: AccessKeyReconcilerDeps) {
  return objectReconciler<Stored<OwnedAccessKey>, OwnedAccessKeyStatus>({
    kind: 'OwnedAccessKey',
    resource: resources.ownedAccessKeys,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.keys,
    action: 'ExpireAccessKey',
    // An omitted expirationTimestamp is removed (undefined becomes null in the merge patch).
    statusOf: (key) => ({ expirationTimestamp: expiryOf(deps, key)?.toISOString() }),
    apply: (key) => reconcileAccessKey(deps, key),
  });
}

/** Keeps the key (Ready says how, and when to look again), or deletes it at its deadline. */
async function reconcileAccessKey(
  deps: AccessKeyReconcilerDeps,
  key: Stored<OwnedAccessKey>,
): Promise<Converged<OwnedAccessKeyStatus>> {
  const now = new Date(deps.clock.now());
  const decision = decideKeyLifecycle(key, deps.config().auth, now);
  if (decision.action === 'keep') {
    return {
      ready: keyReadyCondition(key, decision),
      ...(decision.recheckInMs !== undefined ? { requeueAfter: decision.recheckInMs } : {}),
    };
  }
  const name = key.metadata.name ?? '';
  try {
    // The resourceVersion too: a lastActivity written since we looked may have extended the key.
    await deleteObject(deps.api, resources.ownedAccessKeys, key, { unchanged: true });
  } catch (err) {
    if (isConflict(err)) throw err;
    // Until the deletion succeeds, the key says it has expired (and why it still exists).
    const expired = keyReadyCondition(key, decision);
    throw new ExpiredKeyNotDeleted(`${expired.message}; deleting it failed: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  const owner = key.spec.user ?? key.spec.team;
  if (owner) {
    void deps.events.record(
      { apiVersion: 'management.platform/v1', kind: key.spec.user ? 'User' : 'Team', name: owner },
      {
        type: 'Normal',
        reason: 'AccessKeyExpired',
        action: 'DeleteAccessKey',
        note: `access key ${name} expired at ${decision.expiry?.toISOString() ?? 'an unknown time'} and was deleted`,
      },
    );
  }
  return { ready: keyReadyCondition(key, decision), deleted: true };
}

/** The key's expiry under the platform configuration (null: none, or no creation time to count from). */
function expiryOf(deps: AccessKeyReconcilerDeps, key: OwnedAccessKey): Date | null {
  try {
    return accessKeyExpiry(key, deps.config().auth);
  } catch (err) {
    if (err instanceof AccessKeyWithoutCreationTimestamp) return null;
    throw err;
  }
}

/** An expired key whose deletion failed (it is retried); until then the key says it expired. */
export class ExpiredKeyNotDeleted extends RuntimeError {}
