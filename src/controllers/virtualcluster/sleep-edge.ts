import { resources, type Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import type { ReconcileContext } from '../../runtime/controller.ts';
import { isNotFound } from '../../runtime/errors.ts';
import { objectKey, objectPath } from '../../runtime/kube-client.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import {
  type Provisioning,
  provisionedOf,
  recordInstanceEvent,
  type VirtualClusterContext,
} from './context.ts';
import { markSyncedHostObjects } from './host-objects.ts';
import { asleepOutcome, SLEEPING_REASON, type SleepDecision, sleepEvent } from './sleep.ts';

/**
 * The edges of sleep mode (the decisions are `sleep.ts`'s): putting an instance to sleep and
 * keeping it so, the host objects of a waking one, and its deletion for inactivity.
 */

/**
 * Asleep: the syncer stopped (its identity kept: it labels now and unlabels on wake), the control
 * plane stopped (`provisioner.stop`: storage and Secrets kept), every host object the syncer
 * wrote labelled sleeping. Idempotent, so an asleep instance looked at again repairs what a
 * failure or a restart left; `FellAsleep` only when it falls asleep now.
 */
export async function putToSleep(
  context: VirtualClusterContext,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
  decision: SleepDecision,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const key = objectKey(vci);
  context.permissionWaits.delete(key);
  await context.supervisor.stop(key);
  // What it carried up to its stop was before the decision to sleep, not activity after it.
  context.syncerActivity.delete(key);
  await provisioning.provisioner.stop(provisionedOf(vci));
  const labelled = await markSyncedHostObjects(context, vci, true);
  if (decision.action === 'sleep') {
    ctx.logger.info({ reason: decision.reason, hostObjectsLabelled: labelled }, 'virtual cluster asleep');
    recordInstanceEvent(context, vci, sleepEvent(decision));
  }
  return asleepOutcome(decision);
}

/**
 * Before a syncer starts for an instance (on wake, or on this replica for the first time): the
 * sleeping label is removed from what it wrote, so the syncer finds its objects as it left them.
 */
export async function wakeSyncedHostObjects(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<void> {
  const unlabelled = await markSyncedHostObjects(context, vci, false);
  if (unlabelled > 0) ctx.logger.info({ hostObjectsUnlabelled: unlabelled }, 'host objects awake');
}

/**
 * Inactive for `spec.deleteAfter`: the instance is deleted (the one read: uid precondition), with
 * a `DeletedForInactivity` Event; its finalizer then removes everything, as for any deletion.
 * Nothing of its status is written.
 */
export async function deleteForInactivity(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  decision: SleepDecision,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  recordInstanceEvent(context, vci, sleepEvent(decision));
  ctx.logger.info({ lastActivity: decision.lastActivity }, 'deleting the virtual cluster for inactivity');
  try {
    await context.api.request({
      method: 'DELETE',
      path: objectPath(resources.virtualClusterInstances, vci.metadata.namespace, vci.metadata.name ?? ''),
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: vci.metadata.uid } },
    });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return {
    deleted: true,
    ready: { status: 'False', reason: SLEEPING_REASON, message: 'deleted for inactivity' },
  };
}
