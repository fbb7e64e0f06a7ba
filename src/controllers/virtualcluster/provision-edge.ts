import type { Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { type ClusterAccess, readCredentialsSecret } from '../../clusters/access.ts';
import { type Connection, CredentialsMissing, InvalidCredentials } from '../../clusters/connection.ts';
import { provisionedAdminSecretName, provisionedConnection } from '../../clusters/provisioned-connection.ts';
import type { ProvisionedInstance } from '../../provision/provisioner.ts';
import { findCondition } from '../../runtime/conditions.ts';
import type { ReconcileContext } from '../../runtime/controller.ts';
import { errorReason, isNotFound, LeaderElectionLostError } from '../../runtime/errors.ts';
import type { EventInput } from '../../runtime/events.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectKey, objectPath } from '../../runtime/kube-client.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import { type SyncConfigValidation, validateSyncConfig } from '../../sync/config.ts';
import { RESOURCES } from '../../sync/controllers/syncer-caches.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../sync/names.ts';
import { placementClaims, placementOf, placementProblems } from '../../sync/placement.ts';
import { type Provisioning, releaseInstance, type VirtualClusterContext } from './context.ts';
import { stalledOutcome, syncStall } from './desired.ts';
import {
  notProvisionedOutcome,
  PROVISIONED_CONDITION,
  type ProvisionResult,
  provisionEvent,
  provisionedConfigText,
  provisionedState,
  provisioningEvent,
  syncedPlaces,
  withProvisioned,
} from './provisioned.ts';
import { readyzProbe } from './readyz.ts';
import { currentIdentity } from './syncer-identity.ts';
import { runSyncer } from './syncer-run.ts';
import { ServiceAccountTokens } from './token.ts';

/**
 * The edge of a provisioned instance (no `spec.endpoint`): its template from the cache, the
 * provisioner's `ensure`, the admin Secret it wrote, then the syncer exactly as for a registered
 * instance (`runSyncer`), `Ready` from the virtual apiserver's `/readyz`. Deletion undoes it in
 * order: syncer, what the syncer wrote on the host, its identity, the control plane.
 */

type Deps = Pick<VirtualClusterContext, 'projectOf' | 'instancesPlacedIn'>;

const provisionedOf = (vci: Stored<VirtualClusterInstance>): ProvisionedInstance => ({
  namespace: vci.metadata.namespace ?? '',
  name: vci.metadata.name ?? '',
  ...(vci.metadata.uid ? { uid: vci.metadata.uid } : {}),
});

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

/** What a stalled provisioned instance is looked at again for: its template, and its placement. */
export function provisionedStalledOn(
  deps: Deps,
  provisioning: Provisioning,
  vci: Stored<VirtualClusterInstance>,
): string {
  const { template, validated } = configOf(provisioning, vci);
  return JSON.stringify([template?.metadata.resourceVersion ?? null, refusals(deps, vci, validated)]);
}

function record(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  event: EventInput | undefined,
) {
  if (!event) return;
  const { namespace, name, uid } = vci.metadata;
  void context.events.record(
    { apiVersion: vci.apiVersion, kind: 'VirtualClusterInstance', namespace, name, uid },
    event,
  );
}

/** Converges a provisioned instance: its control plane (made, started, repaired), then its syncer. */
export async function reconcileProvisioned(
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
  record(context, vci, provisioningEvent(before));
  let result: ProvisionResult;
  try {
    const options = { controllerManager: provisioning.controllerManager };
    result = { kind: 'ensured', status: await provisioning.provisioner.ensure(provisionedOf(vci), options) };
  } catch (error) {
    if (error instanceof LeaderElectionLostError) throw error;
    result = { kind: 'failed', error };
  }
  const state = provisionedState(result);
  record(context, vci, provisionEvent(before, state));
  if (state.status !== 'True') {
    ctx.logger.warn({ reason: state.reason, message: state.message }, 'control plane not ready');
    return notProvisionedOutcome(state);
  }
  const stall = syncStall(validated, refusals(context, vci, validated));
  if (stall) {
    await releaseInstance(context, key, vci);
    return withProvisioned(stalledOutcome(stall), state);
  }
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
  const deleted = await deleteSyncedHostObjects(context, vci);
  await releaseInstance(context, key, vci);
  await provisioning.provisioner.remove(provisionedOf(vci));
  ctx.logger.info({ hostObjectsDeleted: deleted }, 'virtual cluster deprovisioned');
  record(context, vci, {
    type: 'Normal',
    reason: 'Deprovisioned',
    action: 'Deprovision',
    note: `the control plane, its storage and its Secrets are removed, and ${deleted} object(s) its syncer wrote on the host`,
  });
}

interface HostObject {
  metadata?: { name?: string; uid?: string; annotations?: Record<string, string> };
}

/**
 * Deletes every host object the instance's syncer wrote: in each namespace and of each kind its
 * identity may write, those labelled managed by this virtual cluster and carrying the name of
 * their virtual object (what the syncer marks its own with). Listed and deleted as the syncer's
 * ServiceAccount, so nothing outside what the syncer could touch is touched. Returns how many.
 */
async function deleteSyncedHostObjects(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
): Promise<number> {
  const identity = currentIdentity(context, vci);
  const account = identity.serviceAccounts[0]?.metadata;
  if (!account?.name || !account.namespace) return 0;
  const tokens = new ServiceAccountTokens({
    api: context.api,
    namespace: account.namespace,
    serviceAccount: account.name,
    clock: context.clock,
  });
  const client = context.hostClientFor(tokens);
  const { vclusterName } = placementOf(vci);
  let deleted = 0;
  try {
    for (const { namespace, kind } of syncedPlaces(identity.roleBindings)) {
      const resource = RESOURCES[kind];
      const list = await client.request<{ items?: HostObject[] }>({
        method: 'GET',
        path: collectionPath(resource, namespace),
        query: { labelSelector: `${LABEL_MANAGED_BY}=${vclusterName}` },
      });
      for (const item of list.items ?? []) {
        if (!item.metadata?.name || !item.metadata.annotations?.[ANNOTATION_OBJECT_NAME]) continue;
        try {
          await client.request({
            method: 'DELETE',
            path: objectPath(resource, namespace, item.metadata.name),
            body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: item.metadata.uid } },
          });
          deleted += 1;
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }
    }
  } catch (err) {
    throw new Error(`could not delete what the syncer wrote on the host: ${errorReason(err)}`);
  } finally {
    client.close();
  }
  return deleted;
}
