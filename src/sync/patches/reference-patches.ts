import { isReferenceableKind, REFERENCEABLE_KINDS_TEXT, type ReferencePatchConfig } from '../config.ts';
import {
  ANNOTATION_OBJECT_NAMESPACE,
  hostLabelSelector,
  hostServiceSelector,
  LABEL_MANAGED_BY,
  type Labels,
  virtualLabelSelector,
  virtualServiceSelector,
} from '../names.ts';
import { hostObjectRef, virtualObjectRefOf } from '../object-refs.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { cloneJson, isJsonObject, type Json, ownValue } from './merge-patch.ts';
import { expandPath, getAt, parsePath, setAt } from './path.ts';

/**
 * `reference` patches: a name (or an object naming one) translated to the other cluster's name of
 * the object it refers to, which the caller then syncs; a label selector translated as a
 * Service's selector is.
 */

export type Direction = 'toHost' | 'toVirtual';

/** A host object name -> its virtual name, from the mapping store (the controllers own it). */
export type HostToVirtualLookup = (ref: {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}) => { name: string; namespace: string } | null;

/** An object a `reference` patch pointed at; the caller syncs referenced Secrets/ConfigMaps. */
export interface ObjectReference {
  apiVersion: string;
  kind: string;
  virtual: { name: string; namespace: string };
  host: { name: string; namespace: string };
}

export class ReferencePatchError extends Error {
  override readonly name = 'ReferencePatchError';
  constructor(
    readonly patch: string,
    message: string,
  ) {
    super(`${patch}: ${message}`);
  }
}

/** What reference and selector translation read of a patch run. */
export interface ReferenceRun {
  direction: Direction;
  ctx: SyncContext;
  hostObject: KubeObject | null;
  virtualObject: KubeObject | null;
  lookupVirtual?: HostToVirtualLookup;
}

/** The namespace of the object whose field is patched, as seen from the side the value comes from. */
function sourceNamespace(run: ReferenceRun): string {
  const source = run.direction === 'toHost' ? run.virtualObject : run.hostObject;
  const m = source && isJsonObject(source.metadata) ? source.metadata : {};
  return typeof m.namespace === 'string' ? m.namespace : '';
}

function relative(value: Json, path: string | undefined): Json | undefined {
  if (path === undefined || path.trim() === '') return undefined;
  const matches = expandPath(value, parsePath(path));
  return matches.length > 0 ? (getAt(value, matches[0]!) as Json) : undefined;
}

/**
 * What a reference patch gives on the way back for a host name that names no object of the
 * virtual cluster (none was synced there under that name, nor could be): the field does not come
 * back, so no name of a host object that is not ours reaches the virtual cluster, and the next
 * sync cannot translate a host name a second time.
 */
export const UNRESOLVED = Symbol('unresolved reference');

/** The virtual namespace the patched object is in (the host object's bookkeeping when there is no virtual one). */
function virtualNamespaceOf(run: ReferenceRun): string | null {
  const virtual =
    run.virtualObject && isJsonObject(run.virtualObject.metadata) ? run.virtualObject.metadata : null;
  if (virtual && typeof virtual.namespace === 'string') return virtual.namespace;
  const host = run.hostObject && isJsonObject(run.hostObject.metadata) ? run.hostObject.metadata : null;
  const annotations = host && isJsonObject(host.annotations) ? host.annotations : null;
  const recorded = annotations ? ownValue(annotations, ANNOTATION_OBJECT_NAMESPACE) : undefined;
  return typeof recorded === 'string' ? recorded : null;
}

