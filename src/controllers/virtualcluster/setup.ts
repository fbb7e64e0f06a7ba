import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { ControllerDeps } from '../common.ts';
import { resources, type Stored } from '../resources.ts';
import { SyncerSupervisor, syncerFactory, virtualClusterReconciler } from './reconcile.ts';

/**
 * The VirtualClusterInstance controller: primary VirtualClusterInstances; each one with
 * credentials and a configuration gets a syncer (see `virtualClusterReconciler`). The syncers
 * live while this controller runs: when it stops (shutdown, leadership lost) they stop with it,
 * and the next leader starts its own.
 */
export function setupVirtualClusterController(manager: Manager, deps: ControllerDeps) {
  const scope = deps.namespace ? { namespace: deps.namespace } : {};
  const instances = manager.informer<Stored<VirtualClusterInstance>>(
    resources.virtualClusterInstances,
    scope,
  );
  const startSyncer = syncerFactory({ manager, host: deps.api });
  // The syncer's writes into the virtual cluster are fenced like the host's (deps.api): none
  // goes out once this replica stopped leading.
  const supervisor = new SyncerSupervisor((input) =>
    startSyncer({ ...input, virtual: manager.leaderApi(input.virtual) }),
  );
  let enqueue: (key: string) => void = () => {};
  const controller = manager.controller({
    name: 'virtualcluster',
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? 2,
    reconcile: virtualClusterReconciler({
      api: deps.api,
      clock: deps.clock,
      instances: instances.store,
      supervisor,
      enqueue: (key) => enqueue(key),
    }),
  });
  enqueue = (key) => controller.enqueue(key);
  controller.watchPrimary(instances);
  // Stopping the controller stops its syncers (a syncer must not outlive its leader).
  const stopController = controller.stop.bind(controller);
  controller.stop = async (drainTimeoutMs?: number) => {
    await stopController(drainTimeoutMs);
    await supervisor.stopAll();
  };
  return { controller, instances, supervisor };
}
