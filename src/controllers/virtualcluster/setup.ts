import type { V1Namespace, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { INSTANCE_UID_LABEL, PROJECT_LABEL } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { VirtualClusterTemplate } from '../../api/virtualclustertemplate.ts';
import { LeaderElectionLostError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { FencedKubeApi } from '../../runtime/fencing.ts';
import { asFieldManager, fieldManagers } from '../../runtime/field-managers.ts';
import type { Informer } from '../../runtime/informer.ts';
import { ownValue } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey } from '../../runtime/kube-client.ts';
import type { LeaseShares } from '../../runtime/lease-shares.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, type EventPredicate, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import type { Store } from '../../runtime/store.ts';
import { namedHostNamespaces, placementOf } from '../../sync/placement.ts';
import { addController, type ControllerDeps, watchScope } from '../common.ts';
import type { Provisioning } from './context.ts';
import { asksToBeSynced } from './desired.ts';
import { instanceKeyOf } from './identity.ts';
import { isProvisioned, validatedConfig, virtualClusterReconciler } from './reconcile.ts';
import { runSharesWithController, sharedReconciler, shareVirtualClusters } from './sharing.ts';
import { sleepAnnotationsChanged } from './sleep.ts';
import { SyncerSupervisor, syncerFactory } from './supervisor.ts';
import { BY_INSTANCE_UID } from './syncer-identity.ts';
import { clientWithTokens } from './token.ts';

const BY_HOST_NAMESPACE = 'host-namespace';
/** The instances made from a VirtualClusterTemplate, by its name. */
const BY_TEMPLATE = 'template';
/** The namespaces whose project decides whether an instance's placement is allowed (its own, those it names). */
const BY_PLACEMENT_NAMESPACE = 'placement-namespace';

/**
 * Those namespaces, for an instance that asks to be synced or is provisioned (no other depends
 * on a namespace); of a provisioned one whose config is its template's, its own namespace.
 */
function placementNamespaces(vci: Stored<VirtualClusterInstance>): string[] {
  if (!asksToBeSynced(vci) && !isProvisioned(vci)) return [];
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

/** Besides spec and lifecycle: a sleep request, and the wake request (activity while asleep); sleep.ts. */
const sleepRequests: EventPredicate<Stored<VirtualClusterInstance>> = {
  update: (oldObj, newObj) => sleepAnnotationsChanged(oldObj, newObj),
};

/** The caches the controller reads and watches. */
function virtualClusterCaches(manager: Manager, deps: ControllerDeps) {
  const scope = watchScope(deps);
  const instances = manager.informer<Stored<VirtualClusterInstance>>(
    resources.virtualClusterInstances,
    scope,
    {
      [BY_HOST_NAMESPACE]: (vci) => [placementOf(vci).hostNamespace],
      [BY_PLACEMENT_NAMESPACE]: placementNamespaces,
      [BY_TEMPLATE]: (vci) => (vci.spec.templateRef ? [vci.spec.templateRef.name] : []),
    },
  );
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
  // Only an operator that provisions reads templates (cluster-scoped; what its RBAC must allow).
  const templates = deps.provisioner
    ? manager.informer<Stored<VirtualClusterTemplate>>(resources.virtualClusterTemplates, {})
    : undefined;
  return { instances, serviceAccounts, roleBindings, namespaces, templates };
}

/**
 * The VirtualClusterInstance controller: primary VirtualClusterInstances; each one with
 * credentials and a configuration gets a syncer (see `virtualClusterReconciler`) acting as its
 * own ServiceAccount, whose ServiceAccount and RoleBindings (labelled with the instance's uid)
 * map back to the instance.
 *
 * With leader election the controller runs on every replica and the instances are shared out
 * between the live replicas (`shareVirtualClusters`; docs/adr on sharing them): an instance is
 * reconciled, and its syncer run, only by the replica holding its Lease, every write of it fenced
 * by that replica's term. Without, one replica holds them all. The syncers stop with the
 * controller (shutdown) and when their instance's term ends.
 */
export function setupVirtualClusterController(manager: Manager, deps: ControllerDeps) {
  const kubeConfig = deps.kubeConfig;
  if (!kubeConfig) throw new Error('the virtualcluster controller needs the kubeconfig of the host cluster');
  const caches = virtualClusterCaches(manager, deps);
  const { instances, serviceAccounts, roleBindings, namespaces, templates } = caches;
  const placedIn = (namespace: string) => instances.store.byIndex(BY_HOST_NAMESPACE, namespace);
  let enqueue: (key: string) => void = () => {};
  const shared = shareVirtualClusters(manager, instances, (key) => enqueue(key));
  const startSyncer = syncerFactory({ manager });
  // A syncer's writes, to the virtual cluster and to the host, are fenced like the controller's:
  // by this replica's term for its instance when the instances are shared (none goes out once
  // another replica may run it), else by leadership.
  const supervisor = new SyncerSupervisor((input) => {
    const fenced = syncerFence(manager, shared?.shares, input.key);
    return startSyncer({ ...input, virtual: fenced(input.virtual), host: fenced(input.host) });
  });
  const reconcilerFor = (api: KubeApi, events: EventRecorder) =>
    virtualClusterReconciler({
      api,
      clock: deps.clock,
      events,
      instances: instances.store,
      serviceAccounts: serviceAccounts.store,
      roleBindings: roleBindings.store,
      instancesPlacedIn: placedIn,
      projectOf: (namespace) =>
        ownValue(namespaces.store.get(namespace)?.metadata?.labels ?? {}, PROJECT_LABEL) || undefined,
      hostClientFor: (tokens) => clientWithTokens(kubeConfig, tokens),
      supervisor,
      enqueue: (key) => enqueue(key),
      ...provisioningOf(deps, templates),
    });
  // Shared, the controller runs on every replica; each instance is reconciled where it is held,
  // writing as the controller through that term's fence (not leadership's).
  const hostApi = asFieldManager(manager.cluster.api, fieldManagers.controller);
  const reconcile = shared
    ? sharedReconciler(shared.shares, supervisor, (fenced) => {
        const api = fenced(hostApi);
        return reconcilerFor(api, deps.events.through(api));
      })
    : reconcilerFor(deps.api, deps.events);
  const controller = addController(manager, deps, {
    name: 'virtualcluster',
    workers: 2,
    reconcile,
    needLeaderElection: shared === undefined,
  });
  const specOrLifecycle = [anyOf(generationChanged, lifecycleChanged)];
  enqueue = (key) => controller.enqueue(key);
  controller
    // Its own status writes would only probe and check the syncer again at once; what it does
    // follows from the spec, its deletion (which frees a placement too) and the sleep-mode
    // annotations that ask for a sleep or a wake at once.
    .watchPrimary(instances, { predicates: [anyOf(generationChanged, lifecycleChanged, sleepRequests)] })
    .watch(serviceAccounts, instanceKeyOf)
    .watch(roleBindings, instanceKeyOf)
    // A namespace changing project may allow or forbid the instances in it or naming it.
    .watch(namespaces, (namespace) =>
      instances.store.byIndex(BY_PLACEMENT_NAMESPACE, namespace.metadata?.name ?? '').map(objectKey),
    )
    // An instance that comes, goes or moves may take or free the placement of others (the instance
    // created first holds it): they are looked at again, stalled or not.
    .watch(instances, (vci) => samePlacement(vci, placedIn), { predicates: specOrLifecycle });
  // A template created later, changed or deleted: the instances made from it are looked at again.
  if (templates) controller.watch(templates, (template) => instancesOfTemplate(instances.store, template));
  if (shared) {
    runSharesWithController(controller, shared.shares, [instances, shared.leases], supervisor);
  } else {
    // Stopping the controller stops its syncers (a syncer must not outlive its leader).
    const stopController = controller.stop.bind(controller);
    controller.stop = async (drainTimeoutMs?: number) => {
      await stopController(drainTimeoutMs);
      await supervisor.stopAll();
    };
  }
  return { controller, instances, supervisor, shares: shared?.shares };
}

/** What provisions instances without `spec.endpoint`: set only when the operator has a provisioner. */
function provisioningOf(
  deps: ControllerDeps,
  templates: Informer<Stored<VirtualClusterTemplate>> | undefined,
): { provisioning?: Provisioning } {
  if (!deps.provisioner || !templates) return {};
  return {
    provisioning: {
      provisioner: deps.provisioner,
      templates: templates.store,
      // Namespace lifecycle and garbage collection in the virtual cluster, which no syncer does.
      controllerManager: true,
    },
  };
}

/** The keys of the instances made from `template`. */
function instancesOfTemplate(
  instances: Store<Stored<VirtualClusterInstance>>,
  template: Stored<VirtualClusterTemplate>,
): string[] {
  return instances.byIndex(BY_TEMPLATE, template.metadata?.name ?? '').map(objectKey);
}

/** How a syncer's clients are fenced: by its instance's term when shared, else by leadership. */
function syncerFence(
  manager: Manager,
  shares: LeaseShares | undefined,
  key: string,
): (api: KubeApi) => KubeApi {
  if (!shares) return (api) => manager.leaderApi(api);
  const fence = shares.fence(key);
  if (!fence)
    throw new LeaderElectionLostError(`no term for virtual cluster ${key}: its syncer may not start`);
  return (api) => new FencedKubeApi(api, fence);
}
