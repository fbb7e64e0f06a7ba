import { createHash } from 'node:crypto';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { type ClusterAccess, reachabilityCondition } from '../../clusters/access.ts';
import type { Connection } from '../../clusters/connection.ts';
import type { ConditionInput } from '../../runtime/conditions.ts';
import { errorReason, TerminalError } from '../../runtime/errors.ts';
import { PROGRESSING_WITH_RETRY } from '../../runtime/reconcile-conditions.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import type { SyncConfigValidation } from '../../sync/config.ts';
import type { SyncerStatus } from '../../sync/controllers/syncer.ts';
import type { PlacementProblem } from '../../sync/placement.ts';

/**
 * The pure parts of the VirtualClusterInstance controller: where a virtual cluster's objects go
 * on the host, how the platform connects to it, and the `Syncing` condition.
 */

export const SYNCING_CONDITION = 'Syncing';

/**
 * Whether the instance asks to be synced: it has credentials and a configuration (its syncer may
 * still be refused: placement, an invalid configuration). Such an instance has the finalizer that
 * guards its syncer's host identity.
 */
export function asksToBeSynced(vci: Pick<VirtualClusterInstance, 'spec'>): boolean {
  return vci.spec.config !== undefined && vci.spec.credentialsSecretRef !== undefined;
}

/**
 * A digest of everything a running syncer was started from: a change of any of it restarts the
 * syncer. Only the digest is kept, never the credentials.
 */
export function syncerFingerprint(parts: {
  connection: Connection;
  config: string;
  hostNamespace: string;
  vclusterName: string;
}): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

export type SyncerState =
  | { phase: 'notConfigured' }
  | { phase: 'invalidConfig'; errors: string[] }
  | { phase: 'noConnection'; reason: string; message: string }
  /** The syncer is about to start (its identity's permissions are on their way). */
  | { phase: 'starting'; message: string }
  /** The syncer may not run: its placement is not allowed, or its host identity could not be set up. */
  | { phase: 'blocked'; reason: string; message: string }
  | { phase: 'running'; status: SyncerStatus };

const MAX_LISTED = 5;
const MAX_ENTRY = 300;

const clip = (text: string) => (text.length > MAX_ENTRY ? `${text.slice(0, MAX_ENTRY - 3)}...` : text);