export function translateReference(
  run: ReferenceRun,
  patchName: string,
  ref: ReferencePatchConfig,
  value: Json,
  references: ObjectReference[],
): Json | typeof UNRESOLVED {
  // A label selector whose selected objects are the references: translated like a Service's
  // selector, so it selects their host copies (the syncer syncs them by its selector index).
  if (ref.labels !== undefined) return translateSelector(run, value);
  const isObject = isJsonObject(value);
  if (!isObject && typeof value !== 'string') return value;
  if (isObject && !ref.namePath) {
    throw new ReferencePatchError(patchName, 'the value is an object but reference.namePath is not set');
  }
  const name = isObject ? relative(value, ref.namePath) : value;
  if (typeof name !== 'string' || name === '') return value;
  const kindValue = isObject ? relative(value, ref.kindPath) : undefined;
  const apiVersionValue = isObject ? relative(value, ref.apiVersionPath) : undefined;
  const kind = typeof kindValue === 'string' && kindValue ? kindValue : ref.kind;
  const apiVersion =
    typeof apiVersionValue === 'string' && apiVersionValue ? apiVersionValue : ref.apiVersion;
  // The configuration's own kind is checked when it is loaded; one read from the value here.
  if (!isReferenceableKind(apiVersion, kind)) {
    throw new ReferencePatchError(
      patchName,
      `names ${apiVersion} ${kind}, which the syncer does not sync (a reference may name ${REFERENCEABLE_KINDS_TEXT})`,
    );
  }
  const namespaceValue = isObject ? relative(value, ref.namespacePath) : undefined;
  const hasNamespace = typeof namespaceValue === 'string' && namespaceValue !== '';
  const namespace = hasNamespace ? namespaceValue : sourceNamespace(run);

  let translated: { name: string; namespace: string };
  if (run.direction === 'toHost') {
    const host = hostObjectRef(run.ctx, kind, name, namespace);
    references.push({ apiVersion, kind, virtual: { name, namespace }, host });
    translated = host;
  } else {
    // The syncer's record of the virtual objects first (it knows hashed and other namespaces'
    // names), then the inverse of the translation in the object's own namespace.
    const own = virtualNamespaceOf(run);
    let found = run.lookupVirtual?.({ apiVersion, kind, name, namespace }) ?? null;
    if (found === null && own !== null) found = virtualObjectRefOf(run.ctx, kind, { name, namespace }, own);
    // A bare name is read in the object's own namespace: another namespace's object has no bare name.
    if (found !== null && !hasNamespace && found.namespace !== own) found = null;
    if (found === null) return UNRESOLVED;
    references.push({ apiVersion, kind, virtual: found, host: { name, namespace } });
    translated = found;
  }
  if (!isObject) return translated.name;
  const result = cloneJson(value);
  const write = (path: string | undefined, v: string) => {
    if (path === undefined || path.trim() === '') return;
    const [match] = expandPath(result, parsePath(path));
    if (match) setAt(result, match, v, false);
  };
  write(ref.namePath, translated.name);
  if (hasNamespace) write(ref.namespacePath, translated.namespace);
  return result;
}

/**
 * A label selector (or a map of labels) translated as a Service's selector is: keys translated,
 * and toward the host the marker labels added so that it selects the synced copies. One that
 * already carries this virtual cluster's marker is in the host's form (the translation of a
 * Service's own selector made it so) and stays as it is.
 */
export function translateSelector(run: ReferenceRun, value: Json): Json {
  if (!isJsonObject(value)) return value;
  const vc = run.ctx.vclusterName;
  const isLabelSelector = 'matchLabels' in value || 'matchExpressions' in value;
  const labels = isLabelSelector ? value.matchLabels : value;
  if (run.direction === 'toHost' && isJsonObject(labels) && labels[LABEL_MANAGED_BY] === vc) return value;
  if (isLabelSelector) {
    const selector = value as Parameters<typeof hostLabelSelector>[0];
    const translated =
      run.direction === 'toHost' ? hostLabelSelector(selector, vc) : virtualLabelSelector(selector, vc);
    if (translated.matchLabels) {
      translated.matchLabels =
        run.direction === 'toHost'
          ? hostServiceSelector(selector.matchLabels ?? {}, sourceNamespace(run), vc)
          : virtualServiceSelector(selector.matchLabels ?? {}, vc);
    }
    return translated as unknown as Json;
  }
  return run.direction === 'toHost'
    ? hostServiceSelector(value as Labels, sourceNamespace(run), vc)
    : virtualServiceSelector(value as Labels, vc);
}
