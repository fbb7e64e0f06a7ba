import { NAME_PLACEHOLDER, type SyncConfig } from './config.ts';
import {
  ANNOTATION_MANAGED_ANNOTATIONS,
  ANNOTATION_MANAGED_LABELS,
  ANNOTATION_OBJECT_HOST_NAME,
  ANNOTATION_OBJECT_HOST_NAMESPACE,
  ANNOTATION_OBJECT_KIND,
  ANNOTATION_OBJECT_NAME,
  ANNOTATION_OBJECT_NAMESPACE,
  ANNOTATION_OBJECT_UID,
  hostLabelKey,
  hostLabels,
  hostNameLong,
  hostNameShort,
  hostServiceSelector,
  LABEL_CONTROLLED_BY,
  LABEL_MANAGED_BY,
  LABELS_TO_TRANSLATE,
  type Labels,
  PREFIX,
  virtualLabelKey,
  virtualLabels,
  virtualServiceSelector,
} from './names.ts';
import {
  cloneJson,
  emptyRecord,
  isJsonObject,
  type Json,
  type JsonObject,
  ownValue,
} from './patches/merge-patch.ts';
import { isReservedKey } from './reserved.ts';

/** What every translation needs to know about the virtual cluster. */
export interface SyncContext {
  vclusterName: string;
  /** The namespace the virtual cluster runs in on the host. */
  hostNamespace: string;
  config: SyncConfig;
}

/** A Kubernetes object as plain JSON. */
export type KubeObject = JsonObject & { metadata?: JsonObject };

export interface ObjectRef {
  name: string;
  namespace: string;
}

export class NamespaceNotMapped extends Error {
  override readonly name = 'NamespaceNotMapped';
  constructor(readonly namespace: string) {
    super(`virtual namespace ${JSON.stringify(namespace)} matches no sync.toHost.namespaces mapping`);
  }
}

/** Annotations that never cross between the clusters (besides our own bookkeeping). */
export const EXCLUDED_ANNOTATIONS: readonly string[] = ['control-plane.alpha.kubernetes.io/leader'];

// ---------------------------------------------------------------------------------------------
// Namespaces and names

export interface NamespaceRule {
  virtual: string;
  host: string;
}

/** Multi-namespace rules (exact rules first, `${name}` substituted), or null in single-namespace mode. */
export function namespaceRules(ctx: SyncContext): NamespaceRule[] | null {
  const namespaces = ctx.config.sync.toHost.namespaces;
  if (!namespaces.enabled) return null;
  const rules = Object.entries(namespaces.mappings.byName).map(([virtual, host]) => ({
    virtual: virtual.replaceAll(NAME_PLACEHOLDER, ctx.vclusterName),
    host: host.replaceAll(NAME_PLACEHOLDER, ctx.vclusterName),
  }));
  const isPattern = (r: NamespaceRule) => r.virtual.endsWith('*');
  return [...rules.filter((r) => !isPattern(r)), ...rules.filter(isPattern)];
}

/** Host namespace of a virtual namespace by the rules, or null when no rule matches. */
export function mapNamespaceToHost(rules: readonly NamespaceRule[], virtualNamespace: string): string | null {
  for (const rule of rules) {
    if (!rule.virtual.endsWith('*') && rule.virtual === virtualNamespace) return rule.host;
  }
  for (const rule of rules) {
    if (!rule.virtual.endsWith('*')) continue;
    const prefix = rule.virtual.slice(0, -1);
    if (virtualNamespace.startsWith(prefix) && virtualNamespace.length > prefix.length) {
      return rule.host.slice(0, -1) + virtualNamespace.slice(prefix.length);
    }
  }
  return null;
}

/** Virtual namespace of a host namespace by the rules, or null when no rule matches. */
export function mapNamespaceToVirtual(rules: readonly NamespaceRule[], hostNamespace: string): string | null {
  return mapNamespaceToHost(
    rules.map((r) => ({ virtual: r.host, host: r.virtual })),
    hostNamespace,
  );
}

/** Kinds whose host name is the readable `name-x-namespace-x-vcluster`; every other kind gets `v…`. */
export const LONG_NAME_KINDS: readonly string[] = ['Secret', 'ConfigMap', 'Service', 'Pod', 'Endpoints'];

