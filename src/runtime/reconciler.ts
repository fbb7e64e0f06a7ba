import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from './clock.ts';
import type { Condition } from './conditions.ts';
import type { ReconcileContext, ReconcileResult, Reconciler } from './controller.ts';
import { errorMessage, errorReason, isNotFound, TerminalError } from './errors.ts';
import type { EventRecorder, ObjectReference } from './events.ts';
import { hasFinalizer, isBeingDeleted } from './finalizers.ts';
import type { KubeApi } from './kube-api.ts';
import type { ResourceRef } from './kube-client.ts';
import {
  convergedConditions,
  failedConditions,
  type OutcomeConditions,
  stalledConditions,
} from './reconcile-conditions.ts';
import { kubeWrites, type ScaffoldStatus, type ScaffoldWrites } from './scaffold-writes.ts';
import type { Store } from './store.ts';

export type ScaffoldObject = KubernetesObject & { status?: ScaffoldStatus };

/** What converging an object came to, for a controller that writes no status: when to look again. */
export interface Settled {
  /** The object itself was deleted (an expired key): nothing to write. */
  deleted?: boolean;
  requeueAfter?: number;
}

/** What converging an object came to (when it did not throw). */
export interface Converged<S> extends Settled, OutcomeConditions {
  /** Status fields besides conditions and observedGeneration (merged over what `statusOf` gave). */
  status?: Partial<S>;
  /**
   * Retrying cannot help (the spec asks for what cannot be done), and the controller has
   * conditions of its own to say so too (`Syncing=False` with why): handled as if `apply` had
   * thrown this error (`Stalled=True` and `Ready=False` with its class as reason, `Reconciling`
   * removed, a Warning Event, the error rethrown, no retry until the object changes), with
   * `conditions`, `removeConditions` and `status` written in the same status write. `ready`,
   * `reconciling` and `requeueAfter` are the error's then (ignored).
   */
  stalled?: TerminalError;
}

interface ReconcilerCommon<T extends ScaffoldObject> {
  /** For Events and logs. */
  kind: string;
  clock: Clock;
  events: Pick<EventRecorder, 'record'>;
  /** The primary objects' cache; the scaffold reads it and records its own writes in it. */
  store: Store<T>;
  /**
   * A finalizer that guards `cleanup` while the object is being deleted. Omit it when owner
   * references and garbage collection remove everything the object made.
   */
  finalizer?: string;
  /**
   * Whether the object needs `finalizer` now, from the object alone (default: always). One that
   * does not (it no longer asks for what the finalizer guards) and has it gets `cleanup`, then the
   * finalizer removed, before `apply`.
   */
  needsFinalizer?(obj: T): boolean;
  /**
   * What a stall depends on besides the object, read from caches (pure and cheap): a stalled
   * object is looked at again when this changes, not only when the object does (the namespace
   * its placement was refused joined its project). The controller's watches must enqueue the
   * object when it may change. Default: the object alone.
   */
  stalledOn?(obj: T): string;
  /** Finalizers earlier versions added: removed (after `cleanup`) when such an object is deleted. */
  formerFinalizers?: string[];
  /** The Event action of failures, UpperCamelCase (`ProjectAccess`). */
  action: string;
  /**
   * Removes what the object made: while it is being deleted (with `finalizer`, before the
   * finalizer goes), when it is gone (`obj` undefined: whatever was left behind), and when it
   * no longer needs the finalizer (`needsFinalizer`).
   */
  cleanup?(key: string, obj: T | undefined, ctx: ReconcileContext): Promise<void>;
}

/** Where the scaffold writes: the API (`api`, `resource`), or writes of the caller's own (tests). */
type WritesOption<T> = { api: KubeApi; resource: ResourceRef } | { writes: ScaffoldWrites<T> };

