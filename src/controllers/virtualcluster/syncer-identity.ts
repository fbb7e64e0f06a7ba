import type { V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { resources, type Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { applyObject } from '../../runtime/apply.ts';
import { isNotFound } from '../../runtime/errors.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectPath, type ResourceRef } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { instanceKeyOf, roleBindingMatches, type SyncerIdentity, serviceAccountMatches } from './identity.ts';

/** Index of the syncer identity objects (ServiceAccounts, RoleBindings) by the instance uid label. */
export const BY_INSTANCE_UID = 'virtualclusterinstance-uid';

/** Where the syncer identities live: the host cluster (as the controller) and the caches of them. */
export interface SyncerIdentityStores {
  api: KubeApi;
  /** The syncers' ServiceAccounts and RoleBindings (labelled with the instance uid, indexed by {@link BY_INSTANCE_UID}). */
  serviceAccounts: Store<V1ServiceAccount>;
  roleBindings: Store<V1RoleBinding>;
}

/** The syncer identity objects the caches hold for an instance, in any namespace. */
export function currentIdentity(stores: SyncerIdentityStores, vci: Stored<VirtualClusterInstance>) {
  return {
    serviceAccounts: stores.serviceAccounts.byIndex(BY_INSTANCE_UID, vci.metadata.uid ?? ''),
    roleBindings: stores.roleBindings.byIndex(BY_INSTANCE_UID, vci.metadata.uid ?? ''),
  };
}

/** The syncer identity objects the caches hold for an instance key (the instance gone). */
export function identityLeftBy(stores: SyncerIdentityStores, key: string) {
  const ofKey = (obj: V1ServiceAccount | V1RoleBinding) => instanceKeyOf(obj).includes(key);
  return {
    serviceAccounts: stores.serviceAccounts.list().filter(ofKey),
    roleBindings: stores.roleBindings.list().filter(ofKey),
  };
}

/** Applies what differs from the caches, removes what is no longer wanted (other kinds, other namespaces). */
export async function ensureIdentity(
  stores: SyncerIdentityStores,
  vci: Stored<VirtualClusterInstance>,
  desired: SyncerIdentity,
): Promise<void> {
  const current = currentIdentity(stores, vci);
  const at = (obj: { metadata?: { namespace?: string; name?: string } }) =>
    `${obj.metadata?.namespace}/${obj.metadata?.name}`;
  const apply = (obj: V1ServiceAccount | V1RoleBinding, resource: ResourceRef) =>
    applyObject(stores.api, obj, { fieldManager: fieldManagers.virtualCluster, force: true, resource });
  const cachedAccount = current.serviceAccounts.find((sa) => at(sa) === at(desired.serviceAccount));
  if (!serviceAccountMatches(cachedAccount, desired.serviceAccount))
    await apply(desired.serviceAccount, resources.serviceAccounts);
  const cachedBindings = new Map(current.roleBindings.map((binding) => [at(binding), binding]));
  await Promise.all(
    desired.roleBindings
      .filter((binding) => !roleBindingMatches(cachedBindings.get(at(binding)), binding))
      .map((binding) => apply(binding, resources.roleBindings)),
  );
  const wanted = new Set([desired.serviceAccount, ...desired.roleBindings].map(at));
  await deleteIdentityObjects(stores.api, {
    serviceAccounts: current.serviceAccounts.filter((sa) => !wanted.has(at(sa))),
    roleBindings: current.roleBindings.filter((binding) => !wanted.has(at(binding))),
  });
}

/** Deletes the objects (each only as the uid seen: one made again since stays). */
export async function deleteIdentityObjects(
  api: KubeApi,
  objects: ReturnType<typeof currentIdentity>,
): Promise<void> {
  const remove = async (resource: ResourceRef, obj: V1ServiceAccount | V1RoleBinding) => {
    try {
      await api.request({
        method: 'DELETE',
        path: objectPath(resource, obj.metadata?.namespace, obj.metadata?.name ?? ''),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: obj.metadata?.uid } },
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  };
  await Promise.all([
    ...objects.roleBindings.map((binding) => remove(resources.roleBindings, binding)),
    ...objects.serviceAccounts.map((sa) => remove(resources.serviceAccounts, sa)),
  ]);
}
