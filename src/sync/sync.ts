import { RESOURCE_BY_KIND } from './config.ts';
import { namespaceRules } from './object-refs.ts';
import { applyPatches } from './patches/apply.ts';
import {
  applyMergePatch,
  cloneJson,
  emptyRecord,
  isJsonObject,
  type Json,
  type JsonObject,
  mergePatchDiff,
  ownValue,
} from './patches/merge-patch.ts';
import type { Direction, HostToVirtualLookup, ObjectReference } from './patches/reference-patches.ts';
import { Sandbox, type SandboxOptions } from './patches/sandbox.ts';
import { isReservedKey } from './reserved.ts';
import type { KubeObject, SyncContext } from './sync-context.ts';
import { assertSyncedKind, translateToHost, translateToVirtual } from './translate.ts';

/**
 * The syncer's entry points: translation plus patches, for create (no target yet: the patches see
 * the whole translated object) and update (the patches see only what changed in the source since
 * the last sync, as an RFC 7386 merge patch, which is then applied to the existing target).
 * A field nobody changed keeps its patched value on the target, and a pair of patches that cancel
 * each other cannot make the sync flap. Without a previous source (first sync after a restart) the
 * change is measured against the existing target instead, which also reverts drift.
 */

export interface SyncInput {
  kind: string;
  /** The current source object (virtual for syncToHost, host for syncToVirtual). */
  source: KubeObject;
  /** The source as of the last successful sync (from the controller's cache), or null. */
  previousSource: KubeObject | null;
  /** The object on the target side, or null when it does not exist yet. */
  existingTarget: KubeObject | null;
  /**
   * The target as of the last sync, when its own changes since then must win over the source's
   * (the virtual side's, when a host change flows back): fields changed on both sides keep the
   * target's value.
   */
  previousTarget?: KubeObject | null;
  ctx: SyncContext;
  sandbox: Sandbox;
  /** Host name -> virtual name for `reference` patches on the way back. */
  lookupVirtual?: HostToVirtualLookup;
}

export interface SyncResult {
  /** The object to write on the target side. */
  object: KubeObject;
  /** Objects `reference` patches pointed at (the caller syncs referenced Secrets/ConfigMaps). */
  references: ObjectReference[];
  /** Whether `object` differs from `existingTarget`. */
  changed: boolean;
}

/** A sandbox configured for this virtual cluster (one per virtual cluster, dispose it with it). */
export function createSandbox(ctx: SyncContext, limits: Omit<SandboxOptions, 'settings'> = {}): Sandbox {
  return new Sandbox({
    ...limits,
    settings: {
      vclusterName: ctx.vclusterName,
      hostNamespace: ctx.hostNamespace,
      clusterDomain: ctx.config.networking.advanced.clusterDomain,
      namespaceRules: namespaceRules(ctx),
      mappingsOnly: ctx.config.sync.toHost.namespaces.mappingsOnly,
      vcluster: { name: ctx.vclusterName, namespace: ctx.hostNamespace, config: ctx.config },
    },
  });
}

function patchList(kind: string, ctx: SyncContext) {
  const resource = ownValue(RESOURCE_BY_KIND, kind);
  if (resource === undefined) return { listName: '', patches: [] };
  return { listName: `sync.toHost.${resource}.patches`, patches: ctx.config.sync.toHost[resource].patches };
}