/** A controller whose objects carry the scaffold's status (`Ready`, `Reconciling`, `Stalled`, `observedGeneration`). */
type WithStatus<T extends ScaffoldObject, S> = {
  status?: true;
  /** Status fields that follow from the object alone (pure), written whatever `apply` comes to. */
  statusOf?(obj: T): Partial<S>;
  /** Converges what the object asks for. Throw to retry (TerminalError: stall until the object changes). */
  apply(obj: T, ctx: ReconcileContext): Promise<Converged<S>>;
};

/**
 * A controller of objects that have no status of ours (a core Secret it fills): everything but
 * the status write (failures are Warning Events and logs, a TerminalError still stalls the key).
 */
type WithoutStatus<T extends ScaffoldObject> = {
  status: false;
  apply(obj: T, ctx: ReconcileContext): Promise<Settled | undefined>;
};

export type ObjectReconcilerOptions<T extends ScaffoldObject, S> = ReconcilerCommon<T> &
  WritesOption<T> &
  (WithStatus<T, S> | WithoutStatus<T>);

/**
 * The one reconcile sequence every controller runs (in the spirit of kube-rs's `finalizer()` and
 * Flux's reconcilers); a controller supplies only `apply`, `cleanup` and its pure parts.
 *
 * 1. Deletion first: a gone object gets `cleanup` of its leftovers; a deleting one gets `cleanup`,
 *    then its finalizer removed. Nothing else runs for either.
 * 2. The finalizer is added (and the object written used from then on); one the object no longer
 *    needs (`needsFinalizer`) is released: `cleanup`, then the finalizer removed.
 * 3. `apply` converges. Its outcome, or its error, becomes the status, written once at the end:
 *    - success: `Ready` as the outcome says, `Reconciling=True` only while work is outstanding,
 *      `Stalled` removed;
 *    - an ordinary error: `Ready=False` (reason: the error's class), `Reconciling=True`
 *      (`ProgressingWithRetry`), a Warning Event, and the error rethrown so the key is retried
 *      with backoff;
 *    - a `TerminalError`: `Stalled=True` and `Ready=False` with its class as reason, a Warning
 *      Event, no retry (rethrown as terminal) and no further work on the key until the object
 *      changes (a resync does not count as a change; a new generation, or any other write to the
 *      object, does) or what `stalledOn` says of it does. An outcome with `stalled` is the same,
 *      with the controller's own conditions written beside.
 * 4. The status write stamps `status.observedGeneration` with the generation `apply` saw; it is
 *    skipped when nothing changed, and refused (409, retried) when the object changed since it
 *    was read, so a condition another writer set is never dropped. A failed status write is
 *    logged, never swallowed: it fails the reconcile (retry) unless `apply` already failed, whose
 *    error then wins.
 *
 * Between an object's creation (or a spec change) and that write, `observedGeneration` lags the
 * generation, which is how kstatus tells work in flight without a write of its own.
 *
 * With `status: false` (objects that have no status of ours) step 4 is left out; the rest holds.
 */
export function objectReconciler<T extends ScaffoldObject, S>(
  options: ObjectReconcilerOptions<T, S>,
): Reconciler {
  const scaffold: Scaffold<T, S> = {
    options,
    writes: 'writes' in options ? options.writes : kubeWrites<T>(options.api, options.resource),
    stalled: new Map(),
  };
  return (key, ctx) => reconcileObject(scaffold, key, ctx);
}

/** One controller's scaffold: its options, where it writes, and the keys it holds stalled. */
interface Scaffold<T extends ScaffoldObject, S> {
  options: ObjectReconcilerOptions<T, S>;
  writes: ScaffoldWrites<T>;
  /**
   * key -> the resourceVersion the object had when it stalled (after our status write), and what
   * `stalledOn` said before the `apply` that stalled it.
   */
  stalled: Map<string, { resourceVersion: string; on: string | undefined }>;
}

