import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { platformConfigSource } from '../../config/platform-config.ts';
import type { Manager } from '../../runtime/manager.ts';
import { addController, type ControllerDeps, DEFAULT_PLATFORM_NAMESPACE, reconcilerDeps } from '../common.ts';
import { DEFAULT_IDENTITY_REFRESH_INTERVAL_MS } from './desired.ts';
import { identityRefreshReconciler } from './reconcile.ts';

export interface IdentityRefreshOptions {
  readonly intervalMs?: number;
}

/**
 * The identity refresh controller (leader only, like every controller): primary OwnedAccessKeys;
 * each key is requeued at its next refresh, and a configuration change looks at every key again
 * (a connector added back, or changed). The sign-in connectors come from
 * `deps.identityProviders`, which the composition root sets.
 */
export function setupIdentityRefreshController(
  manager: Manager,
  deps: ControllerDeps,
  options: IdentityRefreshOptions = {},
) {
  if (!deps.identityProviders) {
    throw new Error('the identity refresh controller needs the sign-in connectors (deps.identityProviders)');
  }
  const keys = manager.informer<Stored<OwnedAccessKey>>(resources.ownedAccessKeys);
  const platformConfig = platformConfigSource(manager, deps.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE);
  const reconcile = identityRefreshReconciler({
    ...reconcilerDeps(deps),
    keys: keys.store,
    providers: deps.identityProviders({ api: deps.api, config: () => platformConfig.current() }),
    intervalMs: options.intervalMs ?? DEFAULT_IDENTITY_REFRESH_INTERVAL_MS,
  });
  const controller = addController(manager, deps, { name: 'identityrefresh', workers: 2, reconcile });
  controller.watchPrimary(keys).watch(platformConfig.informer, () => keys.store.keys());
  return { controller };
}
