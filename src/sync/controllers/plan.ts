import { gvkString, isControlledElsewhere } from '../metadata.ts';
import {
  ANNOTATION_OBJECT_KIND,
  ANNOTATION_OBJECT_NAME,
  ANNOTATION_OBJECT_NAMESPACE,
  ANNOTATION_OBJECT_UID,
  ANNOTATION_SKIP_BACKSYNC,
} from '../names.ts';
import { isJsonObject, type JsonObject, ownValue } from '../patches/merge-patch.ts';
import type { KubeObject } from '../sync-context.ts';
import { SERVICE_BIDIRECTIONAL_FIELDS, type SyncedKind } from '../translate.ts';

/**
 * The pure decisions of the syncer controllers: what to do with one virtual key given what the
 * caches hold. No I/O here; `resource.ts` carries the plans out.
 */

/** The virtual Service and Endpoints every cluster has; the apiserver owns them. */
export const KUBERNETES_SERVICE_KEY = 'default/kubernetes';

export type SyncPlan =
  /** Nothing to do (the reason is for logs and tests). */
  | { action: 'skip'; reason: string }
  /** Delete our host object (virtual gone, no longer eligible, or a different virtual uid). */
  | { action: 'deleteHost'; reason: string }
  /** The host object we synced was deleted: delete the virtual object too. */
  | { action: 'deleteVirtual'; reason: string }
  | { action: 'create' }
  | { action: 'update' };

export interface PlanInput {
  kind: SyncedKind;
  /** `namespace/name` of the virtual object. */
  key: string;
  /** The virtual object, or null when absent. */
  virtual: KubeObject | null;
  /** The host object managed by this virtual cluster under the translated name, or null. */
  host: KubeObject | null;
  /** Endpoints only: the virtual Service of the same key, or null. */
  service?: KubeObject | null;
  /**
   * Whether this kind and object are synced at all: the resource is enabled, or (Secrets and
   * ConfigMaps) a synced object references it.
   */
  wanted: boolean;
  /**
   * Whether this syncer saw the host object exist (created or synced it) and did not delete it
   * itself since. Only then does a missing host object mean "deleted on the host".
   */
  hostSyncedBefore: boolean;
}

function meta(obj: KubeObject | null | undefined): JsonObject {
  return obj && isJsonObject(obj.metadata) ? obj.metadata : {};
}

function annotation(obj: KubeObject, key: string): string {
  const annotations = meta(obj).annotations;
  const value = isJsonObject(annotations) ? annotations[key] : undefined;
  return typeof value === 'string' ? value : '';
}

/** An object on its way out (deletionTimestamp set) counts as gone. */
export function isLive(obj: KubeObject | null | undefined): obj is KubeObject {
  return Boolean(obj) && !meta(obj).deletionTimestamp;
}

/** A Service with a non-empty selector; the apiserver drops `selector: {}`, so treat it as none. */
export function hasSelector(service: KubeObject): boolean {
  const spec = service.spec;
  if (!isJsonObject(spec)) return false;
  const selector = spec.selector;
  return isJsonObject(selector) && Object.keys(selector).length > 0;
}

/**
 * Why an object, as it would be written on the host, may not be there (null: it may). Checked on
 * the virtual object before anything is computed, and again on the host object after the patches,
 * right before it is written.
 */
export function hostIneligibility(kind: SyncedKind, obj: KubeObject): string | null {
  if (kind === 'Secret' && obj.type === 'kubernetes.io/service-account-token') {
    return 'service account tokens belong to their cluster';
  }
  return null;
}

/** Whether a virtual object is one the syncer may copy to the host (before `wanted`). */
function eligible(input: PlanInput, virtual: KubeObject): string | null {
  const { kind } = input;
  if (kind === 'Endpoints') {
    if (!isLive(input.service)) return 'the virtual Service does not exist';
    if (hasSelector(input.service)) return 'the virtual Service has a selector';
  }
  return hostIneligibility(kind, virtual);
}

/**
 * The reference syncer's decision table (reconcile start, then dispatch), for one key:
 * - `default/kubernetes` Services and Endpoints are never synced, nor objects marked
 *   `vcluster.platform/controlled-by`;
 * - a virtual object that is absent, not wanted or not eligible (Endpoints whose Service is
 *   missing or has a selector) has its managed host object deleted, unless the host object asks
 *   for `skip-backsync` when only the virtual object is gone;
 * - a host object that carries another virtual uid is deleted (it is recreated next time);
 * - a host object that disappeared after we synced it takes the virtual object with it;
 * - otherwise create or update.
 */