/** The sequence {@link objectReconciler} describes, for the object named `key`. */
async function reconcileObject<T extends ScaffoldObject, S>(
  scaffold: Scaffold<T, S>,
  key: string,
  ctx: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  const { options, stalled } = scaffold;
  const found = options.store.fresh(key);
  if (!found) {
    stalled.delete(key);
    await options.cleanup?.(key, undefined, ctx);
    return undefined;
  }
  if (isBeingDeleted(found)) {
    stalled.delete(key);
    const ours = [...(options.finalizer ? [options.finalizer] : []), ...(options.formerFinalizers ?? [])];
    const held = ours.filter((f) => hasFinalizer(found, f));
    if (held.length > 0) await release(scaffold, key, found, held, ctx);
    return undefined;
  }
  const stalledAt = stalled.get(key);
  if (
    stalledAt !== undefined &&
    stalledAt.resourceVersion === found.metadata?.resourceVersion &&
    stalledAt.on === options.stalledOn?.(found)
  ) {
    ctx.logger.debug('stalled and unchanged since; not retrying');
    return undefined;
  }
  stalled.delete(key);
  const obj = await withFinalizer(scaffold, key, found, ctx);
  const outcome = await applyAndWriteStatus(scaffold, key, obj, ctx);
  // A deleted object is not looked at again: its deletion is an event of its own.
  if (outcome?.deleted || outcome?.requeueAfter === undefined) return undefined;
  return { requeueAfter: outcome.requeueAfter };
}

/**
 * Step 3 and 4: `apply`, then the status its outcome or its error becomes. Rethrows the error
 * of `apply` (or of a stalled outcome) after its status is written.
 */
async function applyAndWriteStatus<T extends ScaffoldObject, S>(
  scaffold: Scaffold<T, S>,
  key: string,
  obj: T,
  ctx: ReconcileContext,
): Promise<Settled | undefined> {
  const { options } = scaffold;
  // Read before apply: a change of what it depends on while apply runs enqueues the key again,
  // and that reconcile must see a difference.
  const on = options.stalledOn?.(obj);
  const generation = obj.metadata?.generation;
  const now = new Date(options.clock.now());
  const fields = options.status === false ? {} : (options.statusOf?.(obj) ?? {});
  const failed = async (
    err: unknown,
    conditionsOf: (c: Condition[]) => Condition[],
    failedFields: Partial<S>,
  ) => {
    warn(scaffold, obj, err);
    await writeFailureStatus(scaffold, key, obj, err, on, ctx, conditionsOf, failedFields);
    return err;
  };

  let outcome: Settled | undefined;
  /** The outcome of a controller with status (its status written below). */
  let converged: Converged<S> | undefined;
  try {
    if (options.status === false) outcome = await options.apply(obj, ctx);
    else outcome = converged = await options.apply(obj, ctx);
  } catch (err) {
    if (options.status === false) {
      warn(scaffold, obj, err);
      if (err instanceof TerminalError) stall(scaffold, key, obj.metadata?.resourceVersion, on);
      throw err;
    }
    throw await failed(err, (conditions) => failedConditions(conditions, err, generation, now), fields);
  }
  if (outcome?.deleted || !converged) return outcome;
  const done = converged;
  if (done.stalled) {
    const err = done.stalled;
    throw await failed(
      err,
      (conditions) => stalledConditions(conditions, { ...done, stalled: err }, generation, now),
      { ...fields, ...done.status },
    );
  }
  try {
    await writeStatus(scaffold, obj, (conditions) => convergedConditions(conditions, done, generation, now), {
      ...fields,
      ...done.status,
    });
  } catch (err) {
    ctx.logger.warn({ err, reason: errorReason(err) }, 'writing the status failed; retrying');
    throw err;
  }
  return outcome;
}

function stall<T extends ScaffoldObject, S>(
  scaffold: Scaffold<T, S>,
  key: string,
  resourceVersion: string | undefined,
  on: string | undefined,
): void {
  if (resourceVersion) scaffold.stalled.set(key, { resourceVersion, on });
}

