import { isReferenceableKind, type PatchConfig, RESOURCE_BY_KIND, type SyncConfig } from '../config.ts';
import type { LabelSelector } from '../names.ts';
import { hostObjectRef, NamespaceNotMapped } from '../object-refs.ts';
import { isReservedMetadataPath } from '../patches/apply.ts';
import { emptyRecord, isJsonObject, type Json, ownValue } from '../patches/merge-patch.ts';
import { expandPath, getAt, parsePath } from '../patches/path.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { SYNCED_KINDS, type SyncedKind, translateToHost } from '../translate.ts';

/**
 * Which objects of the synced kinds (Services, Endpoints, Secrets, ConfigMaps) a virtual object
 * points at through its `reference` patches: by name, or (`reference.labels`) by a label
 * selector. The syncer copies such objects to the host even when their own resource is disabled
 * ("used" objects, as the reference syncer does), and removes the copies once nothing points at
 * them.
 *
 * This is computed from the whole object, synchronously, so that it can be a cache index: the
 * index is complete as soon as the caches are, which makes "is this Secret used?" answerable
 * right after a restart (`syncToHost` reports references too, but on an update only for the
 * fields that changed). It reads the value the same way `translateReference` does: a plain
 * name, or an object with `namePath`/`namespacePath`/`kindPath`/`apiVersionPath`.
 */

/** The kinds a reference can make the syncer copy: every kind it syncs (`isReferenceableKind`). */
export const REFERENCEABLE_KINDS: readonly SyncedKind[] = SYNCED_KINDS;
export type ReferenceableKind = SyncedKind;

/** Index name on virtual informers: values are `<Kind>/<namespace>/<name>`. */
export const REFERENCES_INDEX = 'vcluster-references';

/**
 * Index name on virtual informers for `reference.labels` patches: values are `<Kind>/<namespace>`,
 * the kind and namespace whose objects the object's selectors pick.
 */
export const SELECTOR_REFERENCES_INDEX = 'vcluster-selector-references';

/**
 * Index name on the virtual informers of the kinds references can name: values are
 * `<host namespace>/<host name>` of the object's host copy (whether or not it exists yet), so a
 * host name on the way back finds its virtual object, hashed or in another namespace.
 */
export const HOST_NAME_INDEX = 'vcluster-host-name';

