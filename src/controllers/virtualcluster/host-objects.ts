import { PatchStrategy } from '@kubernetes/client-node';
import { SLEEPING_LABEL } from '../../api/labels.ts';
import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { errorReason, isNotFound } from '../../runtime/errors.ts';
import { collectionPath, type KubeClient, objectPath, type ResourceRef } from '../../runtime/kube-client.ts';
import { RESOURCES } from '../../sync/controllers/syncer-caches.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../sync/names.ts';
import { placementOf } from '../../sync/placement.ts';
import type { VirtualClusterContext } from './context.ts';
import { syncedPlaces } from './provisioned.ts';
import { currentIdentity } from './syncer-identity.ts';
import { ServiceAccountTokens } from './token.ts';

/**
 * What an instance's syncer wrote on the host, reached as the syncer's own ServiceAccount (never
 * the controller's identity), so nothing the syncer could not touch is touched: deleted with the
 * instance, labelled `sleepmode.platform/sleeping` while it sleeps and unlabelled when it wakes.
 * The syncer's objects are those labelled managed by this virtual cluster and carrying the name of
 * their virtual object, in each namespace and kind its RoleBindings allow.
 */

interface HostObject {
  metadata?: {
    name?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

type Visit = (
  client: KubeClient,
  resource: ResourceRef,
  namespace: string,
  item: HostObject,
) => Promise<boolean>;

/**
 * Calls `visit` with each of the syncer's host objects matching `selector` (besides managed-by),
 * as the syncer's ServiceAccount; returns how many visits did something. No identity: none.
 */
async function eachSyncedHostObject(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  selector: string | undefined,
  visit: Visit,
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
  const labelSelector = [`${LABEL_MANAGED_BY}=${vclusterName}`, ...(selector ? [selector] : [])].join(',');
  let done = 0;
  try {
    for (const { namespace, kind } of syncedPlaces(identity.roleBindings)) {
      const resource = RESOURCES[kind];
      const list = await client.request<{ items?: HostObject[] }>({
        method: 'GET',
        path: collectionPath(resource, namespace),
        query: { labelSelector },
      });
      for (const item of list.items ?? []) {
        if (!item.metadata?.name || !item.metadata.annotations?.[ANNOTATION_OBJECT_NAME]) continue;
        try {
          if (await visit(client, resource, namespace, item)) done += 1;
        } catch (err) {
          // Gone, or replaced by another object of its name (the uid precondition): not ours to touch.
          if (!isNotFound(err) && errorReason(err) !== 'Conflict') throw err;
        }
      }
    }
  } finally {
    client.close();
  }
  return done;
}

/** Deletes every host object the instance's syncer wrote; returns how many. */
export async function deleteSyncedHostObjects(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
): Promise<number> {
  try {
    return await eachSyncedHostObject(context, vci, undefined, async (client, resource, namespace, item) => {
      await client.request({
        method: 'DELETE',
        path: objectPath(resource, namespace, item.metadata?.name ?? ''),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: item.metadata?.uid } },
      });
      return true;
    });
  } catch (err) {
    throw new Error(`could not delete what the syncer wrote on the host: ${errorReason(err)}`);
  }
}

/**
 * Labels every host object the instance's syncer wrote `sleepmode.platform/sleeping: "true"`
 * (`sleeping`), or removes that label (not `sleeping`): only objects not so yet are written, each
 * by a merge patch carrying its uid (a same-named replacement is refused). Returns how many.
 */
export async function markSyncedHostObjects(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  sleeping: boolean,
): Promise<number> {
  try {
    return await eachSyncedHostObject(
      context,
      vci,
      sleeping ? `${SLEEPING_LABEL}!=true` : SLEEPING_LABEL,
      async (client, resource, namespace, item) => {
        await client.request({
          method: 'PATCH',
          path: objectPath(resource, namespace, item.metadata?.name ?? ''),
          body: {
            metadata: { uid: item.metadata?.uid, labels: { [SLEEPING_LABEL]: sleeping ? 'true' : null } },
          },
          contentType: PatchStrategy.MergePatch,
        });
        return true;
      },
    );
  } catch (err) {
    const what = sleeping ? 'label' : 'unlabel';
    throw new Error(`could not ${what} what the syncer wrote on the host as sleeping: ${errorReason(err)}`);
  }
}
