import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { Controller, ReconcileResult, Reconciler } from '../../runtime/controller.ts';
import { FencedKubeApi, type WriteFence } from '../../runtime/fencing.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey } from '../../runtime/kube-client.ts';
import { type Lease, leaseResource } from '../../runtime/leader-election.ts';
import { LeaseShares, SHARE_GROUP_LABEL } from '../../runtime/lease-shares.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { SyncerSupervisor } from './supervisor.ts';

/** The share group of the virtual clusters (its Leases' name prefix): `<leader lease>-virtualclusters`. */
export const virtualClusterShareGroup = (leaseName: string) => `${leaseName}-virtualclusters`;

/**
 * The virtual clusters shared out between the live controller replicas (see `LeaseShares`), or
 * undefined without leader election (one replica: it holds them all). Each instance's controller
 * key is enqueued when this replica's term for it begins or ends.
 */
export function shareVirtualClusters(
  manager: Manager,
  instances: Informer<Stored<VirtualClusterInstance>>,
  enqueue: (key: string) => void,
): { shares: LeaseShares; leases: Informer<Lease> } | undefined {
  const election = manager.leaderElection;
  if (!election) return undefined;
  const group = virtualClusterShareGroup(election.name);
  const leases = manager.informer<Lease>(leaseResource, {
    namespace: election.namespace,
    labelSelector: `${SHARE_GROUP_LABEL}=${group}`,
  });
  const shares = new LeaseShares({
    api: manager.cluster.api,
    clock: manager.clock,
    random: manager.random,
    logger: manager.logger.child({ shareGroup: group }),
    election: { ...election, name: group },
    leases,
    keys: () => instances.store.list().map(objectKey),
    onAcquired: enqueue,
    onLost: enqueue,
  });
  // Instances come and go in bursts (the first list): one reassignment per burst.
  let pending = false;
  const refreshSoon = () => {
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      shares.refresh();
    });
  };
  instances.addEventHandler({ onAdd: refreshSoon, onDelete: refreshSoon });
  return { shares, leases };
}

/**
 * The controller's reconciler when the instances are shared: a key this replica holds no term
 * for only has its syncer here stopped (no write); a held key is reconciled by a reconciler of
 * its term (`forTerm`, made once per term), whose writes go through the term's fence, so none
 * goes out once another replica may hold the key.
 */
export function sharedReconciler(
  shares: LeaseShares,
  supervisor: SyncerSupervisor,
  forTerm: (fenced: (api: KubeApi) => KubeApi) => Reconciler,
): Reconciler {
  const byKey = new Map<string, { fence: WriteFence; reconcile: Reconciler }>();
  return async (key, ctx): Promise<ReconcileResult | undefined> => {
    const fence = shares.fence(key);
    if (!fence) {
      byKey.delete(key);
      await supervisor.stop(key);
      return undefined;
    }
    let term = byKey.get(key);
    if (term?.fence !== fence) {
      // A new term: what the syncer of the last one holds (caches, tokens) is not carried over.
      await supervisor.stop(key);
      term = { fence, reconcile: forTerm((api) => new FencedKubeApi(api, fence)) };
      byKey.set(key, term);
    }
    return (await term.reconcile(key, ctx)) ?? undefined;
  };
}

/**
 * Runs the shares with the controller: from when the instances' and the leases' caches have
 * synced (an assignment over a partial list would take keys only to give them back) until the
 * controller stopped (its syncers first, then the Leases are released).
 */
export function runSharesWithController(
  controller: Controller,
  shares: LeaseShares,
  informers: readonly Pick<Informer, 'waitForSync'>[],
  supervisor: SyncerSupervisor,
): void {
  const stopShares = new AbortController();
  let running: Promise<void> | undefined;
  const startController = controller.start.bind(controller);
  controller.start = (signal?: AbortSignal) => {
    running ??= (async () => {
      const synced = await Promise.all(informers.map((informer) => informer.waitForSync(stopShares.signal)));
      if (synced.every(Boolean)) await shares.run(stopShares.signal);
    })();
    return startController(signal);
  };
  const stopController = controller.stop.bind(controller);
  controller.stop = async (drainTimeoutMs?: number) => {
    await stopController(drainTimeoutMs);
    await supervisor.stopAll();
    stopShares.abort();
    await running;
  };
}