export function hostNameIndexValue(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The host name index's values of a virtual object: none when its namespace is not mapped. */
export function hostNameIndexValues(kind: string, virtual: KubeObject, ctx: SyncContext): string[] {
  const m = isJsonObject(virtual.metadata) ? virtual.metadata : {};
  const name = typeof m.name === 'string' ? m.name : '';
  const namespace = typeof m.namespace === 'string' ? m.namespace : '';
  if (name === '') return [];
  try {
    const host = hostObjectRef(ctx, kind, name, namespace);
    return [hostNameIndexValue(host.namespace, host.name)];
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return [];
    throw err;
  }
}

export function selectorIndexValue(kind: string, namespace: string): string {
  return `${kind}/${namespace}`;
}

export function referenceIndexValue(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

function referencePatches(kind: string, config: SyncConfig): PatchConfig[] {
  const resource = ownValue(RESOURCE_BY_KIND, kind);
  if (resource === undefined) return [];
  return config.sync.toHost[resource].patches.filter((p) => p.reference !== undefined);
}

/** Whether any patch of `kind` can point at another object (so its cache needs the index). */
export function hasReferencePatches(kind: string, config: SyncConfig): boolean {
  return referencePatches(kind, config).length > 0;
}

/** The referenceable kinds any reference patch of the configuration can name. */
export function referencedKinds(config: SyncConfig): Set<ReferenceableKind> {
  const kinds = new Set<ReferenceableKind>();
  for (const kind of Object.keys(RESOURCE_BY_KIND)) {
    for (const patch of referencePatches(kind, config)) {
      const ref = patch.reference!;
      const dynamic = ref.kindPath !== undefined && ref.kindPath.trim() !== '';
      for (const candidate of REFERENCEABLE_KINDS) {
        if (dynamic || ref.kind === candidate) kinds.add(candidate);
      }
    }
  }
  return kinds;
}

function relative(value: Json, path: string | undefined): Json | undefined {
  if (path === undefined || path.trim() === '') return undefined;
  const [match] = expandPath(value, parsePath(path));
  return match ? (getAt(value, match) as Json) : undefined;
}

export interface Reference {
  kind: ReferenceableKind;
  namespace: string;
  name: string;
}

/** A `reference.labels` patch's value: the objects of `kind` in `namespace` that it selects. */
export interface SelectorReference {
  kind: ReferenceableKind;
  namespace: string;
  selector: LabelSelector;
}

/** A label selector (`matchLabels`/`matchExpressions`), or a map of labels read as `matchLabels`. */
function asSelector(value: Json): LabelSelector | null {
  if (!isJsonObject(value)) return null;
  if (Object.hasOwn(value, 'matchLabels') || Object.hasOwn(value, 'matchExpressions'))
    return value as unknown as LabelSelector;
  const labels = emptyRecord<string>();
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') labels[k] = v;
  return { matchLabels: labels };
}

/** Whether labels match a selector, as the apiserver matches them; an empty selector matches all. */
export function selectorMatches(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {}))
    if (ownValue(labels, k) !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(labels[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(labels[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/**
 * The selectors that `virtual`'s `reference.labels` patches hold, each for the objects of its
 * kind in the object's namespace (the way the reference product's docs and SPEC.md read a label
 * selector in a reference: the objects it selects are the references).
 */
export function selectorReferencesOf(
  kind: string,
  virtual: KubeObject,
  ctx: SyncContext,
): SelectorReference[] {
  const patches = referencePatches(kind, ctx.config).filter((p) => p.reference?.labels !== undefined);
  if (patches.length === 0) return [];
  // Read from the virtual object: the selector picks virtual objects (translation may already
  // have put a Service's own selector into the host's form).
  const document = virtual;
  const m = isJsonObject(virtual.metadata) ? virtual.metadata : {};
  const namespace = typeof m.namespace === 'string' ? m.namespace : '';
  const found: SelectorReference[] = [];
  for (const patch of patches) {
    const ref = patch.reference!;
    if (!isReferenceableKind(ref.apiVersion, ref.kind)) continue;
    for (const path of expandPath(document, parsePath(patch.path))) {
      if (isReservedMetadataPath(path)) continue;
      const selector = asSelector(getAt(document, path) as Json);
      if (selector !== null) found.push({ kind: ref.kind as ReferenceableKind, namespace, selector });
    }
  }
  return found;
}

/**
 * The objects of the synced kinds that `virtual`'s reference patches name, deduplicated.
 * Anything that cannot be read (an unmapped namespace, a malformed value, a kind the syncer does
 * not sync, which fails the object's own sync) names nothing.
 */
export function referencesOf(kind: string, virtual: KubeObject, ctx: SyncContext): Reference[] {
  const patches = referencePatches(kind, ctx.config).filter((p) => p.reference?.labels === undefined);
  if (patches.length === 0) return [];
  let document: KubeObject;
  try {
    document = translateToHost(kind, virtual, null, ctx);
  } catch {
    return [];
  }
  const m = isJsonObject(virtual.metadata) ? virtual.metadata : {};
  const ownNamespace = typeof m.namespace === 'string' ? m.namespace : '';
  const found = new Map<string, Reference>();
  for (const patch of patches) {
    const ref = patch.reference!;
    for (const path of expandPath(document, parsePath(patch.path))) {
      if (isReservedMetadataPath(path)) continue; // as translateReference skips them
      const value = getAt(document, path) as Json;
      const isObject = isJsonObject(value);
      const name = isObject ? relative(value, ref.namePath) : value;
      if (typeof name !== 'string' || name === '') continue;
      const kindValue = isObject ? relative(value, ref.kindPath) : undefined;
      const apiVersionValue = isObject ? relative(value, ref.apiVersionPath) : undefined;
      const namespaceValue = isObject ? relative(value, ref.namespacePath) : undefined;
      const refKind = typeof kindValue === 'string' && kindValue ? kindValue : ref.kind;
      const apiVersion =
        typeof apiVersionValue === 'string' && apiVersionValue ? apiVersionValue : ref.apiVersion;
      const namespace =
        typeof namespaceValue === 'string' && namespaceValue !== '' ? namespaceValue : ownNamespace;
      if (!isReferenceableKind(apiVersion, refKind)) continue;
      const reference = { kind: refKind as ReferenceableKind, namespace, name };
      found.set(referenceIndexValue(refKind, namespace, name), reference);
    }
  }
  return [...found.values()];
}