export function planSync(input: PlanInput): SyncPlan {
  const { kind, key, host } = input;
  if ((kind === 'Endpoints' || kind === 'Service') && key === KUBERNETES_SERVICE_KEY) {
    return { action: 'skip', reason: 'default/kubernetes belongs to the virtual apiserver' };
  }
  // Objects marked `controlled-by` (on either side) belong to another controller, as upstream.
  if ((input.virtual && isControlledElsewhere(input.virtual)) || (host && isControlledElsewhere(host))) {
    return { action: 'skip', reason: 'controlled by another controller' };
  }
  const virtual = isLive(input.virtual) ? input.virtual : null;
  if (virtual === null) {
    if (host === null) return { action: 'skip', reason: 'neither object exists' };
    if (annotation(host, ANNOTATION_SKIP_BACKSYNC) === 'true') {
      return { action: 'skip', reason: 'the host object asks for skip-backsync' };
    }
    return { action: 'deleteHost', reason: 'the virtual object was deleted' };
  }
  const notEligible = input.wanted ? eligible(input, virtual) : 'not synced by the configuration';
  if (notEligible !== null) {
    return host === null
      ? { action: 'skip', reason: notEligible }
      : { action: 'deleteHost', reason: notEligible };
  }
  if (host === null) {
    return input.hostSyncedBefore
      ? { action: 'deleteVirtual', reason: 'the host object was deleted' }
      : { action: 'create' };
  }
  const hostUid = annotation(host, ANNOTATION_OBJECT_UID);
  const virtualUid = meta(virtual).uid;
  const kindAnnotation = annotation(host, ANNOTATION_OBJECT_KIND);
  if (
    hostUid !== '' &&
    hostUid !== virtualUid &&
    (kindAnnotation === '' || kindAnnotation === gvkString('v1', kind))
  ) {
    return { action: 'deleteHost', reason: 'the host object belongs to an earlier virtual object' };
  }
  return { action: 'update' };
}

/** `namespace/name` of the virtual object a managed host object stands for. */
export function virtualKeyOfHost(host: KubeObject): string | null {
  const name = annotation(host, ANNOTATION_OBJECT_NAME);
  const namespace = annotation(host, ANNOTATION_OBJECT_NAMESPACE);
  return name && namespace ? `${namespace}/${name}` : null;
}

export function resourceVersionOf(obj: KubeObject | null | undefined): string {
  const rv = meta(obj).resourceVersion;
  return typeof rv === 'string' ? rv : '';
}

/**
 * Whether the cache holds an older version of an object than one this syncer already wrote or
 * read. resourceVersions are opaque in general, but the apiserver's etcd storage issues them as
 * increasing integers; anything else is never "older", so the worst case is one redundant sync.
 * A stale cache must not be acted on: its next watch event will bring the newer object.
 */
export function isOlder(cached: string, known: string): boolean {
  if (!/^\d+$/.test(cached) || !/^\d+$/.test(known)) return false;
  return BigInt(cached) < BigInt(known);
}

/**
 * The fields the syncer writes on the host besides labels and annotations: everything but
 * identity, metadata and status (Endpoints subsets, Service spec, Secret and ConfigMap data).
 */
export function syncedFields(obj: KubeObject | null): JsonObject {
  if (obj === null) return {};
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return rest;
}

/**
 * The synced fields only the virtual side owns: all of them but a Service's bidirectional spec
 * fields. Host edits to them are reverted, never synced back.
 */
export function virtualOwnedFields(kind: SyncedKind, obj: KubeObject | null): JsonObject {
  const fields = syncedFields(obj);
  if (kind !== 'Service' || !isJsonObject(fields.spec)) return fields;
  const spec: JsonObject = { ...fields.spec };
  for (const f of SERVICE_BIDIRECTIONAL_FIELDS) delete spec[f];
  return { ...fields, spec };
}

function labelsAndAnnotations(obj: KubeObject): JsonObject {
  const m = meta(obj);
  const metadata: JsonObject = {};
  if (m.labels !== undefined) metadata.labels = m.labels;
  if (m.annotations !== undefined) metadata.annotations = m.annotations;
  return metadata;
}

/**
 * What a merge patch may change on a host object: its synced fields plus labels and annotations.
 * Identity, server fields and status are left out (status has its own subresource).
 */
export function writableView(obj: KubeObject): JsonObject {
  return { ...syncedFields(obj), metadata: labelsAndAnnotations(obj) };
}

/**
 * What the syncer writes to a virtual object's main resource: labels and annotations, and a
 * Service's bidirectional spec fields (its status has its own subresource).
 */
export function virtualWritableView(kind: SyncedKind, obj: KubeObject): JsonObject {
  const view: JsonObject = { metadata: labelsAndAnnotations(obj) };
  if (kind === 'Service' && isJsonObject(obj.spec)) {
    const spec: JsonObject = {};
    for (const f of SERVICE_BIDIRECTIONAL_FIELDS) {
      const value = ownValue(obj.spec, f);
      if (value !== undefined) spec[f] = value;
    }
    view.spec = spec;
  }
  return view;
}