/**
 * Where a namespaced virtual object lives on the host. Multi-namespace mode keeps the name and maps
 * the namespace; an unmapped namespace falls back to single-namespace naming unless `mappingsOnly`.
 */
export function hostObjectRef(ctx: SyncContext, kind: string, name: string, namespace: string): ObjectRef {
  const rules = namespaceRules(ctx);
  if (rules !== null) {
    const mapped = mapNamespaceToHost(rules, namespace);
    if (mapped !== null) return { name, namespace: mapped };
    if (ctx.config.sync.toHost.namespaces.mappingsOnly) throw new NamespaceNotMapped(namespace);
  }
  const translated = LONG_NAME_KINDS.includes(kind)
    ? hostNameLong(name, namespace, ctx.vclusterName)
    : hostNameShort(name, namespace, ctx.vclusterName);
  return { name: translated, namespace: ctx.hostNamespace };
}

/**
 * The virtual object a host name stands for, given the virtual namespace it would be in: the
 * inverse of {@link hostObjectRef}, checked by translating the candidate again (so a name that
 * translation cannot give, or that it gives only hashed, finds nothing). In multi-namespace mode
 * the host namespace maps back by the rules and the name is kept. Pure; null when none.
 */
export function virtualObjectRefOf(
  ctx: SyncContext,
  kind: string,
  host: ObjectRef,
  virtualNamespace: string,
): ObjectRef | null {
  const rules = namespaceRules(ctx);
  const mapped = rules === null ? null : mapNamespaceToVirtual(rules, host.namespace);
  const candidate: ObjectRef | null =
    mapped !== null
      ? { name: host.name, namespace: mapped }
      : host.name.endsWith(`-x-${virtualNamespace}-x-${ctx.vclusterName}`)
        ? {
            name: host.name.slice(0, -`-x-${virtualNamespace}-x-${ctx.vclusterName}`.length),
            namespace: virtualNamespace,
          }
        : null;
  if (candidate === null || candidate.name === '') return null;
  let again: ObjectRef;
  try {
    again = hostObjectRef(ctx, kind, candidate.name, candidate.namespace);
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return null;
    throw err;
  }
  return again.name === host.name && again.namespace === host.namespace ? candidate : null;
}

/**
 * `<name>.<namespace>.svc[.<domain>]` -> `<host name>.<host namespace>.svc.<domain>`, the
 * virtual cluster's domain when none is given; any other input unchanged. The sandbox has its own
 * copy of this (it may hold no host function); tests keep them equal.
 */
export function virtualToHostDns(ctx: SyncContext, input: string): string {
  const parts = input.split('.');
  const [name, namespace, svc] = parts;
  if (parts.length < 3 || svc !== 'svc' || !name || !namespace) return input;
  let host: ObjectRef;
  try {
    host = hostObjectRef(ctx, 'Service', name, namespace);
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return input;
    throw err;
  }
  const given = parts.slice(3).join('.');
  const domain = given === '' ? ctx.config.networking.advanced.clusterDomain : given;
  return `${host.name}.${host.namespace}.svc.${domain}`;
}

// ---------------------------------------------------------------------------------------------
// Metadata

function meta(obj: KubeObject): JsonObject {
  return isJsonObject(obj.metadata) ? obj.metadata : {};
}
/**
 * The string values of a label or annotation map, in a map without prototype: a key named like an
 * `Object.prototype` member (`constructor`, `toString`) reads and writes as any other key.
 */
