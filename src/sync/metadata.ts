import {
  ANNOTATION_MANAGED_ANNOTATIONS,
  ANNOTATION_MANAGED_LABELS,
  ANNOTATION_OBJECT_HOST_NAME,
  ANNOTATION_OBJECT_HOST_NAMESPACE,
  ANNOTATION_OBJECT_KIND,
  ANNOTATION_OBJECT_NAME,
  ANNOTATION_OBJECT_NAMESPACE,
  ANNOTATION_OBJECT_UID,
  hostLabels,
  LABEL_CONTROLLED_BY,
  LABEL_MANAGED_BY,
  LABELS_TO_TRANSLATE,
  type Labels,
  PREFIX,
  virtualLabels,
} from './names.ts';
import { hostObjectRef, mapNamespaceToVirtual, NamespaceNotMapped, namespaceRules } from './object-refs.ts';
import { cloneJson, emptyRecord, type JsonObject, ownValue } from './patches/merge-patch.ts';
import { isReservedKey } from './reserved.ts';
import {
  type KubeObject,
  metadataOf,
  type ObjectRef,
  type SyncContext,
  stringMapOf,
  stringOf,
} from './sync-context.ts';

/**
 * Labels and annotations across the clusters, pure: metadata translated each way and which host
 * objects are the syncer's. Which side's change wins (the host's edits flow back, the virtual
 * side's go out) is decided against the last sync in `controllers/desired.ts` (`desiredPair`).
 */

/** Annotations that never cross between the clusters (besides our own bookkeeping). */
export const EXCLUDED_ANNOTATIONS: readonly string[] = ['control-plane.alpha.kubernetes.io/leader'];

/** `GVK.String()` of the reference: `/v1, Kind=Endpoints`, `apps/v1, Kind=Deployment`. */
export function gvkString(apiVersion: string, kind: string): string {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  return `${group}/${version}, Kind=${kind}`;
}

function isBookkeepingAnnotation(key: string): boolean {
  return (
    key === ANNOTATION_OBJECT_NAME ||
    key === ANNOTATION_OBJECT_NAMESPACE ||
    key === ANNOTATION_OBJECT_UID ||
    key === ANNOTATION_OBJECT_KIND ||
    key === ANNOTATION_OBJECT_HOST_NAME ||
    key === ANNOTATION_OBJECT_HOST_NAMESPACE ||
    key === ANNOTATION_MANAGED_ANNOTATIONS ||
    key === ANNOTATION_MANAGED_LABELS
  );
}

/**
 * Whether an annotation is copied between the clusters: not our bookkeeping, not excluded, and
 * not a reserved key (`reserved.ts`: nothing from the virtual side sets those on the host, and
 * the host's do not come back).
 */
export function isSyncedAnnotation(key: string): boolean {
  return !isBookkeepingAnnotation(key) && !EXCLUDED_ANNOTATIONS.includes(key) && !isReservedKey(key);
}

/** Whether a virtual label is copied to the host (translated, for the keys the reference translates). */
function isSyncedVirtualLabel(key: string): boolean {
  return LABELS_TO_TRANSLATE.includes(key) || !isReservedKey(key);
}

/**
 * The reserved keys of a host object's map that belong to the host (set by its components or
 * admins): kept as they are. Ours (`vcluster.platform/*`) are recomputed every time, and keys
 * we copied earlier (listed as managed) are not the host's.
 */
function hostOwnedReserved(existing: Labels, previouslyManaged: ReadonlySet<string>): Labels {
  const owned = emptyRecord<string>();
  for (const [k, v] of Object.entries(existing)) {
    if (isReservedKey(k) && !k.startsWith(`${PREFIX}/`) && !previouslyManaged.has(k)) owned[k] = v;
  }
  return owned;
}

function splitList(v: string | undefined): string[] {
  return v ? v.split('\n').filter((k) => k !== '') : [];
}

const SERVER_FIELDS = [
  'generateName',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'finalizers',
  'managedFields',
  'ownerReferences',
];

/**
 * Host metadata for a virtual object: translated name and namespace, virtual annotations and
 * labels plus the bookkeeping, server-owned fields dropped. Host-only annotations and labels of an
 * existing host object (those not listed in its `managed-*` annotations) are kept, as is its
 * `controlled-by` label.
 */
