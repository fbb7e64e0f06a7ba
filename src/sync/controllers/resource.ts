import type { ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, RuntimeError } from '../../runtime/errors.ts';
import { splitKey } from '../../runtime/kube-client.ts';
import { isManagedHostObject } from '../metadata.ts';
import { hostObjectRef, NamespaceNotMapped } from '../object-refs.ts';
import type { ObjectRef } from '../sync-context.ts';
import { describeSyncError } from './errors.ts';
import { asKube, executePlan, type KindSync, type KindSyncerOptions } from './kind-sync.ts';
import { isLive, isOlder, planSync, resourceVersionOf } from './plan.ts';
/**
 * One kind's syncer: a reconciler keyed by the virtual object's `namespace/name`, reading both
 * clusters from their caches and converging the pair as the reference syncer does.
 *
 * - create: translation plus `expression` patches over the whole object, then POST;
 * - update (both exist): if the host object changed since our last sync, its label, annotation
 *   (and Service status) changes are brought back through `reverseExpression`; then the virtual
 *   object's changes since our last sync go to the host through `expression`. The fields the
 *   virtual side owns (Endpoints subsets, Service spec, Secret/ConfigMap data) always come from
 *   the virtual object: a host edit to them is reverted, never synced back;
 * - deletes follow `planSync`.
 *
 * "Since our last sync" is the pair of objects this syncer last wrote or read (`SyncRecord`), kept
 * in memory. After a restart there is none: the virtual object is then compared with the host
 * object as it is, so drift is reverted and the virtual side wins, once. Every write carries the
 * resourceVersion it was computed from (a conflict retries with fresh caches), and nothing is
 * computed from a cache that is older than what this syncer already saw.
 */

/**
 * Thrown instead of the original error so that whatever logs it (the controller logs failed
 * reconciles) sees only the safe description; `reason` keeps the original class name.
 */
export class ObjectSyncFailed extends RuntimeError {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export function kindSyncer(options: KindSyncerOptions) {
  const { kind, ctx, reporter } = options;
  const sync: KindSync = { options, records: new Map() };

  async function reconcile(key: string): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitKey(key);
    const cachedVirtual = asKube(options.virtual.get(key));
    const virtual = isLive(cachedVirtual) ? cachedVirtual : null;
    let ref: ObjectRef;
    try {
      ref = hostObjectRef(ctx, kind, name, namespace);
    } catch (err) {
      if (!(err instanceof NamespaceNotMapped)) throw err;
      // `mappingsOnly` and no mapping for this namespace: not synced, nothing on the host to find.
      sync.records.delete(key);
      reporter.succeeded(kind, key);
      return undefined;
    }
    const cachedHost = asKube(options.host.getByName(ref.namespace, ref.name));
    const host = cachedHost !== null && isManagedHostObject(cachedHost, ctx, kind) ? cachedHost : null;
    const record = sync.records.get(key) ?? null;
    if (
      record !== null &&
      (isOlder(resourceVersionOf(virtual), resourceVersionOf(record.virtual)) ||
        isOlder(resourceVersionOf(host), resourceVersionOf(record.host)))
    ) {
      return undefined; // the newer version's watch event will enqueue this key again
    }
    // No virtual object, nothing to bring back: the excuse would only outlive it.
    if (virtual === null) options.ownServiceDeletions?.forget(key);
    const plan = planSync({
      kind,
      key,
      virtual,
      host,
      service: kind === 'Endpoints' ? asKube(options.services?.get(key)) : undefined,
      wanted: options.wanted(key),
      hostSyncedBefore:
        record !== null &&
        !(host === null && kind === 'Endpoints' && options.ownServiceDeletions?.excuses(key) === true),
    });
    try {
      const result = await executePlan(sync, plan, key, virtual, host, ref);
      reporter.succeeded(kind, key);
      return result;
    } catch (err) {
      const reason = errorReason(err);
      // Somebody wrote in between (stale resourceVersion): not a failure, retry on fresh caches.
      if (reason === 'Conflict') return { requeueAfter: 1000 };
      const description = describeSyncError(kind, err);
      reporter.failed(kind, key, virtual, reason, description);
      throw new ObjectSyncFailed(reason, `${kind} ${key}: ${description}`);
    }
  }

  return { reconcile };
}