function regardingOf<T extends ScaffoldObject>(kind: string, obj: T): ObjectReference {
  return {
    apiVersion: obj.apiVersion,
    kind,
    name: obj.metadata?.name,
    ...(obj.metadata?.namespace ? { namespace: obj.metadata.namespace } : {}),
    uid: obj.metadata?.uid,
  };
}

/** Writes the status; returns the resourceVersion the object has afterwards. */
async function writeStatus<T extends ScaffoldObject, S>(
  { options, writes }: Scaffold<T, S>,
  obj: T,
  conditionsOf: (conditions: Condition[]) => Condition[],
  fields: Partial<S>,
): Promise<string | undefined> {
  const status = {
    ...obj.status,
    ...fields,
    observedGeneration: obj.metadata?.generation,
    conditions: conditionsOf(obj.status?.conditions ?? []),
  };
  try {
    const written = await writes.writeStatus(obj, status);
    if (written) options.store.recordWrite(written, obj.metadata?.resourceVersion);
    return (written ?? obj).metadata?.resourceVersion;
  } catch (err) {
    // Deleted meanwhile: there is no status left to write, and its deletion is an event of its own.
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** The Warning Event of a failed reconcile. */
function warn<T extends ScaffoldObject, S>({ options }: Scaffold<T, S>, obj: T, err: unknown): void {
  void options.events.record(regardingOf(options.kind, obj), {
    type: 'Warning',
    reason: errorReason(err),
    action: options.action,
    note: errorMessage(err),
  });
}

/**
 * Writes the status of a failed reconcile (the failure itself is rethrown by the caller, so a
 * failed write is only logged); a `TerminalError` stalls the key at the resourceVersion written.
 */
async function writeFailureStatus<T extends ScaffoldObject, S>(
  scaffold: Scaffold<T, S>,
  key: string,
  obj: T,
  err: unknown,
  on: string | undefined,
  ctx: ReconcileContext,
  conditionsOf: (conditions: Condition[]) => Condition[],
  fields: Partial<S>,
): Promise<void> {
  try {
    const resourceVersion = await writeStatus(scaffold, obj, conditionsOf, fields);
    if (err instanceof TerminalError) stall(scaffold, key, resourceVersion, on);
  } catch (statusErr) {
    ctx.logger.warn({ err: statusErr, reason: errorReason(statusErr) }, 'writing the failure status failed');
  }
}

/** Runs `cleanup`, then removes each of `finalizers` (after cleanup succeeded, never before). */
async function release<T extends ScaffoldObject, S>(
  { options, writes }: Scaffold<T, S>,
  key: string,
  obj: T,
  finalizers: string[],
  ctx: ReconcileContext,
): Promise<T> {
  await options.cleanup?.(key, obj, ctx);
  let current = obj;
  try {
    for (const f of finalizers) current = await writes.removeFinalizer(current, f);
  } catch (err) {
    // Gone already: its last finalizer went (an earlier reconcile's, the cache not caught up).
    if (isNotFound(err)) return current;
    throw err;
  }
  if (current !== obj) options.store.recordWrite(current, obj.metadata?.resourceVersion);
  return current;
}

/** The finalizer as the object needs it: added (the object written returned), or released. */
async function withFinalizer<T extends ScaffoldObject, S>(
  scaffold: Scaffold<T, S>,
  key: string,
  found: T,
  ctx: ReconcileContext,
): Promise<T> {
  const { options, writes } = scaffold;
  const { finalizer } = options;
  if (!finalizer) return found;
  const needed = options.needsFinalizer?.(found) ?? true;
  if (!needed)
    return hasFinalizer(found, finalizer) ? release(scaffold, key, found, [finalizer], ctx) : found;
  if (hasFinalizer(found, finalizer)) return found;
  const written = await writes.addFinalizer(found, finalizer);
  options.store.recordWrite(written, found.metadata?.resourceVersion);
  return written;
}