function stringMap(v: Json | undefined): Labels | null {
  if (!isJsonObject(v)) return null;
  const out = emptyRecord<string>();
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}
function str(v: Json | undefined): string {
  return typeof v === 'string' ? v : '';
}

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
  const vMeta = meta(virtual);
  const name = str(vMeta.name);
  const namespace = str(vMeta.namespace);
  const ref = hostObjectRef(ctx, kind, name, namespace);
  const result: JsonObject = cloneJson(vMeta);
  for (const f of SERVER_FIELDS) delete result[f];
  result.name = ref.name;
  result.namespace = ref.namespace;

  const existingMeta = existingHost ? meta(existingHost) : {};
  const existingAnnotations = stringMap(existingMeta.annotations) ?? emptyRecord();
  const previouslyManaged = new Set(splitList(existingAnnotations[ANNOTATION_MANAGED_ANNOTATIONS]));
  const annotations: Labels = hostOwnedReserved(existingAnnotations, previouslyManaged);
  for (const [k, v] of Object.entries(existingAnnotations)) {
    if (!previouslyManaged.has(k) && isSyncedAnnotation(k)) annotations[k] = v;
  }
  const copied = Object.entries(stringMap(vMeta.annotations) ?? {}).filter(([k]) => isSyncedAnnotation(k));
  for (const [k, v] of copied) annotations[k] = v;
  const managedKeys = copied.map(([k]) => k).sort();
  if (managedKeys.length > 0) annotations[ANNOTATION_MANAGED_ANNOTATIONS] = managedKeys.join('\n');
  annotations[ANNOTATION_OBJECT_NAME] = name;
  annotations[ANNOTATION_OBJECT_NAMESPACE] = namespace;
  annotations[ANNOTATION_OBJECT_UID] = str(vMeta.uid);
  annotations[ANNOTATION_OBJECT_KIND] = gvkString(apiVersion, kind);
  annotations[ANNOTATION_OBJECT_HOST_NAME] = ref.name;
  annotations[ANNOTATION_OBJECT_HOST_NAMESPACE] = ref.namespace;
  result.annotations = annotations;

  const existingLabels = stringMap(existingMeta.labels) ?? emptyRecord();
  const previouslyManagedLabels = new Set(splitList(existingAnnotations[ANNOTATION_MANAGED_LABELS]));
  const labels = emptyRecord<string>();
  for (const [k, v] of Object.entries(existingLabels)) {
    if (!previouslyManagedLabels.has(k) && k !== LABEL_MANAGED_BY && !k.startsWith(`${PREFIX}/`))
      labels[k] = v;
  }
  const virtualLabelsToCopy = Object.fromEntries(
    Object.entries(stringMap(vMeta.labels) ?? {}).filter(([k]) => isSyncedVirtualLabel(k)),
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
  const hMeta = meta(host);
  const hostAnnotations = stringMap(hMeta.annotations) ?? emptyRecord();
  const result: JsonObject = existingVirtual ? cloneJson(meta(existingVirtual)) : {};
  if (!existingVirtual) {
    result.name = hostAnnotations[ANNOTATION_OBJECT_NAME] ?? str(hMeta.name);
    const ns = hostAnnotations[ANNOTATION_OBJECT_NAMESPACE];
    const rules = namespaceRules(ctx);
    result.namespace = ns ?? (rules ? (mapNamespaceToVirtual(rules, str(hMeta.namespace)) ?? '') : '');
  }
  const annotations = emptyRecord<string>();
  for (const [k, v] of Object.entries(hostAnnotations)) if (isSyncedAnnotation(k)) annotations[k] = v;
  if (Object.keys(annotations).length > 0) result.annotations = annotations;
  else delete result.annotations;
  const labels = virtualLabels(stringMap(hMeta.labels) ?? {}, ctx.vclusterName) ?? emptyRecord();
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
  const m = meta(obj);
  const labels = stringMap(m.labels) ?? emptyRecord();
  const annotations = stringMap(m.annotations) ?? emptyRecord();
  if (labels[LABEL_MANAGED_BY] !== ctx.vclusterName) return false;
  const virtualName = annotations[ANNOTATION_OBJECT_NAME];
  if (!virtualName) return false;
  const actualKind = kind ?? str(obj.kind);
  const kindAnnotation = annotations[ANNOTATION_OBJECT_KIND];
  if (
    kindAnnotation &&
    actualKind &&
    kindAnnotation !== gvkString(str(obj.apiVersion) || apiVersion, actualKind)
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
  if (expected.name !== str(m.name) || expected.namespace !== str(m.namespace)) return false;
  const hostName = annotations[ANNOTATION_OBJECT_HOST_NAME];
  const hostNamespace = annotations[ANNOTATION_OBJECT_HOST_NAMESPACE];
  if (hostName && hostName !== str(m.name)) return false;
  if (hostNamespace && hostNamespace !== str(m.namespace)) return false;
  return true;
}

/** Objects marked `controlled-by` (label or annotation) belong to another controller. */
export function isControlledElsewhere(obj: KubeObject): boolean {
  const m = meta(obj);
  return Boolean(
    ownValue(stringMap(m.labels) ?? {}, LABEL_CONTROLLED_BY) ||
      ownValue(stringMap(m.annotations) ?? {}, LABEL_CONTROLLED_BY),
  );
}

// ---------------------------------------------------------------------------------------------
// Bidirectional label and annotation sync

export interface BidirectionalMaps {
  previousVirtual: Labels | null;
  virtual: Labels | null;
  previousHost: Labels | null;
  host: Labels | null;
}

export type ChangedSide = 'virtual' | 'host' | 'none';

/** What changed from `before` to `after`; keys are data (own keys only, `constructor` is a key). */
function mapDiff(before: Labels, after: Labels): { set: Labels; removed: string[] } {
  const set = emptyRecord<string>();
  for (const [k, v] of Object.entries(after)) if (ownValue(before, k) !== v) set[k] = v;
  return { set, removed: Object.keys(before).filter((k) => !Object.hasOwn(after, k)) };
}

/**
 * The three-way decision of the reference: if the virtual map changed since the last sync, its
 * changes (additions, changes, deletions) go to the host; otherwise, if the host map changed, its
 * changes go to the virtual object. Keys are translated on the way (`toHostKey`/`toVirtualKey`,
 * null drops a key) and keys for which `isSynced` is false are never copied.
 */
export function syncMapsBidirectionally(
  maps: BidirectionalMaps,
  options: {
    toHostKey?: (key: string) => string | null;
    toVirtualKey?: (key: string) => string | null;
    isSynced?: (key: string) => boolean;
  } = {},
): { virtual: Labels; host: Labels; changed: ChangedSide } {
  const toHost = options.toHostKey ?? ((k) => k);
  const toVirtual = options.toVirtualKey ?? ((k) => k);
  const isSynced = options.isSynced ?? (() => true);
  const virtual = Object.assign(emptyRecord<string>(), maps.virtual);
  const host = Object.assign(emptyRecord<string>(), maps.host);
  const apply = (
    target: Labels,
    diff: ReturnType<typeof mapDiff>,
    translate: (k: string) => string | null,
  ) => {
    for (const [k, v] of Object.entries(diff.set)) {
      const key = isSynced(k) ? translate(k) : null;
      if (key !== null) target[key] = v;
    }
    for (const k of diff.removed) {
      const key = isSynced(k) ? translate(k) : null;
      if (key !== null) delete target[key];
    }
  };
  const virtualDiff = mapDiff(maps.previousVirtual ?? {}, virtual);
  if (Object.keys(virtualDiff.set).length > 0 || virtualDiff.removed.length > 0) {
    apply(host, virtualDiff, toHost);
    return { virtual, host, changed: 'virtual' };
  }
  const hostDiff = mapDiff(maps.previousHost ?? {}, host);
  if (Object.keys(hostDiff.set).length > 0 || hostDiff.removed.length > 0) {
    apply(virtual, hostDiff, toVirtual);
    return { virtual, host, changed: 'host' };
  }
  return { virtual, host, changed: 'none' };
}

/** {@link syncMapsBidirectionally} for labels, with the label key translation. */
export function syncLabelsBidirectionally(maps: BidirectionalMaps, ctx: SyncContext) {
  return syncMapsBidirectionally(maps, {
    toHostKey: (k) => hostLabelKey(k, ctx.vclusterName),
    toVirtualKey: (k) => virtualLabelKey(k, ctx.vclusterName),
    isSynced: (k) => k !== LABEL_MANAGED_BY && k !== `${PREFIX}/namespace` && k !== LABEL_CONTROLLED_BY,
  });
}

/** {@link syncMapsBidirectionally} for annotations; bookkeeping and excluded keys stay put. */
export function syncAnnotationsBidirectionally(maps: BidirectionalMaps) {
  return syncMapsBidirectionally(maps, { isSynced: isSyncedAnnotation });
}

// ---------------------------------------------------------------------------------------------
// Kinds

export type SyncedKind = 'Endpoints' | 'Service' | 'Secret' | 'ConfigMap';
export const SYNCED_KINDS: readonly SyncedKind[] = ['Endpoints', 'Service', 'Secret', 'ConfigMap'];

export class UnsupportedKind extends Error {
  override readonly name = 'UnsupportedKind';
  constructor(readonly kind: string) {
    super(`kind ${JSON.stringify(kind)} is not synced (supported: ${SYNCED_KINDS.join(', ')})`);
  }
}

export function assertSyncedKind(kind: string): asserts kind is SyncedKind {
  if (!(SYNCED_KINDS as readonly string[]).includes(kind)) throw new UnsupportedKind(kind);
}

function translateEndpointsSubsets(subsets: Json | undefined, ctx: SyncContext): Json | undefined {
  if (!Array.isArray(subsets)) return subsets;
  return subsets.map((subset) => {
    if (!isJsonObject(subset)) return subset;
    const out: JsonObject = { ...subset };
    for (const field of ['addresses', 'notReadyAddresses']) {
      const list = subset[field];
      if (!Array.isArray(list)) continue;
      out[field] = list.map((address) => {
        if (!isJsonObject(address) || !isJsonObject(address.targetRef)) return address;
        const targetRef = address.targetRef;
        if (targetRef.kind !== 'Pod') return address;
        const ref = hostObjectRef(ctx, 'Pod', str(targetRef.name), str(targetRef.namespace));
        const translated: JsonObject = { ...targetRef, name: ref.name, namespace: ref.namespace };
        delete translated.uid;
        delete translated.resourceVersion;
        return { ...address, targetRef: translated };
      });
    }
    return out;
  });
}

/**
 * Service spec fields that flow both ways, as the reference syncer copies them: whichever side
 * changed since the last sync wins, the virtual side when both did. Every other field of a
 * Service's spec is the virtual side's (the selector, the cluster IP, ...).
 */
export const SERVICE_BIDIRECTIONAL_FIELDS: readonly string[] = [
  'type',
  'ports',
  'externalIPs',
  'externalName',
  'loadBalancerIP',
  'publishNotReadyAddresses',
  'externalTrafficPolicy',
  'sessionAffinity',
  'sessionAffinityConfig',
  'loadBalancerSourceRanges',
];

/** Fields the host apiserver allocates; an existing host Service keeps them. */
const SERVICE_ALLOCATED = ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy', 'healthCheckNodePort'];

function translateServiceSpec(
  spec: Json | undefined,
  existingSpec: JsonObject | null,
  vNamespace: string,
  ctx: SyncContext,
) {
  if (!isJsonObject(spec)) return spec;
  const out: JsonObject = cloneJson(spec);
  if (out.clusterIP !== 'None') {
    delete out.clusterIP;
    delete out.clusterIPs;
  }
  delete out.ipFamilies;
  delete out.ipFamilyPolicy;
  delete out.healthCheckNodePort;
  if (Array.isArray(out.ports)) {
    out.ports = out.ports.map((p) => {
      if (!isJsonObject(p)) return p;
      const { nodePort: _nodePort, ...rest } = p;
      return rest;
    });
  }
  const selector = stringMap(out.selector);
  if (selector && Object.keys(selector).length > 0) {
    out.selector = hostServiceSelector(selector, vNamespace, ctx.vclusterName);
  } else delete out.selector;
  if (existingSpec) {
    for (const f of SERVICE_ALLOCATED) {
      const allocated = ownValue(existingSpec, f);
      if (allocated !== undefined && ownValue(out, f) === undefined) out[f] = cloneJson(allocated);
    }
    if (Array.isArray(out.ports) && Array.isArray(existingSpec.ports)) {
      const existingPorts = existingSpec.ports.filter(isJsonObject);
      out.ports = out.ports.map((p) => {
        if (!isJsonObject(p)) return p;
        const same = existingPorts.find(
          (e) => e.port === p.port && (e.protocol ?? 'TCP') === (p.protocol ?? 'TCP'),
        );
        return same?.nodePort !== undefined ? { ...p, nodePort: same.nodePort } : p;
      });
    }
  }
  return out;
}

/**
 * The host object for a virtual object, before patches. `existingHost` supplies what the host
 * owns: allocated Service fields, host-only labels and annotations, `controlled-by`.
 */
export function translateToHost(
  kind: string,
  virtual: KubeObject,
  existingHost: KubeObject | null,
  ctx: SyncContext,
): KubeObject {
  assertSyncedKind(kind);
  const apiVersion = 'v1';
  const result: KubeObject = { ...cloneJson(virtual), apiVersion, kind };
  delete result.status;
  result.metadata = translateMetadataToHost(kind, apiVersion, virtual, existingHost, ctx);
  const vNamespace = str(meta(virtual).namespace);
  switch (kind) {
    case 'Endpoints': {
      const subsets = translateEndpointsSubsets(virtual.subsets, ctx);
      if (subsets !== undefined) result.subsets = subsets;
      break;
    }
    case 'Service': {
      const existingSpec = existingHost && isJsonObject(existingHost.spec) ? existingHost.spec : null;
      const spec = translateServiceSpec(virtual.spec, existingSpec, vNamespace, ctx);
      if (spec !== undefined) result.spec = spec;
      break;
    }
    case 'Secret':
    case 'ConfigMap':
      break;
  }
  return result;
}

/**
 * The virtual object for a host object, before reverse patches. With an existing virtual object
 * (the syncer's case) only what flows back changes: labels and annotations, a Service's status
 * and its bidirectional spec fields (`SERVICE_BIDIRECTIONAL_FIELDS`; node ports stay the virtual
 * side's); Endpoints subsets and Secret/ConfigMap contents stay the virtual side's. Without one
 * (an import, as `sync preview --to-virtual` shows it), everything is brought over.
 */
export function translateToVirtual(
  kind: string,
  host: KubeObject,
  existingVirtual: KubeObject | null,
  ctx: SyncContext,
): KubeObject {
  assertSyncedKind(kind);
  const base: KubeObject = existingVirtual ? cloneJson(existingVirtual) : { apiVersion: 'v1', kind };
  base.metadata = translateMetadataToVirtual(host, existingVirtual, ctx);
  switch (kind) {
    case 'Endpoints':
      if (!existingVirtual && host.subsets !== undefined) base.subsets = cloneJson(host.subsets);
      break;
    case 'Service': {
      if (isJsonObject(host.spec)) {
        if (!existingVirtual) {
          const spec = cloneJson(host.spec);
          const selector = stringMap(spec.selector);
          if (selector) spec.selector = virtualServiceSelector(selector, ctx.vclusterName);
          base.spec = spec;
        } else {
          base.spec = withBidirectionalServiceFields(base.spec, host.spec);
        }
      }
      return copyServiceStatusToVirtual(host, base);
    }
    case 'Secret':
    case 'ConfigMap':
      if (existingVirtual) break;
      for (const f of ['data', 'binaryData', 'stringData', 'type', 'immutable']) {
        const value = ownValue(host, f);
        if (value !== undefined) base[f] = cloneJson(value);
      }
      break;
  }
  return base;
}

/** A virtual Service spec with the bidirectional fields of a host spec (node ports excepted). */
function withBidirectionalServiceFields(virtualSpec: Json | undefined, hostSpec: JsonObject): JsonObject {
  const spec: JsonObject = isJsonObject(virtualSpec) ? virtualSpec : {};
  const virtualPorts = Array.isArray(spec.ports) ? spec.ports.filter(isJsonObject) : [];
  for (const field of SERVICE_BIDIRECTIONAL_FIELDS) {
    const value = hostSpec[field];
    if (value === undefined) {
      delete spec[field];
    } else if (field === 'ports' && Array.isArray(value)) {
      spec.ports = value.map((port) => {
        if (!isJsonObject(port)) return cloneJson(port);
        const { nodePort: _hostNodePort, ...rest } = cloneJson(port);
        const same = virtualPorts.find(
          (v) => v.port === port.port && (v.protocol ?? 'TCP') === (port.protocol ?? 'TCP'),
        );
        return same?.nodePort !== undefined ? { ...rest, nodePort: same.nodePort } : rest;
      });
    } else {
      spec[field] = cloneJson(value);
    }
  }
  return spec;
}

/** The virtual Service with the host Service's status (load balancer ingress, conditions). */
export function copyServiceStatusToVirtual(host: KubeObject, virtual: KubeObject): KubeObject {
  const result = cloneJson(virtual);
  if (host.status === undefined) delete result.status;
  else result.status = cloneJson(host.status);
  return result;
}
