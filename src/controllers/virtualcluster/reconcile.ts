import { CLEANUP_FINALIZER } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { type ClusterAccess, readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { probeCluster } from '../../clusters/reachability.ts';
import type { ReconcileContext, Reconciler } from '../../runtime/controller.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey } from '../../runtime/kube-client.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import { type SyncConfigValidation, validateSyncConfig } from '../../sync/config.ts';
import {
  type PlacementProblem,
  placementClaims,
  placementOf,
  placementProblems,
} from '../../sync/placement.ts';
import { releaseInstance, type VirtualClusterContext, type VirtualClusterReconcilerDeps } from './context.ts';
import { asksToBeSynced, SYNCING_CONDITION, stalledOutcome, stallOf } from './desired.ts';
import { cleanupProvisioned, provisionedStalledOn, reconcileProvisioned } from './provision-edge.ts';
import { runSyncer } from './syncer-run.ts';

export type { VirtualClusterReconcilerDeps } from './context.ts';

/** The instance's `spec.config`, validated (undefined: none). */
export const validatedConfig = (
  vci: Pick<VirtualClusterInstance, 'spec'>,
): SyncConfigValidation | undefined =>
  vci.spec.config === undefined ? undefined : validateSyncConfig(vci.spec.config);

/**
 * Reports whether the platform reaches each VirtualClusterInstance (`Ready`: a SelfSubjectReview
 * with the credentials of `spec.credentialsSecretRef`, repeated every minute, every 10 s while it
 * fails) and runs one syncer per instance that has `spec.credentialsSecretRef` and
 * `spec.config`, restarts it when anything it was started from changes (configuration,
 * credentials, endpoint, placement), stops it when the instance goes, and reports how it does in
 * the `Syncing` condition. Credentials are read with a GET on every reconcile (no cache of all
 * Secrets) and never logged; only a digest of them is kept.
 *
 * The syncer acts on the host as the virtual cluster, never as the platform: each configured
 * instance gets a ServiceAccount of its own in its host namespace, bound there to the ClusterRoles
 * of exactly the kinds it syncs (`desiredSyncerIdentity`), and its syncer's host client presents
 * short-lived tokens of that ServiceAccount (TokenRequest, renewed before they expire). The
 * identity is removed when the instance goes (guarded by the finalizer, which an instance has
 * while it asks to be synced) or when its syncer may not run.
 *
 * On the reconcile scaffold: `Reconciling` is True while the syncer starts (`Ready` Unknown) and,
 * `ProgressingWithRetry`, while the instance is not Ready and is looked at again (unreachable,
 * credentials refused or their Secret missing, sync errors). What only a change of the instance
 * resolves is `Stalled` (`stallOf`: no `spec.credentialsSecretRef`, an invalid `spec.config`, a
 * placement refused), not retried: an instance whose placement was refused is looked at again
 * when the namespaces it names change project or the instance that holds its placement changes
 * (`stalledOn`, and the watches of the setup).
 */
export function virtualClusterReconciler(deps: VirtualClusterReconcilerDeps): Reconciler {
  const context: VirtualClusterContext = { ...deps, permissionWaits: new Map(), syncerActivity: new Map() };
  return objectReconciler<Stored<VirtualClusterInstance>, VirtualClusterInstanceStatus>({
    kind: 'VirtualClusterInstance',
    resource: resources.virtualClusterInstances,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.instances,
    // Guards the syncer's host identity, which has no owner reference (it may live in another
    // namespace of the project): an instance has it while it asks to be synced.
    finalizer: CLEANUP_FINALIZER,
    // A provisioned instance has it whenever this operator provisions: it guards its control plane too.
    needsFinalizer: (vci) => (isProvisioned(vci) ? deps.provisioning !== undefined : asksToBeSynced(vci)),
    action: 'SyncVirtualCluster',
    // A refused placement depends on other objects too (namespaces' projects, the instance that
    // holds the placement): a stalled instance is looked at again when what they say changes.
    stalledOn: (vci) =>
      isProvisioned(vci) && deps.provisioning
        ? provisionedStalledOn(deps, deps.provisioning, vci)
        : JSON.stringify(placementRefusals(deps, vci, validatedConfig(vci))),
    apply: (vci, ctx) => reconcileVirtualCluster(context, vci, ctx),
    cleanup: (key, vci, ctx) =>
      vci && isProvisioned(vci) && context.provisioning
        ? cleanupProvisioned(context, context.provisioning, vci, ctx)
        : releaseInstance(context, key, vci),
  });
}

/**
 * Converges one instance: stalled (no syncer, no identity) when only a change of it resolves
 * what it asks for; else its syncer's identity, its reachability and its syncer (started,
 * restarted when what it was started from changed, stopped when it may not run).
 */
async function reconcileVirtualCluster(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const key = objectKey(vci);
  if (isProvisioned(vci)) {
    if (context.provisioning) return reconcileProvisioned(context, context.provisioning, vci, ctx);
    // Not a registered instance missing its credentials: nothing of a syncer or identity is due
    // until a provisioner makes its control plane and credentials.
    await releaseInstance(context, key, vci);
    return provisionerNotConfigured();
  }
  const validated = validatedConfig(vci);
  // What only a change of the instance (or of what its placement was refused for) resolves:
  // no syncer, no identity, Stalled.
  const stall = stallOf(vci, validated, placementRefusals(context, vci, validated));
  if (stall) {
    await releaseInstance(context, key, vci);
    return stalledOutcome(stall);
  }
  const { connection, access } = await connectionOf(context.api, vci);
  return runSyncer(
    context,
    vci,
    {
      connection,
      access,
      configText: vci.spec.config,
      syncConfig: asksToBeSynced(vci) ? (validated?.config ?? null) : null,
      probe: (client, { server }) => probeCluster(client, server, context.probeTimeoutMs),
    },
    ctx,
  );
}

/** An instance the platform provisions (from `spec.templateRef`) rather than one it registers (`spec.endpoint`). */
export const isProvisioned = (vci: Pick<VirtualClusterInstance, 'spec'>): boolean =>
  vci.spec.endpoint === undefined;

/** The reason of `Provisioned` and `Ready` while no provisioner runs. */
const PROVISIONER_NOT_CONFIGURED = 'ProvisionerNotConfigured';

/**
 * The outcome of a provisioned instance while this operator provisions none (pure): `Provisioned`
 * and `Ready` False with reason `ProvisionerNotConfigured`, no `Syncing`. Not `Stalled`: the
 * instance asks for nothing wrong; an operator that provisions will take it up.
 */
export function provisionerNotConfigured(): Converged<VirtualClusterInstanceStatus> {
  const message =
    'this instance names a VirtualClusterTemplate (spec.templateRef), but this operator provisions no virtual clusters';
  return {
    ready: { status: 'False', reason: PROVISIONER_NOT_CONFIGURED, message },
    conditions: [{ type: 'Provisioned', status: 'False', reason: PROVISIONER_NOT_CONFIGURED, message }],
    removeConditions: [SYNCING_CONDITION],
  };
}

/**
 * Where an instance that asks to be synced with a valid configuration may not sync, from the
 * caches (pure): outside its project (admission refuses that; this covers instances admitted
 * before, or whose namespaces changed project since), or under a placement another instance holds.
 */
export function placementRefusals(
  deps: Pick<VirtualClusterReconcilerDeps, 'projectOf' | 'instancesPlacedIn'>,
  vci: Stored<VirtualClusterInstance>,
  validated: SyncConfigValidation | undefined,
): PlacementProblem[] {
  return asksToBeSynced(vci) && validated?.config
    ? [
        ...placementProblems(vci, validated.config, deps.projectOf),
        ...placementClaims(vci, deps.instancesPlacedIn(placementOf(vci).hostNamespace)),
      ]
    : [];
}

/**
 * The connection `spec.credentialsSecretRef` (set: an instance without it is stalled) gives, or
 * why there is none. The Secret is not watched: it is read again on every reconcile.
 */
async function connectionOf(
  api: KubeApi,
  vci: Stored<VirtualClusterInstance>,
): Promise<{ connection?: Connection; access: ClusterAccess }> {
  const secretName = vci.spec.credentialsSecretRef?.name ?? '';
  try {
    const secret = await readCredentialsSecret(api, vci.metadata.namespace ?? '', secretName);
    return {
      connection: connectionFor(vci.spec, secretName, secret),
      access: { phase: 'probed', reachability: { reachable: true, username: '' } },
    };
  } catch (err) {
    if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
    return { access: { phase: 'noCredentials', reason: err.name, message: err.message } };
  }
}
