import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { platformConfigSource } from '../../config/platform-config.ts';
import type { Manager } from '../../runtime/manager.ts';
import { addController, type ControllerDeps, DEFAULT_PLATFORM_NAMESPACE, reconcilerDeps } from '../common.ts';
import { accessKeyReconciler, decideKeyLifecycle } from './reconcile.ts';

/**
 * The access key lifecycle controller: primary OwnedAccessKeys (cluster-scoped); a change of the
 * platform configuration Secret re-evaluates every key's deadline.
 */
export function setupAccessKeyController(manager: Manager, deps: ControllerDeps) {
  const keys = manager.informer<Stored<OwnedAccessKey>>(resources.ownedAccessKeys);
  const platformNamespace = deps.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE;
  const platformConfig = platformConfigSource(manager, platformNamespace);
  const config = () => platformConfig.current();
  const reconcile = accessKeyReconciler({ ...reconcilerDeps(deps), keys: keys.store, config });
  const controller = addController(manager, deps, { name: 'accesskey', workers: 4, reconcile });
  // Each key's deadline is scheduled when its event arrives, not only after its first reconcile:
  // behind a burst of new keys that first reconcile may come late, the due deadline does not.
  const scheduleDeadline = (key: Stored<OwnedAccessKey>): string[] => {
    const decision = decideKeyLifecycle(key, config().auth, new Date(deps.clock.now()));
    if (decision.action === 'keep' && decision.recheckInMs !== undefined)
      controller.enqueueAfter(key.metadata.name ?? '', decision.recheckInMs);
    return [];
  };
  controller
    .watchPrimary(keys)
    .watch(keys, scheduleDeadline)
    .watch(platformConfig.informer, () => keys.store.keys());
  return { controller };
}
