import {
  isReferenceableKind,
  type PatchConfig,
  REFERENCEABLE_KINDS_TEXT,
  type ReferencePatchConfig,
} from '../config.ts';
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
import { fieldName, isReservedKey, RESTRICTED_FIELDS } from '../reserved.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { cloneJson, isJsonObject, type Json, type JsonObject, ownValue, setOwnValue } from './merge-patch.ts';
import {
  type ConcretePath,
  expandPath,
  getAt,
  type PathSegment,
  parsePath,
  pathsIndependent,
  printConcretePath,
} from './path.ts';
import type { Evaluation, EvaluationObjects, Sandbox } from './sandbox.ts';

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

export interface PatchRun {
  direction: Direction;
  /** Names the list in errors: `sync.toHost.endpoints.patches`. */
  listName: string;
  patches: readonly PatchConfig[];
  ctx: SyncContext;
  sandbox: Sandbox;
  /** The document the patches rewrite in place: a whole object, or a merge patch. */
  document: JsonObject;
  /**
   * In a merge patch `null` means "delete": such leaves are not patched, and a removed value is
   * written as `null` rather than deleted.
   */
  isMergePatch: boolean;
  hostObject: KubeObject | null;
  virtualObject: KubeObject | null;
  lookupVirtual?: HostToVirtualLookup;
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

/** A patch changed a field no patch may change (see `RESTRICTED_FIELDS`); nothing is written. */
export class RestrictedFieldPatched extends Error {
  override readonly name = 'RestrictedFieldPatched';
  constructor(
    readonly patch: string,
    readonly field: string,
  ) {
    super(`${patch}: may not change ${field}`);
  }
}

/**
 * Whether a concrete path is a reserved label or annotation (`reserved.ts`: the syncer's
 * bookkeeping and the keys host components act on). `reference` and `labels` patches reaching one
 * through `*` skip it: its value is no name or selector of the tenant's (`object-name` would name
 * the object itself), and on the host the translation's value replaces whatever a patch sets.
 */
export function isReservedMetadataPath(path: ConcretePath): boolean {
  const [metadata, map, key] = path;
  return (
    path.length === 3 &&
    metadata === 'metadata' &&
    (map === 'labels' || map === 'annotations') &&
    typeof key === 'string' &&
    isReservedKey(key)
  );
}

/** A patch of the whole object (path `''`) gave something other than an object. */
export class WholeObjectPatchInvalid extends Error {
  override readonly name = 'WholeObjectPatchInvalid';
  constructor(readonly patch: string) {
    super(`${patch}: a patch of the whole object must give an object (the fields to change)`);
  }
}

/**
 * Writes one result. The whole object (the empty path) takes the result's top-level fields, as
 * the reference does (a field the result leaves out stays; `null` removes it).
 */
function setAt(doc: JsonObject, path: ConcretePath, value: Json, isMergePatch: boolean): void {
  if (path.length === 0) {
    for (const [key, field] of Object.entries(value as JsonObject)) {
      if (field === null && !isMergePatch) delete doc[key];
      else setOwnValue(doc, key, field);
    }
    return;
  }
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent[last] = value;
  else if (isJsonObject(parent) && typeof last === 'string') setOwnValue(parent, last, value);
}

function removeAt(doc: JsonObject, path: ConcretePath, isMergePatch: boolean): void {
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
  else if (isJsonObject(parent) && typeof last === 'string') {
    if (isMergePatch) setOwnValue(parent, last, null);
    else delete parent[last];
  }
}

function isPrefix(a: ConcretePath, b: readonly (string | number)[]): boolean {
  return a.length <= b.length && a.every((s, i) => String(s) === String(b[i]));
}

const RESTRICTED_ROOTS = new Set(RESTRICTED_FIELDS.map((f) => f[0]!));
const RESTRICTED_IN_METADATA = new Set(
  RESTRICTED_FIELDS.filter((f) => f[0] === 'metadata').map((f) => f[1]!),
);

/** Whether writing at the path can change a restricted field (it is one, inside one, or holds one). */
function mayTouchRestricted(path: ConcretePath): boolean {
  if (path.length === 0) return true;
  if (!RESTRICTED_ROOTS.has(String(path[0]))) return false;
  return path[0] !== 'metadata' || path.length === 1 || RESTRICTED_IN_METADATA.has(String(path[1]));
}

/** The restricted fields a set of results may touch, with their current text. */
function restrictedBefore(doc: JsonObject, paths: readonly ConcretePath[]) {
  const touching = paths.filter(mayTouchRestricted);
  if (touching.length === 0) return [];
  return RESTRICTED_FIELDS.filter((field) =>
    touching.some((p) => isPrefix(p, field) || isPrefix(field, p)),
  ).map((field) => ({ field, text: JSON.stringify(getAt(doc, field) ?? null) }));
}

interface PatchResult {
  path: ConcretePath;
  /** undefined: remove the value. */
  value: Json | undefined;
}

/**
 * Writes one patch's results: sets first, then removals from the back, so array indexes of the
 * other matches stay valid. Fails, before anything is kept, if a restricted field changed.
 */
function writeResults(run: PatchRun, patchName: string, results: readonly PatchResult[]): void {
  const watched = restrictedBefore(
    run.document,
    results.map((r) => r.path),
  );
  for (const r of results) {
    if (r.path.length === 0 && (r.value === undefined || !isJsonObject(r.value))) {
      throw new WholeObjectPatchInvalid(patchName);
    }
    if (r.value !== undefined) setAt(run.document, r.path, r.value, run.isMergePatch);
  }
  const removals = results.filter((r) => r.value === undefined).reverse();
  for (const r of removals) removeAt(run.document, r.path, run.isMergePatch);
  for (const { field, text } of watched) {
    if (JSON.stringify(getAt(run.document, field) ?? null) !== text) {
      throw new RestrictedFieldPatched(patchName, fieldName(field));
    }
  }
}

/** The namespace of the object whose field is patched, as seen from the side the value comes from. */
function sourceNamespace(run: PatchRun): string {
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
const UNRESOLVED = Symbol('unresolved reference');

/** The virtual namespace the patched object is in (the host object's bookkeeping when there is no virtual one). */
function virtualNamespaceOf(run: PatchRun): string | null {
  const virtual =
    run.virtualObject && isJsonObject(run.virtualObject.metadata) ? run.virtualObject.metadata : null;
  if (virtual && typeof virtual.namespace === 'string') return virtual.namespace;
  const host = run.hostObject && isJsonObject(run.hostObject.metadata) ? run.hostObject.metadata : null;
  const annotations = host && isJsonObject(host.annotations) ? host.annotations : null;
  const recorded = annotations ? ownValue(annotations, ANNOTATION_OBJECT_NAMESPACE) : undefined;
  return typeof recorded === 'string' ? recorded : null;
}

function translateReference(
  run: PatchRun,
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
function translateSelector(run: PatchRun, value: Json): Json {
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

const NO_OBJECTS: EvaluationObjects = { hostJson: null, virtualJson: null };

/**
 * Whether an expression may read `context.hostObject` or `context.virtualObject`. Its function
 * reaches `context` only through that name, `arguments`, a direct `eval` or an escaped identifier;
 * with none of those beyond `context.vcluster` and `context.path`, the objects need not be sent
 * (serializing them is most of the cost of a small object's call).
 */
export function mayReadObjects(expression: string): boolean {
  const rest = expression.replace(/\bcontext\s*\.\s*(vcluster|path)\b/g, '');
  return /context|arguments|eval|\\/.test(rest);
}

/** Whether an expression may read its `context` at all (else `context.path` need not be printed). */
export function mayReadContext(expression: string): boolean {
  return /context|arguments|eval|\\/.test(expression);
}

/** What an expression may read, decided once per expression text. */
const readsByExpression = new Map<string, { objects: boolean; context: boolean }>();
function readsOf(expression: string): { objects: boolean; context: boolean } {
  let reads = readsByExpression.get(expression);
  if (reads === undefined) {
    reads = { objects: mayReadObjects(expression), context: mayReadContext(expression) };
    if (readsByExpression.size > 10_000) readsByExpression.clear();
    readsByExpression.set(expression, reads);
  }
  return reads;
}

const parsedPaths = new Map<string, PathSegment[]>();
/** Paths come from configurations, a few per virtual cluster: parsed once. */
function parsedPath(path: string): PathSegment[] {
  let segments = parsedPaths.get(path);
  if (segments === undefined) {
    segments = parsePath(path);
    if (parsedPaths.size > 10_000) parsedPaths.clear();
    parsedPaths.set(path, segments);
  }
  return segments;
}

/** An expression patch whose matches wait for the object's next call into the sandbox. */
interface PendingPatch {
  name: string;
  field: string;
  expression: string;
  segments: PathSegment[];
  matches: ConcretePath[];
}

/**
 * Runs the patches, in order, over `run.document` (mutated): each patch sees the document as the
 * patches before it left it, and a path that matches nothing is skipped. Returns the objects that
 * `reference` patches pointed at. Throws the sandbox's typed errors, {@link ReferencePatchError},
 * {@link RestrictedFieldPatched} or {@link WholeObjectPatchInvalid}; the document is then
 * half-patched and must be dropped.
 *
 * Expressions of consecutive patches are evaluated together, in one call into the sandbox for
 * the object, as long as their paths are independent (`pathsIndependent`): then evaluating them
 * together gives what evaluating them one after the other would. A patch whose path depends on
 * a pending one (the same field, one inside the other, `''`) first sends the pending ones. A
 * `reference` or `labels` patch independent of the pending ones is applied at once; one that is
 * not sends them first. Expressions see `context.hostObject` and `context.virtualObject` as they
 * were before the first patch.
 */
export function applyPatches(run: PatchRun): ObjectReference[] {
  const references: ObjectReference[] = [];
  // Serialized before any patch runs (the objects as they were), only if an expression may read them.
  const mayRead = run.patches.some((p) => {
    const expression = run.direction === 'toHost' ? p.expression : p.reverseExpression;
    return expression !== undefined && readsOf(expression).objects;
  });
  const objects: EvaluationObjects = mayRead
    ? {
        hostJson: run.hostObject === null ? null : JSON.stringify(run.hostObject),
        virtualJson: run.virtualObject === null ? null : JSON.stringify(run.virtualObject),
      }
    : NO_OBJECTS;
  const objectsFor = (batch: readonly PendingPatch[]): EvaluationObjects =>
    batch.some((p) => readsOf(p.expression).objects) ? objects : NO_OBJECTS;
  let pending: PendingPatch[] = [];
  const flush = () => {
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    const evaluations: Evaluation[] = [];
    for (const p of batch) {
      const patch = `${p.name}.${p.field}`;
      const readsContext = readsOf(p.expression).context;
      for (const path of p.matches) {
        evaluations.push({
          patch,
          expression: p.expression,
          value: getAt(run.document, path) as Json,
          // Unread, so not printed (the expression never names its context).
          path: readsContext ? printConcretePath(path) : '',
        });
      }
    }
    const outcomes = run.sandbox.evaluateAll(evaluations, objectsFor(batch));
    let next = 0;
    for (const p of batch) {
      const results = p.matches.map((path) => {
        const outcome = outcomes[next++]!;
        return { path, value: outcome.removed ? undefined : outcome.value };
      });
      writeResults(run, `${p.name}.${p.field}`, results);
    }
  };

  for (const [index, patch] of run.patches.entries()) {
    const name = `${run.listName}[${index}]`;
    const expression = run.direction === 'toHost' ? patch.expression : patch.reverseExpression;
    const isExpression = patch.expression !== undefined || patch.reverseExpression !== undefined;
    if (isExpression && expression === undefined) continue;
    const segments = parsedPath(patch.path);
    if (pending.some((p) => !pathsIndependent(p.segments, segments))) flush();
    const matches = expandPath(run.document, segments).filter(
      (p) => !(run.isMergePatch && getAt(run.document, p) === null),
    );
    if (matches.length === 0) continue;
    if (expression !== undefined) {
      const field = run.direction === 'toHost' ? 'expression' : 'reverseExpression';
      pending.push({ name, field, expression, segments, matches });
      continue;
    }
    const results = matches
      .filter((path) => !isReservedMetadataPath(path))
      .map((path): PatchResult => {
        const current = getAt(run.document, path) as Json;
        const value = patch.reference
          ? translateReference(run, name, patch.reference, current, references)
          : translateSelector(run, current);
        if (value !== UNRESOLVED) return { path, value };
        // The virtual object keeps its value (one without the field stays without it).
        const kept =
          run.virtualObject === null ? undefined : (getAt(run.virtualObject, path) as Json | undefined);
        return { path, value: kept === undefined ? undefined : cloneJson(kept) };
      });
    writeResults(run, name, results);
  }
  flush();
  return references;
}
