import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import type { Manager } from '../../runtime/manager.ts';
import { platformConfigInformer, platformConfigReader } from '../platform-config.ts';
import { resources, type Stored } from '../resources.ts';
import type { ControllerDeps } from '../sharedsecret/setup.ts';
import { accessKeyReconciler } from './reconcile.ts';

/**
 * The access key lifecycle controller: primary OwnedAccessKeys (cluster-scoped); a change of the
 * platform configuration Secret re-evaluates every key's deadline.
 */
export function setupAccessKeyController(manager: Manager, deps: ControllerDeps) {
  const keys = manager.informer<Stored<OwnedAccessKey>>(resources.ownedAccessKeys);
  const platformNamespace = deps.platformNamespace ?? 'platform-system';
  const config = platformConfigInformer(manager, platformNamespace);
  const controller = manager.controller({
    name: 'accesskey',
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? 2,
    reconcile: accessKeyReconciler({
      api: deps.api,
      clock: deps.clock,
      events: deps.events,
      keys: keys.store,
      config: platformConfigReader(config, platformNamespace),
    }),
  });
  controller.watchPrimary(keys).watch(config, () => keys.store.keys());
  return { controller };
}
