import type { Cluster } from '../../api/cluster.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import { addController, type ControllerDeps, reconcilerDeps } from '../common.ts';
import { clusterReconciler } from './reconcile.ts';

/**
 * The connected-cluster controller: primary Clusters (cluster-scoped), nothing else watched.
 * Credentials Secrets are read per reconcile, not watched (no cache of every Secret): a changed
 * Secret is found by the next probe, within 10 s while the cluster is not Ready.
 */
export function setupClusterController(manager: Manager, deps: ControllerDeps) {
  const clusters = manager.informer<Stored<Cluster>>(resources.clusters);
  const reconcile = clusterReconciler({ ...reconcilerDeps(deps), clusters: clusters.store });
  const controller = addController(manager, deps, { name: 'cluster', workers: 4, reconcile });
  // Its own status writes (a probe's outcome) would only probe again at once; what it probes
  // follows from the spec.
  controller.watchPrimary(clusters, { predicates: [anyOf(generationChanged, lifecycleChanged)] });
  return { controller, clusters };
}
