import { createHash } from 'node:crypto';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { type ClusterAccess, reachabilityCondition } from '../../clusters/access.ts';
import type { Connection } from '../../clusters/connection.ts';
import type { ConditionInput } from '../../runtime/conditions.ts';
import { type Converged, PROGRESSING_WITH_RETRY } from '../../runtime/reconciler.ts';
import type { SyncerStatus } from '../../sync/controllers/syncer.ts';

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

/** Where the syncer writes and what it calls the virtual cluster. */
export function placementOf(vci: Pick<VirtualClusterInstance, 'metadata' | 'spec'>): {
  hostNamespace: string;
  vclusterName: string;
} {
  return {
    hostNamespace: vci.spec.clusterRef?.namespace ?? vci.metadata.namespace ?? '',
    vclusterName: vci.spec.clusterRef?.virtualCluster ?? vci.metadata.name ?? '',
  };
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
 * `requeueAfter` (unreachable, credentials refused, sync errors); none when nothing is due.
 */
export function instanceOutcome(
  access: ClusterAccess,
  state: SyncerState,
  requeueAfter: number | undefined,
): Converged<VirtualClusterInstanceStatus> {
  const syncing = syncingCondition(state, undefined);
  const { status, reason, message } = readyCondition(access, syncing, undefined);
  const reconciling =
    status === 'Unknown'
      ? { reason, message }
      : status === 'False' && requeueAfter !== undefined
        ? { reason: PROGRESSING_WITH_RETRY, message: `looking again in ${requeueAfter / 1000} s` }
        : undefined;
  return {
    ready: { status, reason, message },
    ...(syncing ? { conditions: [syncing] } : { removeConditions: [SYNCING_CONDITION] }),
    ...(reconciling ? { reconciling } : {}),
    ...(requeueAfter !== undefined ? { requeueAfter } : {}),
  };
}
