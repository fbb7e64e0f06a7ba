import type { V1Secret } from '@kubernetes/client-node';
import { PLATFORM_CONFIG_SECRET } from '../../api/config.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import type { Manager } from '../../runtime/manager.ts';
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
  const config = manager.informer<V1Secret>(resources.secrets, {
    namespace: platformNamespace,
    fieldSelector: `metadata.name=${PLATFORM_CONFIG_SECRET}`,
  });
  const controller = manager.controller({
    name: 'accesskey',
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? 2,
    reconcile: accessKeyReconciler({
      api: deps.api,
      clock: deps.clock,
      events: deps.events,
      keys: keys.store,
      configSecret: () => config.store.get(`${platformNamespace}/${PLATFORM_CONFIG_SECRET}`),
    }),
  });
  controller.watchPrimary(keys).watch(config, () => keys.store.keys());
  return { controller };
}