/** The fields a sync may change: no server-owned metadata, status only where it is synced. */
function comparable(obj: KubeObject, keepStatus: boolean): JsonObject {
  const { metadata, status, ...rest } = obj;
  const m = isJsonObject(metadata) ? metadata : {};
  const reduced: JsonObject = {};
  if (m.labels !== undefined) reduced.labels = m.labels;
  if (m.annotations !== undefined) reduced.annotations = m.annotations;
  const out: JsonObject = { ...cloneJson(rest), metadata: cloneJson(reduced) };
  if (keepStatus && status !== undefined) out.status = cloneJson(status);
  return out;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Drops from a merge patch every field the other merge patch changes (it wins them). */
function withoutFieldsOf(delta: JsonObject, winner: JsonObject): void {
  for (const [key, value] of Object.entries(winner)) {
    if (!Object.hasOwn(delta, key)) continue;
    const mine = delta[key];
    if (isJsonObject(mine) && isJsonObject(value)) {
      withoutFieldsOf(mine, value);
      if (Object.keys(mine).length === 0) delete delta[key];
    } else {
      delete delta[key];
    }
  }
}

function run(direction: Direction, input: SyncInput): SyncResult {
  const { kind, source, previousSource, existingTarget, ctx } = input;
  assertSyncedKind(kind);
  const translate = (obj: KubeObject) =>
    direction === 'toHost'
      ? translateToHost(kind, obj, existingTarget, ctx)
      : translateToVirtual(kind, obj, existingTarget, ctx);
  const { listName, patches } = patchList(kind, ctx);
  const common = {
    direction,
    listName,
    patches,
    ctx,
    sandbox: input.sandbox,
    lookupVirtual: input.lookupVirtual,
  };
  const keepStatus = direction === 'toVirtual' && kind === 'Service';

  const translated = translate(source);
  // The host metadata the translation gives (identity, bookkeeping, reserved keys): what the
  // patches may not change, restored after them.
  const expectedMetadata =
    direction === 'toHost' && isJsonObject(translated.metadata) ? cloneJson(translated.metadata) : null;
  let object: KubeObject;
  let references: ObjectReference[];
  if (existingTarget === null) {
    object = translated;
    references = applyPatches({
      ...common,
      document: object,
      isMergePatch: false,
      hostObject: direction === 'toHost' ? object : source,
      virtualObject: direction === 'toHost' ? source : null,
    });
  } else {
    const after = comparable(translated, keepStatus);
    const before = comparable(previousSource ? translate(previousSource) : existingTarget, keepStatus);
    const delta = mergePatchDiff(before, after);
    if (input.previousTarget) {
      withoutFieldsOf(
        delta,
        mergePatchDiff(comparable(input.previousTarget, false), comparable(existingTarget, false)),
      );
    }
    references = applyPatches({
      ...common,
      document: delta,
      isMergePatch: true,
      hostObject: direction === 'toHost' ? existingTarget : source,
      virtualObject: direction === 'toHost' ? source : existingTarget,
    });
    object = applyMergePatch(existingTarget, delta) as KubeObject;
  }
  object = reassertIdentity(object, expectedMetadata, existingTarget);
  return { object, references, changed: existingTarget === null || !sameJson(object, existingTarget) };
}

/**
 * Whatever the patches did, the target keeps its name, namespace and bookkeeping, and the host
 * gets no reserved label or annotation the translation did not give it: a patch can neither move
 * an object, nor make it unmanaged, nor set what the host's controllers act on (validation
 * forbids such paths; this holds even for wildcards, the whole object and reference patches).
 */
function reassertIdentity(
  object: KubeObject,
  expected: JsonObject | null,
  existingTarget: KubeObject | null,
): KubeObject {
  const m: JsonObject = isJsonObject(object.metadata) ? object.metadata : {};
  object.metadata = m;
  if (expected === null) {
    // Toward the virtual cluster: the existing object keeps its name and namespace.
    const identity = existingTarget && isJsonObject(existingTarget.metadata) ? existingTarget.metadata : null;
    if (identity) {
      m.name = identity.name ?? m.name ?? null;
      m.namespace = identity.namespace ?? m.namespace ?? null;
    }
    return object;
  }
  m.name = expected.name ?? null;
  m.namespace = expected.namespace ?? null;
  m.annotations = withReservedKeysOf(m.annotations, expected.annotations);
  m.labels = withReservedKeysOf(m.labels, expected.labels);
  return object;
}

/**
 * A label or annotation map whose reserved keys (`reserved.ts`) are exactly those of the
 * translation (our bookkeeping, and what the host object itself carries): whatever the patches
 * did, nothing from the virtual side sets a reserved key on the host.
 */
function withReservedKeysOf(map: Json | undefined, expected: Json | undefined): JsonObject {
  const result = emptyRecord<Json>();
  if (isJsonObject(map)) for (const [k, v] of Object.entries(map)) if (!isReservedKey(k)) result[k] = v;
  if (isJsonObject(expected))
    for (const [k, v] of Object.entries(expected)) if (isReservedKey(k)) result[k] = v;
  return result;
}

/** The host object to write for a virtual object (translation, then `expression` patches). */
export function syncToHost(input: SyncInput): SyncResult {
  return run('toHost', input);
}

/** The virtual object to write for a host object (back-translation, then `reverseExpression`). */
export function syncToVirtual(input: SyncInput): SyncResult {
  return run('toVirtual', input);
}
