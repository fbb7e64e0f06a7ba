import type { Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { type ClusterAccess, readCredentialsSecret } from '../../clusters/access.ts';
import { type Connection, CredentialsMissing, InvalidCredentials } from '../../clusters/connection.ts';
import { provisionedAdminSecretName, provisionedConnection } from '../../clusters/provisioned-connection.ts';
import { findCondition } from '../../runtime/conditions.ts';
import type { ReconcileContext } from '../../runtime/controller.ts';
import { LeaderElectionLostError } from '../../runtime/errors.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey } from '../../runtime/kube-client.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import { type SyncConfigValidation, validateSyncConfig } from '../../sync/config.ts';
import { placementClaims, placementOf, placementProblems } from '../../sync/placement.ts';
import {
  type Provisioning,
  provisionedOf,
  recordInstanceEvent,
  releaseInstance,
  type VirtualClusterContext,
} from './context.ts';
import { stalledOutcome, syncStall } from './desired.ts';
import { deleteSyncedHostObjects } from './host-objects.ts';
import {
  notProvisionedOutcome,
  PROVISIONED_CONDITION,
  type ProvisionResult,
  provisionEvent,
  provisionedConfigText,
  provisionedState,
  provisioningEvent,
  withProvisioned,
} from './provisioned.ts';
import { readyzProbe } from './readyz.ts';
import { decideSleep, sleepEvent, withAwake } from './sleep.ts';
import { deleteForInactivity, putToSleep, wakeSyncedHostObjects } from './sleep-edge.ts';
import { runSyncer } from './syncer-run.ts';

/**
 * The edge of a provisioned instance (no `spec.endpoint`): its template from the cache, the
 * provisioner's `ensure`, the admin Secret it wrote, then the syncer exactly as for a registered
 * instance (`runSyncer`), `Ready` from the virtual apiserver's `/readyz`. Deletion undoes it in
 * order: syncer, what the syncer wrote on the host, its identity, the control plane.
 */

type Deps = Pick<VirtualClusterContext, 'projectOf' | 'instancesPlacedIn' | 'clock'>;

/** The instance's syncer configuration (its own, else its template's), validated; undefined: none. */
function configOf(provisioning: Provisioning, vci: Stored<VirtualClusterInstance>) {
  const template = provisioning.templates.get(vci.spec.templateRef?.name ?? '');
  const text = provisionedConfigText(vci, template);
  return { template, text, validated: text === undefined ? undefined : validateSyncConfig(text) };
}

function refusals(
  deps: Deps,
  vci: Stored<VirtualClusterInstance>,
  validated: SyncConfigValidation | undefined,
) {
  return validated?.config
    ? [
        ...placementProblems(vci, validated.config, deps.projectOf),
        ...placementClaims(vci, deps.instancesPlacedIn(placementOf(vci).hostNamespace)),
      ]
    : [];
}

/**
 * What a stalled provisioned instance is looked at again for: its template, its placement, and
 * sleep mode (its time to fall asleep or be deleted came: a timer enqueues it then, see
 * `reconcileProvisioned`; a stalled instance runs no syncer, so no syncer activity counts).
 */
export function provisionedStalledOn(
  deps: Deps,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
): string {
  const { template, validated } = configOf(provisioning, vci);
  const sleep = decideSleep(vci, { now: deps.clock.now() }).action;
  return JSON.stringify([template?.metadata.resourceVersion ?? null, refusals(deps, vci, validated), sleep]);
}

/**
 * Converges a provisioned instance: deleted when inactive for `spec.deleteAfter`, asleep (control
 * plane stopped, syncer paused) as sleep mode decides (`sleep.ts`), else awake: its control plane
 * (made, started, repaired), then its syncer.
 */
export async function reconcileProvisioned(
  context: VirtualClusterContext,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const decision = decideSleep(vci, {
    now: context.clock.now(),
    syncerActivity: context.syncerActivity.get(objectKey(vci)),
  });
  switch (decision.action) {
    case 'delete':
      return deleteForInactivity(context, vci, decision, ctx);
    case 'sleep':
    case 'stayAsleep':
      return putToSleep(context, provisioning, vci, decision, ctx);
    default: {
      if (decision.action === 'wake') {
        ctx.logger.info({ lastActivity: decision.lastActivity }, 'waking the virtual cluster');
        recordInstanceEvent(context, vci, sleepEvent(decision));
        // Before Sleeping=False is written: an awake instance's host objects are never labelled
        // asleep (a failure here leaves it asleep, and the wake is tried again).
        await wakeSyncedHostObjects(context, vci, ctx);
      }
      const outcome = withAwake(await reconcileAwake(context, provisioning, vci, ctx), decision);
      // A stalled key is not requeued by the scaffold: its sleep (or deletion) is brought by a
      // timer, and `provisionedStalledOn` lets that reconcile through. A second late, so the
      // decision has surely changed when it runs (a timer may fire a little early by the clock).
      const due = decision.requeueAfter;
      if (outcome.stalled && due !== undefined)
        context.clock.setTimer(due + 1000, () => context.enqueue(objectKey(vci)));
      return outcome;
    }
  }
}

/** An awake provisioned instance: its control plane (made, started, repaired), then its syncer. */
async function reconcileAwake(
  context: VirtualClusterContext,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const key = objectKey(vci);
  const { template, text, validated } = configOf(provisioning, vci);
  const before = findCondition(vci.status?.conditions, PROVISIONED_CONDITION);
  if (!template) {
    await releaseInstance(context, key, vci);
    return notProvisionedOutcome(
      provisionedState({ kind: 'templateNotFound', template: vci.spec.templateRef?.name ?? '' }),
    );
  }
  recordInstanceEvent(context, vci, provisioningEvent(before));
  let result: ProvisionResult;
  try {
    const options = { controllerManager: provisioning.controllerManager };
    result = { kind: 'ensured', status: await provisioning.provisioner.ensure(provisionedOf(vci), options) };
  } catch (error) {
    if (error instanceof LeaderElectionLostError) throw error;
    result = { kind: 'failed', error };
  }
  const state = provisionedState(result);
  recordInstanceEvent(context, vci, provisionEvent(before, state));
  if (state.status !== 'True') {
    ctx.logger.warn({ reason: state.reason, message: state.message }, 'control plane not ready');
    return notProvisionedOutcome(state);
  }
  const stall = syncStall(validated, refusals(context, vci, validated));
  if (stall) {
    await releaseInstance(context, key, vci);
    return withProvisioned(stalledOutcome(stall), state);
  }
  // Before a syncer starts on this replica (after a restart, a takeover, a sleep that failed
  // half-way): none of what it wrote is left labelled asleep. Not while a new identity waits for
  // its permissions (it wrote nothing yet, and may not list yet).
  if (!context.supervisor.get(key) && !context.permissionWaits.has(key))
    await wakeSyncedHostObjects(context, vci, ctx);
  const { connection, access } = await adminConnectionOf(context.api, vci);
  const outcome = await runSyncer(
    context,
    vci,
    {
      connection,
      access,
      configText: text,
      syncConfig: validated?.config ?? null,
      probe: (_client, reached) => readyzProbe(reached, context.probeTimeoutMs),
    },
    ctx,
  );
  return withProvisioned(outcome, state);
}

/** The connection the provisioner's admin Secret gives, or why there is none (yet). */
async function adminConnectionOf(
  api: KubeApi,
  vci: Stored<VirtualClusterInstance>,
): Promise<{ connection?: Connection; access: ClusterAccess }> {
  const name = vci.metadata.name ?? '';
  try {
    const secret = await readCredentialsSecret(
      api,
      vci.metadata.namespace ?? '',
      provisionedAdminSecretName(name),
    );
    return {
      connection: provisionedConnection(name, secret),
      access: { phase: 'probed', reachability: { reachable: true, username: '' } },
    };
  } catch (err) {
    if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
    return { access: { phase: 'noCredentials', reason: err.name, message: err.message } };
  }
}

/**
 * A provisioned instance being deleted: its syncer stopped, what the syncer wrote on the host
 * deleted (as the syncer's own identity, which may do exactly that), the identity removed, then
 * the control plane with its storage and Secrets. Each step is idempotent; a failure retries
 * them all, and the finalizer stays until every one is done.
 */
export async function cleanupProvisioned(
  context: VirtualClusterContext,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<void> {
  const key = objectKey(vci);
  context.permissionWaits.delete(key);
  await context.supervisor.stop(key);
  context.syncerActivity.delete(key);
  const deleted = await deleteSyncedHostObjects(context, vci);
  await releaseInstance(context, key, vci);
  await provisioning.provisioner.remove(provisionedOf(vci));
  ctx.logger.info({ hostObjectsDeleted: deleted }, 'virtual cluster deprovisioned');
  recordInstanceEvent(context, vci, {
    type: 'Normal',
    reason: 'Deprovisioned',
    action: 'Deprovision',
    note: `the control plane, its storage and its Secrets are removed, and ${deleted} object(s) its syncer wrote on the host`,
  });
}
