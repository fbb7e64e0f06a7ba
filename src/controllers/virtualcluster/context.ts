import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { VirtualClusterTemplate } from '../../api/virtualclustertemplate.ts';
import type { ProvisionedInstance, Provisioner } from '../../provision/provisioner.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { EventInput, EventRecorder } from '../../runtime/events.ts';
import type { KubeClient } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import type { SyncerSupervisor } from './supervisor.ts';
import {
  currentIdentity,
  deleteIdentityObjects,
  identityLeftBy,
  type SyncerIdentityStores,
} from './syncer-identity.ts';
import type { ServiceAccountTokens } from './token.ts';

/** What the operator provisions instances with (absent: `--provisioner none`). */
export interface Provisioning {
  provisioner: Provisioner;
  /** The VirtualClusterTemplates (cluster-scoped), by name. */
  templates: Store<Stored<VirtualClusterTemplate>>;
  /** Run a kube-controller-manager beside each virtual apiserver. */
  controllerManager: boolean;
}

export interface VirtualClusterReconcilerDeps extends SyncerIdentityStores {
  /** `api`: the host cluster, as the controller (instances' status and finalizer, syncer identities, tokens). */
  clock: Clock;
  events: EventRecorder;
  instances: Store<Stored<VirtualClusterInstance>>;
  /** The instances whose host namespace is `namespace` (from the instances' cache). */
  instancesPlacedIn: (namespace: string) => readonly Stored<VirtualClusterInstance>[];
  /** The project label of a namespace, if it exists and has one (from a Namespace cache). */
  projectOf: (namespace: string) => string | undefined;
  /** A host client that presents the given tokens (the syncer's ServiceAccount's) and nothing else. */
  hostClientFor: (tokens: ServiceAccountTokens) => KubeClient;
  supervisor: SyncerSupervisor;
  /** Enqueues a key of this controller (a syncer's status changed). */
  enqueue: (key: string) => void;
  /** How long the reachability probe of a virtual cluster may take. */
  probeTimeoutMs?: number;
  /** Set when this operator provisions the instances without `spec.endpoint`. */
  provisioning?: Provisioning;
}

/** What reconciles of instances work with: the deps, and since when each starting syncer waits for its permissions (by key). */
export interface VirtualClusterContext extends VirtualClusterReconcilerDeps {
  permissionWaits: Map<string, number>;
  /**
   * When each instance's syncer on this replica last carried a change (by key, ms): its activity
   * for sleep mode, persisted in `status.lastActivity` at most once a minute (`sleep.ts`).
   */
  syncerActivity: Map<string, number>;
}

/** The instance as its provisioner knows it: namespace, name and uid. */
export const provisionedOf = (vci: Stored<VirtualClusterInstance>): ProvisionedInstance => ({
  namespace: vci.metadata.namespace ?? '',
  name: vci.metadata.name ?? '',
  ...(vci.metadata.uid ? { uid: vci.metadata.uid } : {}),
});

/** Records `event` (if any) regarding the instance; never fails the reconcile. */
export function recordInstanceEvent(
  context: Pick<VirtualClusterContext, 'events'>,
  vci: Stored<VirtualClusterInstance>,
  event: EventInput | undefined,
): void {
  if (!event) return;
  const { namespace, name, uid } = vci.metadata;
  void context.events.record(
    { apiVersion: vci.apiVersion, kind: 'VirtualClusterInstance', namespace, name, uid },
    event,
  );
}

/** No syncer and no identity any more (the scaffold then removes the finalizer). */
export async function releaseInstance(
  context: VirtualClusterContext,
  key: string,
  vci: Stored<VirtualClusterInstance> | undefined,
): Promise<void> {
  context.permissionWaits.delete(key);
  await context.supervisor.stop(key);
  context.syncerActivity.delete(key);
  await deleteIdentityObjects(
    context.api,
    vci ? currentIdentity(context, vci) : identityLeftBy(context, key),
  );
}