export function translateMetadataToHost(
  kind: string,
  apiVersion: string,
  virtual: KubeObject,
  existingHost: KubeObject | null,
  ctx: SyncContext,
): JsonObject {
  const vMeta = metadataOf(virtual);
  const name = stringOf(vMeta.name);
  const namespace = stringOf(vMeta.namespace);
  const ref = hostObjectRef(ctx, kind, name, namespace);
  const result: JsonObject = cloneJson(vMeta);
  for (const f of SERVER_FIELDS) delete result[f];
  result.name = ref.name;
  result.namespace = ref.namespace;

  const existingMeta = existingHost ? metadataOf(existingHost) : {};
  const existingAnnotations = stringMapOf(existingMeta.annotations) ?? emptyRecord();
  const previouslyManaged = new Set(splitList(existingAnnotations[ANNOTATION_MANAGED_ANNOTATIONS]));
  const annotations: Labels = hostOwnedReserved(existingAnnotations, previouslyManaged);
  for (const [k, v] of Object.entries(existingAnnotations)) {
    if (!previouslyManaged.has(k) && isSyncedAnnotation(k)) annotations[k] = v;
  }
  const copied = Object.entries(stringMapOf(vMeta.annotations) ?? {}).filter(([k]) => isSyncedAnnotation(k));
  for (const [k, v] of copied) annotations[k] = v;
  const managedKeys = copied.map(([k]) => k).sort();
  if (managedKeys.length > 0) annotations[ANNOTATION_MANAGED_ANNOTATIONS] = managedKeys.join('\n');
  annotations[ANNOTATION_OBJECT_NAME] = name;
  annotations[ANNOTATION_OBJECT_NAMESPACE] = namespace;
  annotations[ANNOTATION_OBJECT_UID] = stringOf(vMeta.uid);
  annotations[ANNOTATION_OBJECT_KIND] = gvkString(apiVersion, kind);
  annotations[ANNOTATION_OBJECT_HOST_NAME] = ref.name;
  annotations[ANNOTATION_OBJECT_HOST_NAMESPACE] = ref.namespace;
  result.annotations = annotations;

  const existingLabels = stringMapOf(existingMeta.labels) ?? emptyRecord();
  const previouslyManagedLabels = new Set(splitList(existingAnnotations[ANNOTATION_MANAGED_LABELS]));
  const labels = emptyRecord<string>();
  for (const [k, v] of Object.entries(existingLabels)) {
    if (!previouslyManagedLabels.has(k) && k !== LABEL_MANAGED_BY && !k.startsWith(`${PREFIX}/`))
      labels[k] = v;
  }
  const virtualLabelsToCopy = Object.fromEntries(
    Object.entries(stringMapOf(vMeta.labels) ?? {}).filter(([k]) => isSyncedVirtualLabel(k)),
  );
  const fromVirtual =
    hostLabels(virtualLabelsToCopy, existingLabels, namespace, true, ctx.vclusterName) ?? {};
  Object.assign(labels, fromVirtual);
  const managedLabelKeys = Object.keys(fromVirtual)
    .filter(
      (k) =>
        !k.startsWith(`${PREFIX}/managed-by`) && k !== `${PREFIX}/namespace` && k !== LABEL_CONTROLLED_BY,
    )
    .sort();
  if (managedLabelKeys.length > 0) annotations[ANNOTATION_MANAGED_LABELS] = managedLabelKeys.join('\n');
  result.labels = labels;
  return result;
}

/**
 * Virtual metadata for a host object: labels translated back, markers and bookkeeping removed.
 * Name, namespace and server fields come from the existing virtual object when there is one.
 */
export function translateMetadataToVirtual(
  host: KubeObject,
  existingVirtual: KubeObject | null,
  ctx: SyncContext,
): JsonObject {
  const hMeta = metadataOf(host);
  const hostAnnotations = stringMapOf(hMeta.annotations) ?? emptyRecord();
  const result: JsonObject = existingVirtual ? cloneJson(metadataOf(existingVirtual)) : {};
  if (!existingVirtual) {
    result.name = hostAnnotations[ANNOTATION_OBJECT_NAME] ?? stringOf(hMeta.name);
    const ns = hostAnnotations[ANNOTATION_OBJECT_NAMESPACE];
    const rules = namespaceRules(ctx);
    result.namespace = ns ?? (rules ? (mapNamespaceToVirtual(rules, stringOf(hMeta.namespace)) ?? '') : '');
  }
  const annotations = emptyRecord<string>();
  for (const [k, v] of Object.entries(hostAnnotations)) if (isSyncedAnnotation(k)) annotations[k] = v;
  if (Object.keys(annotations).length > 0) result.annotations = annotations;
  else delete result.annotations;
  const labels = virtualLabels(stringMapOf(hMeta.labels) ?? {}, ctx.vclusterName) ?? emptyRecord();
  for (const k of Object.keys(labels))
    if (isReservedKey(k) && !LABELS_TO_TRANSLATE.includes(k)) delete labels[k];
  if (Object.keys(labels).length > 0) result.labels = labels;
  else delete result.labels;
  return result;
}

/**
 * Whether a host object is ours: in a namespace we write to, marked managed by this virtual
 * cluster, and its name is the one its bookkeeping annotations translate to. Anything else is
 * never touched.
 */
export function isManagedHostObject(
  obj: KubeObject,
  ctx: SyncContext,
  kind?: string,
  apiVersion = 'v1',
): boolean {
  const m = metadataOf(obj);
  const labels = stringMapOf(m.labels) ?? emptyRecord();
  const annotations = stringMapOf(m.annotations) ?? emptyRecord();
  if (labels[LABEL_MANAGED_BY] !== ctx.vclusterName) return false;
  const virtualName = annotations[ANNOTATION_OBJECT_NAME];
  if (!virtualName) return false;
  const actualKind = kind ?? stringOf(obj.kind);
  const kindAnnotation = annotations[ANNOTATION_OBJECT_KIND];
  if (
    kindAnnotation &&
    actualKind &&
    kindAnnotation !== gvkString(stringOf(obj.apiVersion) || apiVersion, actualKind)
  ) {
    return false;
  }
  let expected: ObjectRef;
  try {
    expected = hostObjectRef(ctx, actualKind, virtualName, annotations[ANNOTATION_OBJECT_NAMESPACE] ?? '');
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return false;
    throw err;
  }
  if (expected.name !== stringOf(m.name) || expected.namespace !== stringOf(m.namespace)) return false;
  const hostName = annotations[ANNOTATION_OBJECT_HOST_NAME];
  const hostNamespace = annotations[ANNOTATION_OBJECT_HOST_NAMESPACE];
  if (hostName && hostName !== stringOf(m.name)) return false;
  if (hostNamespace && hostNamespace !== stringOf(m.namespace)) return false;
  return true;
}

/** Objects marked `controlled-by` (label or annotation) belong to another controller. */
export function isControlledElsewhere(obj: KubeObject): boolean {
  const m = metadataOf(obj);
  return Boolean(
    ownValue(stringMapOf(m.labels) ?? {}, LABEL_CONTROLLED_BY) ||
      ownValue(stringMapOf(m.annotations) ?? {}, LABEL_CONTROLLED_BY),
  );
}