/** The `Syncing` condition for a state (null: the instance is not synced, no condition). */
export function syncingCondition(state: SyncerState, generation: number | undefined): ConditionInput | null {
  const base = {
    type: SYNCING_CONDITION,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  switch (state.phase) {
    case 'notConfigured':
      return null;
    case 'invalidConfig':
      return {
        ...base,
        status: 'False',
        reason: 'InvalidConfig',
        message: `spec.config: ${state.errors.join('; ')}`.slice(0, 4000),
      };
    case 'noConnection':
    case 'blocked':
      return { ...base, status: 'False', reason: state.reason, message: state.message };
    case 'starting':
      return { ...base, status: 'Unknown', reason: 'Starting', message: state.message };
    case 'running': {
      const { status } = state;
      if (!status.ready) {
        const waiting = status.waitingFor.length > 0 ? `: ${status.waitingFor.join(', ')}` : '';
        return {
          ...base,
          status: 'Unknown',
          reason: 'Starting',
          message: `waiting for the caches${waiting}`,
        };
      }
      if (status.failing.length > 0) {
        const listed = status.failing
          .slice(0, MAX_LISTED)
          .map((f) => `${f.kind} ${f.key}: ${clip(f.message)}`)
          .join('; ');
        const more =
          status.failing.length > MAX_LISTED ? ` (and ${status.failing.length - MAX_LISTED} more)` : '';
        return {
          ...base,
          status: 'False',
          reason: 'SyncError',
          message: `${status.failing.length} object(s) failed to sync: ${listed}${more}`,
        };
      }
      return {
        ...base,
        status: 'True',
        reason: 'Synced',
        message: `syncing ${status.kinds.join(', ')}`,
      };
    }
  }
}

/**
 * The `Ready` condition, the one GitOps tools read: True when the platform reaches the virtual
 * cluster's API with its credentials and, where a syncer is configured, it syncs without errors.
 */
export function readyCondition(
  access: ClusterAccess,
  syncing: ConditionInput | null,
  generation: number | undefined,
): ConditionInput {
  const reachable = reachabilityCondition(access, "the virtual cluster's API", generation);
  if (reachable.status !== 'True' || !syncing) return reachable;
  if (syncing.status !== 'True') {
    return {
      ...reachable,
      status: syncing.status,
      reason: syncing.reason,
      message: `reachable, but not syncing: ${syncing.message}`,
    };
  }
  return { ...reachable, message: `${reachable.message}; syncing` };
}

/**
 * What a reconcile of an instance came to, for the scaffold's status write (pure): `Ready`
 * (reachability, and the syncer's health where one runs), `Syncing` (removed while the instance is
 * not synced), `Reconciling` while the syncer starts (`Ready` Unknown, with its reason) or,
 * `ProgressingWithRetry`, while the instance is not Ready and is looked at again after
 * `requeueAfter` (unreachable, credentials refused, sync errors). A stalled instance's outcome
 * is {@link stalledOutcome}.
 */
export function instanceOutcome(
  access: ClusterAccess,
  state: SyncerState,
  requeueAfter: number,
): Converged<VirtualClusterInstanceStatus> {
  const syncing = syncingCondition(state, undefined);
  const { status, reason, message } = readyCondition(access, syncing, undefined);
  const reconciling =
    status === 'Unknown'
      ? { reason, message }
      : status === 'False'
        ? { reason: PROGRESSING_WITH_RETRY, message: `looking again in ${requeueAfter / 1000} s` }
        : undefined;
  return {
    ready: { status, reason, message },
    ...(syncing ? { conditions: [syncing] } : { removeConditions: [SYNCING_CONDITION] }),
    ...(reconciling ? { reconciling } : {}),
    requeueAfter,
  };
}

/**
 * What the spec asks for cannot work until it changes: the instance is Stalled (its class is the
 * reason of `Stalled` and `Ready`), its syncer stopped and its host identity removed, and it is
 * not looked at again until it changes (or, for a placement, until what the placement was refused
 * for does: the namespaces it names change project, the instance holding it goes).
 */

/**
 * No `spec.credentialsSecretRef`: nothing to reach the virtual cluster with. (A Secret that is
 * named but missing or incomplete is the retried `CredentialsMissing` of `connectionFor`, the
 * same reason: it can appear without a change of the instance.)
 */
export class CredentialsMissing extends TerminalError {}

/** `spec.config` is not a valid syncer configuration (admission refuses one; this covers objects written without it). */
export class InvalidConfig extends TerminalError {}

/**
 * The syncer may not write where the instance places it: outside its project, in another
 * cluster, with a namespace pattern, or under a placement another instance holds (admission
 * refuses the first three; this covers instances admitted before, or whose namespaces changed
 * project since).
 */
export class PlacementNotAllowed extends TerminalError {}

/** Why an instance is stalled, and the syncer state that goes with it (for `Syncing`). */
export interface InstanceStall {
  error: TerminalError;
  state: SyncerState;
}

/**
 * Whether the instance is stalled (pure): no `spec.credentialsSecretRef`, or (for an instance
 * that asks to be synced) an invalid `spec.config` or a placement refused (`placement`: what the
 * caches say of it). Undefined: nothing in the spec stands in the way.
 */
export function stallOf(
  vci: Pick<VirtualClusterInstance, 'spec'>,
  validated: SyncConfigValidation | undefined,
  placement: readonly PlacementProblem[],
): InstanceStall | undefined {
  if (!vci.spec.credentialsSecretRef) {
    return {
      error: new CredentialsMissing(
        'spec.credentialsSecretRef is not set, so the platform cannot reach the virtual cluster',
      ),
      state: { phase: 'notConfigured' },
    };
  }
  return asksToBeSynced(vci) ? syncStall(validated, placement) : undefined;
}

/**
 * Whether the syncer of an instance that asks to be synced is stalled (pure): an invalid
 * configuration, or a placement refused. Registered and provisioned instances alike.
 */
export function syncStall(
  validated: SyncConfigValidation | undefined,
  placement: readonly PlacementProblem[],
): InstanceStall | undefined {
  if (validated && !validated.config) {
    const state: SyncerState = { phase: 'invalidConfig', errors: validated.errors };
    return { error: new InvalidConfig(syncingCondition(state, undefined)!.message), state };
  }
  if (placement.length > 0) {
    const message = `the syncer may not run: ${placement.map((p) => `${p.field}: ${p.message}`).join('; ')}`;
    return {
      error: new PlacementNotAllowed(message),
      state: { phase: 'blocked', reason: 'PlacementNotAllowed', message },
    };
  }
  return undefined;
}

/**
 * The outcome of a stalled instance (pure): `Stalled=True` and `Ready=False` with the stall's
 * class as reason (the scaffold writes them), `Syncing=False` with the same reason where the
 * instance asks to be synced, removed where it does not.
 */
export function stalledOutcome(stall: InstanceStall): Converged<VirtualClusterInstanceStatus> {
  const syncing = syncingCondition(stall.state, undefined);
  return {
    ready: { status: 'False', reason: errorReason(stall.error), message: stall.error.message },
    stalled: stall.error,
    ...(syncing ? { conditions: [syncing] } : { removeConditions: [SYNCING_CONDITION] }),
  };
}
