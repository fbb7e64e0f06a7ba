import type { V1Namespace, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { INSTANCE_UID_LABEL, PROJECT_LABEL } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { ownValue } from '../../runtime/json.ts';
import { objectKey } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import { namedHostNamespaces, placementOf } from '../../sync/placement.ts';
import { addController, type ControllerDeps, reconcilerDeps, watchScope } from '../common.ts';
import { asksToBeSynced } from './desired.ts';
import { instanceKeyOf } from './identity.ts';
import { validatedConfig, virtualClusterReconciler } from './reconcile.ts';
import { SyncerSupervisor, syncerFactory } from './supervisor.ts';
import { BY_INSTANCE_UID } from './syncer-identity.ts';
import { clientWithTokens } from './token.ts';

const BY_HOST_NAMESPACE = 'host-namespace';
/** The namespaces whose project decides whether an instance's placement is allowed (its own, those it names). */
const BY_PLACEMENT_NAMESPACE = 'placement-namespace';

/** Those namespaces, for an instance that asks to be synced (no other depends on a namespace). */
function placementNamespaces(vci: Stored<VirtualClusterInstance>): string[] {
  if (!asksToBeSynced(vci)) return [];
  const named = namedHostNamespaces(vci, validatedConfig(vci)?.config ?? null).map((n) => n.namespace);
  return [...new Set([vci.metadata.namespace ?? '', ...named])];
}

/** The other instances under the same placement as `vci` (one of them holds it, the others are refused). */
function samePlacement(
  vci: Stored<VirtualClusterInstance>,
  placedIn: (namespace: string) => readonly Stored<VirtualClusterInstance>[],
): string[] {
  const { hostNamespace, vclusterName } = placementOf(vci);
  return placedIn(hostNamespace)
    .filter(
      (other) => other.metadata.uid !== vci.metadata.uid && placementOf(other).vclusterName === vclusterName,
    )
    .map(objectKey);
}

/**
 * The VirtualClusterInstance controller: primary VirtualClusterInstances; each one with
 * credentials and a configuration gets a syncer (see `virtualClusterReconciler`) acting as its
 * own ServiceAccount, whose ServiceAccount and RoleBindings (labelled with the instance's uid)
 * map back to the instance. The syncers live while this controller runs: when it stops
 * (shutdown, leadership lost) they stop with it, and the next leader starts its own.
 */
export function setupVirtualClusterController(manager: Manager, deps: ControllerDeps) {
  const kubeConfig = deps.kubeConfig;
  if (!kubeConfig) throw new Error('the virtualcluster controller needs the kubeconfig of the host cluster');
  const scope = watchScope(deps);
  const instances = manager.informer<Stored<VirtualClusterInstance>>(
    resources.virtualClusterInstances,
    scope,
    {
      [BY_HOST_NAMESPACE]: (vci) => [placementOf(vci).hostNamespace],
      [BY_PLACEMENT_NAMESPACE]: placementNamespaces,
    },
  );
  const placedIn = (namespace: string) => instances.store.byIndex(BY_HOST_NAMESPACE, namespace);
  // Cluster-wide unless the controller watches one namespace: a syncer's host namespace may be
  // another of its project's namespaces.
  const byUid = {
    [BY_INSTANCE_UID]: (obj: V1ServiceAccount | V1RoleBinding) => [
      obj.metadata?.labels?.[INSTANCE_UID_LABEL] ?? '',
    ],
  };
  const serviceAccounts = manager.informer<V1ServiceAccount>(
    resources.serviceAccounts,
    { ...scope, labelSelector: INSTANCE_UID_LABEL },
    byUid,
  );
  const roleBindings = manager.informer<V1RoleBinding>(
    resources.roleBindings,
    { ...scope, labelSelector: INSTANCE_UID_LABEL },
    byUid,
  );
  // Which project each namespace belongs to (the label the project controller sets), so no syncer
  // runs outside its project even if admission was bypassed.
  const namespaces = manager.informer<V1Namespace>(resources.namespaces, {});
  const startSyncer = syncerFactory({ manager });
  // The syncer's writes are fenced like the controller's: none goes out, to the virtual cluster
  // or to the host, once this replica stopped leading.
  const supervisor = new SyncerSupervisor((input) =>
    startSyncer({ ...input, virtual: manager.leaderApi(input.virtual), host: manager.leaderApi(input.host) }),
  );
  let enqueue: (key: string) => void = () => {};
  const reconcile = virtualClusterReconciler({
    ...reconcilerDeps(deps),
    instances: instances.store,
    serviceAccounts: serviceAccounts.store,
    roleBindings: roleBindings.store,
    instancesPlacedIn: placedIn,
    projectOf: (namespace) =>
      ownValue(namespaces.store.get(namespace)?.metadata?.labels ?? {}, PROJECT_LABEL) || undefined,
    hostClientFor: (tokens) => clientWithTokens(kubeConfig, tokens),
    supervisor,
    enqueue: (key) => enqueue(key),
  });
  const controller = addController(manager, deps, { name: 'virtualcluster', workers: 2, reconcile });
  const specOrLifecycle = [anyOf(generationChanged, lifecycleChanged)];
  enqueue = (key) => controller.enqueue(key);
  controller
    // Its own status writes would only probe and check the syncer again at once; what it does
    // follows from the spec, and its deletion (which frees a placement too).
    .watchPrimary(instances, { predicates: specOrLifecycle })
    .watch(serviceAccounts, instanceKeyOf)
    .watch(roleBindings, instanceKeyOf)
    // A namespace changing project may allow or forbid the instances in it or naming it.
    .watch(namespaces, (namespace) =>
      instances.store.byIndex(BY_PLACEMENT_NAMESPACE, namespace.metadata?.name ?? '').map(objectKey),
    )
    // An instance that comes, goes or moves may take or free the placement of others (the instance
    // created first holds it): they are looked at again, stalled or not.
    .watch(instances, (vci) => samePlacement(vci, placedIn), { predicates: specOrLifecycle });
  // Stopping the controller stops its syncers (a syncer must not outlive its leader).
  const stopController = controller.stop.bind(controller);
  controller.stop = async (drainTimeoutMs?: number) => {
    await stopController(drainTimeoutMs);
    await supervisor.stopAll();
  };
  return { controller, instances, supervisor };
}
