import { type KubernetesObject, PatchStrategy } from '@kubernetes/client-node';
import { patchStatus } from '../../runtime/apply.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, isNotFound } from '../../runtime/errors.ts';
import { deepEqual, mergePatchDiff } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectPath, type ResourceRef } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { isManagedHostObject } from '../metadata.ts';
import { LABEL_MANAGED_BY } from '../names.ts';
import { isJsonObject, type JsonObject } from '../patches/merge-patch.ts';
import type { HostToVirtualLookup } from '../patches/reference-patches.ts';
import type { Sandbox } from '../patches/sandbox.ts';
import { syncToHost } from '../sync.ts';
import { type KubeObject, metadataOf, type ObjectRef, type SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import { desiredPair, type SyncRecord } from './desired.ts';
import { HostObjectConflict, HostObjectIneligible, HostObjectNotManaged } from './errors.ts';
import type { OwnServiceDeletions } from './own-service-deletions.ts';
import {
  hostIneligibility,
  resourceVersionOf,
  type SyncPlan,
  virtualWritableView,
  writableView,
} from './plan.ts';

/**
 * One kind's syncer, its parts: the options it is made with, how it reports outcomes, and the
 * plan of `planSync` carried out on both clusters (create, update, delete); `resource.ts`
 * reconciles with them.
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
   * The host Services this syncer deleted itself: the Service syncer announces each deletion
   * before it is sent; the Endpoints syncer takes the absence of their host Endpoints for its own
   * doing (see OwnServiceDeletions).
   */
  ownServiceDeletions?: OwnServiceDeletions;
  /** Whether the object of this key is synced at all (resource enabled, or referenced). */
  wanted: (key: string) => boolean;
  /** Host name -> virtual name for `reference` patches on the way back. */
  lookupVirtual?: HostToVirtualLookup;
  sandbox: Sandbox;
  reporter: SyncReporter;
}

/** One kind's syncer as its writes see it: its options, and per key the pair it last synced. */
export interface KindSync {
  options: KindSyncerOptions;
  records: Map<string, SyncRecord>;
}

/** A cached object as plain JSON; null when absent. */
export const asKube = (obj: KubernetesObject | undefined | null): KubeObject | null =>
  obj ? (obj as unknown as KubeObject) : null;

function nameOf(obj: KubeObject): { namespace: string; name: string; uid: string } {
  const m = metadataOf(obj);
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

/**
 * Host Endpoints written by the host's endpoints controller for one of our Services while it
 * had a selector: nobody's marker on it, and a Service of the same name that we manage. The
 * reference deletes such Endpoints when the Service loses its selector; we do it only for
 * our own Services, so no other host object is ever touched.
 */
function isOurServicesEndpoints(sync: KindSync, existing: KubeObject): boolean {
  const { kind, ctx, hostServices } = sync.options;
  if (kind !== 'Endpoints' || !hostServices) return false;
  const labels = metadataOf(existing).labels;
  if (isJsonObject(labels) && Object.hasOwn(labels, LABEL_MANAGED_BY)) return false;
  const { namespace, name } = nameOf(existing);
  const service = asKube(hostServices.getByName(namespace, name));
  return service !== null && isManagedHostObject(service, ctx, 'Service');
}

/** The eligibility checks again, on the object as the patches made it, before it is written. */
function assertEligible(kind: SyncedKind, object: KubeObject, ref: ObjectRef): void {
  const reason = hostIneligibility(kind, object);
  if (reason !== null) {
    throw new HostObjectIneligible(`host ${kind} ${ref.namespace}/${ref.name} after the patches: ${reason}`);
  }
}

/** POSTs the host object of a virtual one; an unmanaged host object of its name is a conflict. */
async function createHost(
  sync: KindSync,
  key: string,
  virtual: KubeObject,
  ref: ObjectRef,
): Promise<ReconcileResult | undefined> {
  const { kind, resource, ctx, hostApi, sandbox, reporter } = sync.options;
  const { object } = syncToHost({
    kind,
    source: virtual,
    previousSource: null,
    existingTarget: null,
    ctx,
    sandbox,
  });
  assertEligible(kind, object, ref);
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
    if (!isOurServicesEndpoints(sync, existing)) {
      throw new HostObjectConflict(
        `host ${kind} ${ref.namespace}/${ref.name} exists and is not managed by virtual cluster ${ctx.vclusterName}`,
      );
    }
    await deleteObject(hostApi, resource, existing);
    created = await post();
  }
  sync.records.set(key, { virtual, host: created });
  reporter.synced(kind, 'toHost');
  return undefined;
}

