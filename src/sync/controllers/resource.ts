import { type KubernetesObject, PatchStrategy } from '@kubernetes/client-node';
import { patchStatus } from '../../runtime/apply.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, isNotFound, RuntimeError } from '../../runtime/errors.ts';
import { deepEqual, mergePatchDiff } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectPath, type ResourceRef, splitKey } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { isManagedHostObject } from '../metadata.ts';
import { LABEL_MANAGED_BY } from '../names.ts';
import { hostObjectRef, NamespaceNotMapped } from '../object-refs.ts';
import type { HostToVirtualLookup } from '../patches/apply.ts';
import { isJsonObject, type JsonObject } from '../patches/merge-patch.ts';
import type { Sandbox } from '../patches/sandbox.ts';
import { syncToHost } from '../sync.ts';
import type { KubeObject, ObjectRef, SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import { desiredPair, type SyncRecord } from './desired.ts';
import {
  describeSyncError,
  HostObjectConflict,
  HostObjectIneligible,
  HostObjectNotManaged,
} from './errors.ts';
import {
  hostIneligibility,
  isLive,
  isOlder,
  planSync,
  resourceVersionOf,
  type SyncPlan,
  virtualWritableView,
  writableView,
} from './plan.ts';

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

/** How the syncer reports outcomes (metrics, the failing-object list, Events). */
export interface SyncReporter {
  synced(kind: SyncedKind, direction: 'toHost' | 'toVirtual'): void;
  deleted(kind: SyncedKind, side: 'host' | 'virtual'): void;
  /** `description` is safe to show (see `describeSyncError`). */
  failed(
    kind: SyncedKind,
    key: string,
    virtual: KubeObject | null,
    reason: string,
    description: string,
  ): void;
  succeeded(kind: SyncedKind, key: string): void;
}

export interface KindSyncerOptions {
  kind: SyncedKind;
  /** The same resource on both sides (core v1). */
  resource: ResourceRef;
  ctx: SyncContext;
  virtualApi: KubeApi;
  hostApi: KubeApi;
  virtual: Store<KubernetesObject>;
  /** Host objects labelled managed-by this virtual cluster. */
  host: Store<KubernetesObject>;
  /** Endpoints: the virtual Services. */
  services?: Store<KubernetesObject>;
  /** Endpoints: the managed host Services (to recognise Endpoints the host wrote for them). */
  hostServices?: Store<KubernetesObject>;
  /**
   * Endpoints: keys whose host Service the Service syncer deleted (to recreate it for a new
   * virtual uid, say). The host's endpoints controller then deletes the host Endpoints of that
   * name on its own, whenever it gets to it, even one written after the deletion: that absence
   * is the syncer's doing, so it brings the host Endpoints back instead of deleting the tenant's
   * virtual Endpoints. Each key excuses one absence (the entry is taken when it does).
   */
  hostServicesDeleted?: Set<string>;
  /** Called with the key of each host object the syncer deletes itself. */
  onHostDeleted?: (key: string) => void;
  /** Whether the object of this key is synced at all (resource enabled, or referenced). */
  wanted: (key: string) => boolean;
  /** Host name -> virtual name for `reference` patches on the way back. */
  lookupVirtual?: HostToVirtualLookup;
  sandbox: Sandbox;
  reporter: SyncReporter;
}

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

const asKube = (obj: KubernetesObject | undefined | null): KubeObject | null =>
  obj ? (obj as unknown as KubeObject) : null;

function metaOf(obj: KubeObject): JsonObject {
  return isJsonObject(obj.metadata) ? obj.metadata : {};
}

function nameOf(obj: KubeObject): { namespace: string; name: string; uid: string } {
  const m = metaOf(obj);
  return {
    namespace: typeof m.namespace === 'string' ? m.namespace : '',
    name: typeof m.name === 'string' ? m.name : '',
    uid: typeof m.uid === 'string' ? m.uid : '',
  };
}

async function getObject(api: KubeApi, resource: ResourceRef, ref: ObjectRef): Promise<KubeObject | null> {
  try {
    return await api.request<KubeObject>({
      method: 'GET',
      path: objectPath(resource, ref.namespace, ref.name),
    });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** Deletes exactly the object seen (uid precondition); already gone or replaced is fine. */
async function deleteObject(api: KubeApi, resource: ResourceRef, obj: KubeObject): Promise<void> {
  const { namespace, name, uid } = nameOf(obj);
  try {
    await api.request({
      method: 'DELETE',
      path: objectPath(resource, namespace, name),
      body: { apiVersion: 'v1', kind: 'DeleteOptions', ...(uid ? { preconditions: { uid } } : {}) },
    });
  } catch (err) {
    // 404: gone already. 409: the uid precondition failed, so the name now holds another
    // object, whose own events will bring it here.
    if (isNotFound(err) || errorReason(err) === 'Conflict') return;
    throw err;
  }
}

/** A JSON merge patch guarded by the resourceVersion it was computed from. */
function mergePatch(api: KubeApi, resource: ResourceRef, current: KubeObject, patch: JsonObject) {
  const { namespace, name } = nameOf(current);
  const metadata = isJsonObject(patch.metadata) ? patch.metadata : {};
  return api.request<KubeObject>({
    method: 'PATCH',
    path: objectPath(resource, namespace, name),
    body: { ...patch, metadata: { ...metadata, resourceVersion: resourceVersionOf(current) } },
    contentType: PatchStrategy.MergePatch,
  });
}

export function kindSyncer(options: KindSyncerOptions) {
  const { kind, resource, ctx, virtualApi, hostApi, sandbox, reporter } = options;
  const records = new Map<string, SyncRecord>();

  /**
   * Host Endpoints written by the host's endpoints controller for one of our Services while it
   * had a selector: nobody's marker on it, and a Service of the same name that we manage. The
   * reference deletes such Endpoints when the Service loses its selector; we do it only for
   * our own Services, so no other host object is ever touched.
   */
  const isOurServicesEndpoints = (existing: KubeObject): boolean => {
    if (kind !== 'Endpoints' || !options.hostServices) return false;
    const labels = metaOf(existing).labels;
    if (isJsonObject(labels) && Object.hasOwn(labels, LABEL_MANAGED_BY)) return false;
    const { namespace, name } = nameOf(existing);
    const service = asKube(options.hostServices.getByName(namespace, name));
    return service !== null && isManagedHostObject(service, ctx, 'Service');
  };

  /** The eligibility checks again, on the object as the patches made it, before it is written. */
  const assertEligible = (object: KubeObject, ref: ObjectRef) => {
    const reason = hostIneligibility(kind, object);
    if (reason !== null) {
      throw new HostObjectIneligible(
        `host ${kind} ${ref.namespace}/${ref.name} after the patches: ${reason}`,
      );
    }
  };

  async function create(
    key: string,
    virtual: KubeObject,
    ref: ObjectRef,
  ): Promise<ReconcileResult | undefined> {
    const { object } = syncToHost({
      kind,
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    assertEligible(object, ref);
    const post = () =>
      hostApi.request<KubeObject>({
        method: 'POST',
        path: collectionPath(resource, ref.namespace),
        body: object,
      });
    let created: KubeObject;
    try {
      created = await post();
    } catch (err) {
      if (errorReason(err) !== 'AlreadyExists') throw err;
      const existing = await getObject(hostApi, resource, ref);
      if (existing === null) return { requeueAfter: 1000 };
      // Ours but not yet in the cache: its watch event is on its way.
      if (isManagedHostObject(existing, ctx, kind)) return undefined;
      if (!isOurServicesEndpoints(existing)) {
        throw new HostObjectConflict(
          `host ${kind} ${ref.namespace}/${ref.name} exists and is not managed by virtual cluster ${ctx.vclusterName}`,
        );
      }
      await deleteObject(hostApi, resource, existing);
      created = await post();
    }
    records.set(key, { virtual, host: created });
    reporter.synced(kind, 'toHost');
    return undefined;
  }

  async function update(key: string, virtual: KubeObject, host: KubeObject, record: SyncRecord | null) {
    const desired = desiredPair({
      kind,
      virtual,
      host,
      record,
      ctx,
      sandbox,
      ...(options.lookupVirtual ? { lookupVirtual: options.lookupVirtual } : {}),
    });
    assertEligible(desired.host, nameOf(host));
    const virtualNext = desired.virtual;

    // Writes, virtual first, and the virtual write recorded at once: if the host write then
    // fails (a host edit in between answers 409), the retry finds the host's change applied to
    // the virtual side and recorded as synced, so it is not brought back twice, nor taken for a
    // change of the tenant's that would undo the host's newer edit.
    let virtualNow: KubeObject = virtual;
    const virtualPatch = mergePatchDiff(
      virtualWritableView(kind, virtual),
      virtualWritableView(kind, virtualNext),
    );
    if (Object.keys(virtualPatch).length > 0) {
      virtualNow = await mergePatch(virtualApi, resource, virtual, virtualPatch);
    }
    if (kind === 'Service' && !deepEqual(virtual.status ?? {}, virtualNext.status ?? {})) {
      const written = await patchStatus(
        virtualApi,
        resource,
        virtualNow as unknown as KubernetesObject & { status?: unknown },
        virtualNext.status ?? {},
      );
      if (written) virtualNow = written as unknown as KubeObject;
    }
    if (virtualNow !== virtual) {
      reporter.synced(kind, 'toVirtual');
      records.set(key, { virtual: virtualNow, host });
    }
    let hostNow = host;
    const hostPatch = mergePatchDiff(writableView(host), writableView(desired.host));
    if (Object.keys(hostPatch).length > 0) {
      hostNow = await mergePatch(hostApi, resource, host, hostPatch);
      reporter.synced(kind, 'toHost');
    }
    records.set(key, { virtual: virtualNow, host: hostNow });
  }

  async function deleteVirtual(key: string, virtual: KubeObject, ref: ObjectRef): Promise<void> {
    // The cache says the host object is gone; make sure before deleting a user's object.
    const existing = await getObject(hostApi, resource, ref);
    if (existing !== null) {
      if (isManagedHostObject(existing, ctx, kind)) return; // the cache is behind
      records.delete(key);
      throw new HostObjectNotManaged(
        `host ${kind} ${ref.namespace}/${ref.name} is no longer marked as managed by virtual cluster ${ctx.vclusterName}; it is left alone`,
      );
    }
    await deleteObject(virtualApi, resource, virtual);
    records.delete(key);
    reporter.deleted(kind, 'virtual');
  }

  async function execute(
    plan: SyncPlan,
    key: string,
    virtual: KubeObject | null,
    host: KubeObject | null,
    ref: ObjectRef,
  ): Promise<ReconcileResult | undefined> {
    switch (plan.action) {
      case 'skip':
        if (virtual === null && host === null) records.delete(key);
        return undefined;
      case 'deleteHost':
        await deleteObject(hostApi, resource, host!);
        options.onHostDeleted?.(key);
        // Forget the pair: the host object's absence is now our doing, not the host's.
        records.delete(key);
        reporter.deleted(kind, 'host');
        return undefined;
      case 'deleteVirtual':
        await deleteVirtual(key, virtual!, ref);
        return undefined;
      case 'create':
        return create(key, virtual!, ref);
      case 'update':
        await update(key, virtual!, host!, records.get(key) ?? null);
        return undefined;
    }
  }

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
      records.delete(key);
      reporter.succeeded(kind, key);
      return undefined;
    }
    const cachedHost = asKube(options.host.getByName(ref.namespace, ref.name));
    const host = cachedHost !== null && isManagedHostObject(cachedHost, ctx, kind) ? cachedHost : null;
    const record = records.get(key) ?? null;
    if (
      record !== null &&
      (isOlder(resourceVersionOf(virtual), resourceVersionOf(record.virtual)) ||
        isOlder(resourceVersionOf(host), resourceVersionOf(record.host)))
    ) {
      return undefined; // the newer version's watch event will enqueue this key again
    }
    // No virtual object, nothing to bring back: the excuse would only outlive it.
    if (virtual === null) options.hostServicesDeleted?.delete(key);
    const plan = planSync({
      kind,
      key,
      virtual,
      host,
      service: kind === 'Endpoints' ? asKube(options.services?.get(key)) : undefined,
      wanted: options.wanted(key),
      hostSyncedBefore:
        record !== null && !(host === null && options.hostServicesDeleted?.delete(key) === true),
    });
    try {
      const result = await execute(plan, key, virtual, host, ref);
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
