import type { PatchConfig } from '../config.ts';
import { fieldName, isReservedKey, RESTRICTED_FIELDS } from '../reserved.ts';
import { cloneJson, isJsonObject, type Json, type JsonObject } from './merge-patch.ts';
import {
  type ConcretePath,
  expandPath,
  getAt,
  type PathSegment,
  parsePath,
  pathsIndependent,
  printConcretePath,
  removeAt,
  setAt,
} from './path.ts';
import {
  type ObjectReference,
  type ReferenceRun,
  translateReference,
  translateSelector,
  UNRESOLVED,
} from './reference-patches.ts';
import type { Evaluation, EvaluationObjects, Sandbox } from './sandbox.ts';

/** One list of patches applied to one document. */
export interface PatchRun extends ReferenceRun {
  /** Names the list in errors: `sync.toHost.endpoints.patches`. */
  listName: string;
  patches: readonly PatchConfig[];
  sandbox: Sandbox;
  /** The document the patches rewrite in place: a whole object, or a merge patch. */
  document: JsonObject;
  /**
   * In a merge patch `null` means "delete": such leaves are not patched, and a removed value is
   * written as `null` rather than deleted.
   */
  isMergePatch: boolean;
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
