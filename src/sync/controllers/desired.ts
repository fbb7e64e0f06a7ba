import { cloneJson, jsonEqual } from '../patches/merge-patch.ts';
import type { HostToVirtualLookup } from '../patches/reference-patches.ts';
import type { Sandbox } from '../patches/sandbox.ts';
import { syncToHost, syncToVirtual } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import { resourceVersionOf, virtualOwnedFields } from './plan.ts';

/**
 * The pair of objects both sides should hold when both exist, computed before anything is
 * written (so a failing expression leaves both sides untouched). Pure apart from the sandbox.
 */

export interface SyncRecord {
  /** The virtual object after our last sync. */
  virtual: KubeObject;
  /** The host object after our last sync (as written, or as read when nothing was written). */
  host: KubeObject;
}

export interface DesiredPairInput {
  kind: SyncedKind;
  virtual: KubeObject;
  host: KubeObject;
  /** What this syncer last synced for the key; null after a restart. */
  record: SyncRecord | null;
  ctx: SyncContext;
  sandbox: Sandbox;
  /** Host name -> virtual name for `reference` patches on the way back. */
  lookupVirtual?: HostToVirtualLookup;
}

export interface DesiredPair {
  virtual: KubeObject;
  host: KubeObject;
  /** Whether host changes were brought back (step 1 ran). */
  backSynced: boolean;
  /** Whether the host was compared as a whole (no record, or its owned fields drifted). */
  drifted: boolean;
}

/**
 * 1. Host -> virtual, only if the host object changed since our last sync: what changed in the
 *    fields that flow back (labels, annotations, a Service's status and bidirectional spec
 *    fields; see `translateToVirtual`) comes back through `reverseExpression`, on whatever path
 *    the patch names. A field the virtual side changed too since our last sync keeps the virtual
 *    value. The fields the virtual side owns (Endpoints subsets, the rest of a Service's spec,
 *    Secret/ConfigMap contents) never flow back.
 *    Without a record (first sync after a restart) only a Service's status comes back (through
 *    its reverse patches); everything else is taken from the virtual side, once.
 * 2. Virtual -> host through `expression`: what changed on the virtual side since our last sync
 *    (including what step 1 brought in, which the patches turn back into the host's form); or,
 *    when the host's virtual-owned fields drifted from what we wrote (or we know nothing),
 *    everything that differs from the host object, which reverts the drift.
 * Measuring changes against the last sync, not against the other side, keeps a field nobody
 * changed at its patched value and evaluates expressions only for fields that changed.
 */
export function desiredPair(input: DesiredPairInput): DesiredPair {
  const { kind, virtual, host, record, ctx, sandbox, lookupVirtual } = input;
  let virtualNext = virtual;
  let backSynced = false;
  if (record !== null && resourceVersionOf(host) !== resourceVersionOf(record.host)) {
    virtualNext = syncToVirtual({
      kind,
      source: host,
      previousSource: record.host,
      existingTarget: virtual,
      previousTarget: record.virtual,
      ctx,
      sandbox,
      lookupVirtual,
    }).object;
    backSynced = true;
  } else if (kind === 'Service' && record === null) {
    // The host's status, through the reverse patches of its paths.
    virtualNext = syncToVirtual({
      kind,
      source: host,
      previousSource: { ...host, status: cloneJson(virtual.status ?? {}) },
      existingTarget: virtual,
      ctx,
      sandbox,
      lookupVirtual,
    }).object;
  }

  const drifted =
    record === null || !jsonEqual(virtualOwnedFields(kind, host), virtualOwnedFields(kind, record.host));
  const forward = syncToHost({
    kind,
    source: virtualNext,
    previousSource: drifted || record === null ? null : record.virtual,
    existingTarget: host,
    ctx,
    sandbox,
  });
  return { virtual: virtualNext, host: forward.object, backSynced, drifted };
}
