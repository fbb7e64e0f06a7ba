import type { PatchConfig, ReferencePatchConfig } from '../config.ts';
import {
  hostLabelSelector,
  hostServiceSelector,
  type Labels,
  virtualLabelSelector,
  virtualServiceSelector,
} from '../names.ts';
import {
  hostObjectRef,
  type KubeObject,
  mapNamespaceToVirtual,
  namespaceRules,
  type SyncContext,
} from '../translate.ts';
import { isJsonObject, type Json, type JsonObject } from './merge-patch.ts';
import { type ConcretePath, expandPath, getAt, parsePath, printConcretePath } from './path.ts';
import type { Sandbox } from './sandbox.ts';

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

function setAt(doc: JsonObject, path: ConcretePath, value: Json): void {
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent[last] = value;
  else if (isJsonObject(parent) && typeof last === 'string') parent[last] = value;
}

function removeAt(doc: JsonObject, path: ConcretePath, isMergePatch: boolean): void {
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
  else if (isJsonObject(parent) && typeof last === 'string') {
    if (isMergePatch) parent[last] = null;
    else delete parent[last];
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

function translateReference(
  run: PatchRun,
  patchName: string,
  ref: ReferencePatchConfig,
  value: Json,
  references: ObjectReference[],
): Json {
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
  const namespaceValue = isObject ? relative(value, ref.namespacePath) : undefined;
  const hasNamespace = typeof namespaceValue === 'string' && namespaceValue !== '';
  const namespace = hasNamespace ? namespaceValue : sourceNamespace(run);

  let translated: { name: string; namespace: string };
  if (run.direction === 'toHost') {
    const host = hostObjectRef(run.ctx, kind, name, namespace);
    references.push({ apiVersion, kind, virtual: { name, namespace }, host });
    translated = host;
  } else {
    const rules = namespaceRules(run.ctx);
    const mappedNamespace = rules ? mapNamespaceToVirtual(rules, namespace) : null;
    const found =
      run.lookupVirtual?.({ apiVersion, kind, name, namespace }) ??
      (mappedNamespace !== null ? { name, namespace: mappedNamespace } : null);
    if (found === null) return value;
    references.push({ apiVersion, kind, virtual: found, host: { name, namespace } });
    translated = found;
  }
  if (!isObject) return translated.name;
  const result = structuredClone(value);
  const write = (path: string | undefined, v: string) => {
    if (path === undefined || path.trim() === '') return;
    const [match] = expandPath(result, parsePath(path));
    if (match) setAt(result, match, v);
  };
  write(ref.namePath, translated.name);
  if (hasNamespace) write(ref.namespacePath, translated.namespace);
  return result;
}

function translateSelector(run: PatchRun, value: Json): Json {
  if (!isJsonObject(value)) return value;
  const vc = run.ctx.vclusterName;
  const isLabelSelector = 'matchLabels' in value || 'matchExpressions' in value;
  if (isLabelSelector) {
    const selector = value as Parameters<typeof hostLabelSelector>[0];
    const translated =
      run.direction === 'toHost' ? hostLabelSelector(selector, vc) : virtualLabelSelector(selector, vc);
    if (translated.matchLabels) {
      translated.matchLabels =
        run.direction === 'toHost'
          ? hostServiceSelector(selector.matchLabels ?? {}, sourceNamespace(run), vc)
          : virtualServiceSelector(translated.matchLabels, vc);
    }
    return translated as unknown as Json;
  }
  const labels = value as Labels;
  return run.direction === 'toHost'
    ? hostServiceSelector(labels, sourceNamespace(run), vc)
    : virtualServiceSelector(labels, vc);
}

/**
 * Runs the patches, in order, over `run.document` (mutated). Each patch's path is expanded against
 * the document as the previous patches left it; a path that matches nothing is skipped. Returns the
 * objects that `reference` patches pointed at. Throws the sandbox's typed errors, or
 * {@link ReferencePatchError}; the document is then half-patched and must be dropped.
 */
export async function applyPatches(run: PatchRun): Promise<ObjectReference[]> {
  const references: ObjectReference[] = [];
  for (const [index, patch] of run.patches.entries()) {
    const patchName = `${run.listName}[${index}]`;
    const expression = run.direction === 'toHost' ? patch.expression : patch.reverseExpression;
    const isExpression = patch.expression !== undefined || patch.reverseExpression !== undefined;
    if (isExpression && expression === undefined) continue;
    const field = run.direction === 'toHost' ? 'expression' : 'reverseExpression';
    const matches = expandPath(run.document, parsePath(patch.path)).filter(
      (p) => !(run.isMergePatch && getAt(run.document, p) === null),
    );
    const results: { path: ConcretePath; value: Json | undefined }[] = [];
    for (const path of matches) {
      const current = getAt(run.document, path) as Json;
      if (expression !== undefined) {
        const outcome = await run.sandbox.evaluate(`${patchName}.${field}`, expression, {
          value: current,
          path: printConcretePath(path),
          hostObject: run.hostObject,
          virtualObject: run.virtualObject,
        });
        results.push({ path, value: outcome.removed ? undefined : outcome.value });
      } else if (patch.reference) {
        results.push({
          path,
          value: translateReference(run, patchName, patch.reference, current, references),
        });
      } else if (patch.labels) {
        results.push({ path, value: translateSelector(run, current) });
      }
    }
    for (const r of results) if (r.value !== undefined) setAt(run.document, r.path, r.value);
    // Removals last and from the back, so array indexes of the other matches stay valid.
    const removals = results.filter((r) => r.value === undefined).reverse();
    for (const r of removals) removeAt(run.document, r.path, run.isMergePatch);
  }
  return references;
}