/** Converges an existing pair: the host's changes back to the virtual side, then the virtual side's to the host. */
async function updatePair(
  sync: KindSync,
  key: string,
  virtual: KubeObject,
  host: KubeObject,
  record: SyncRecord | null,
): Promise<void> {
  const { kind, resource, ctx, virtualApi, hostApi, sandbox, reporter, lookupVirtual } = sync.options;
  const desired = desiredPair({
    kind,
    virtual,
    host,
    record,
    ctx,
    sandbox,
    ...(lookupVirtual ? { lookupVirtual } : {}),
  });
  assertEligible(kind, desired.host, nameOf(host));
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
    sync.records.set(key, { virtual: virtualNow, host });
  }
  let hostNow = host;
  const hostPatch = mergePatchDiff(writableView(host), writableView(desired.host));
  if (Object.keys(hostPatch).length > 0) {
    hostNow = await mergePatch(hostApi, resource, host, hostPatch);
    reporter.synced(kind, 'toHost');
  }
  sync.records.set(key, { virtual: virtualNow, host: hostNow });
}

/** Deletes the virtual object whose host copy is gone, after checking the host, not the cache. */
async function deleteVirtual(
  sync: KindSync,
  key: string,
  virtual: KubeObject,
  ref: ObjectRef,
): Promise<void> {
  const { kind, resource, ctx, virtualApi, hostApi, reporter } = sync.options;
  // The cache says the host object is gone; make sure before deleting a user's object.
  const existing = await getObject(hostApi, resource, ref);
  if (existing !== null) {
    if (isManagedHostObject(existing, ctx, kind)) return; // the cache is behind
    sync.records.delete(key);
    throw new HostObjectNotManaged(
      `host ${kind} ${ref.namespace}/${ref.name} is no longer marked as managed by virtual cluster ${ctx.vclusterName}; it is left alone`,
    );
  }
  await deleteObject(virtualApi, resource, virtual);
  sync.records.delete(key);
  reporter.deleted(kind, 'virtual');
}

/** Carries out a plan of `planSync` for the pair of a key. */
export async function executePlan(
  sync: KindSync,
  plan: SyncPlan,
  key: string,
  virtual: KubeObject | null,
  host: KubeObject | null,
  ref: ObjectRef,
): Promise<ReconcileResult | undefined> {
  const { kind, resource, hostApi, reporter, ownServiceDeletions } = sync.options;
  switch (plan.action) {
    case 'skip':
      if (virtual === null && host === null) sync.records.delete(key);
      return undefined;
    case 'deleteHost':
      if (kind === 'Service') ownServiceDeletions?.announce(key);
      try {
        await deleteObject(hostApi, resource, host!);
      } catch (err) {
        if (kind === 'Service') ownServiceDeletions?.withdraw(key);
        throw err;
      }
      // Forget the pair: the host object's absence is now our doing, not the host's.
      sync.records.delete(key);
      reporter.deleted(kind, 'host');
      return undefined;
    case 'deleteVirtual':
      await deleteVirtual(sync, key, virtual!, ref);
      return undefined;
    case 'create':
      return createHost(sync, key, virtual!, ref);
    case 'update':
      await updatePair(sync, key, virtual!, host!, sync.records.get(key) ?? null);
      return undefined;
  }
}
