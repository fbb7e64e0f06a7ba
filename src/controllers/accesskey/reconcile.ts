import type { ConfigStatus } from '../../api/config.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import {
  type AccessKeyLifetimeLimits,
  AccessKeyWithoutCreationTimestamp,
  accessKeyExpiry,
} from '../../identity/expiry.ts';
import { patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { isNotFound } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { isBeingDeleted } from '../../runtime/finalizers.ts';
import { type KubeApi, objectPath } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { resources, type Stored } from '../resources.ts';

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
 * in `status.expirationTimestamp`.
 */
export function accessKeyReconciler(deps: AccessKeyReconcilerDeps) {
  return async function reconcile(name: string): Promise<ReconcileResult | undefined> {
    const key = deps.keys.get(name);
    if (!key || isBeingDeleted(key)) return undefined;
    const now = new Date(deps.clock.now());
    const decision = decideKeyLifecycle(key, deps.config().auth, now);
    if (decision.action === 'delete') {
      try {
        await deps.api.request({
          method: 'DELETE',
          path: objectPath(resources.ownedAccessKeys, undefined, name),
          // The resourceVersion too: a lastActivity written since we looked may have extended the key.
          body: {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            preconditions: { uid: key.metadata.uid, resourceVersion: key.metadata.resourceVersion },
          },
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        return undefined;
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
      return undefined;
    }
    const expirationTimestamp = decision.expiry?.toISOString();
    if (key.status?.expirationTimestamp !== expirationTimestamp) {
      const { expirationTimestamp: _old, ...rest } = key.status ?? {};
      await patchStatus(deps.api, resources.ownedAccessKeys, key, {
        ...rest,
        ...(expirationTimestamp ? { expirationTimestamp } : { expirationTimestamp: null }),
      });
    }
    return decision.recheckInMs !== undefined ? { requeueAfter: decision.recheckInMs } : undefined;
  };
}
