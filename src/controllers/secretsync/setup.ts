import type { V1Secret } from '@kubernetes/client-node';
import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { Manager } from '../../runtime/manager.ts';
import { addController, type ControllerDeps, reconcilerDeps, watchScope } from '../common.ts';
import { BY_SOURCE, secretSyncReconciler, sourceKeyOf } from './reconcile.ts';

/**
 * The Secret sync controller: primary Secrets carrying both sync labels (the label selector
 * keeps every other Secret out of our cache); a SharedSecret change maps to its targets.
 */
export function setupSecretSyncController(manager: Manager, deps: ControllerDeps) {
  const scope = watchScope(deps);
  const secrets = manager.cluster.informer<V1Secret>(
    resources.secrets,
    { ...scope, labelSelector: `${SOURCE_NAME_LABEL},${SOURCE_NAMESPACE_LABEL}` },
    { [BY_SOURCE]: sourceKeyOf },
    // The data keys it applied are read from its own managedFields entry (managedDataKeys).
    { managedFieldsOf: [fieldManagers.secretSync] },
  );
  const sharedSecrets = manager.informer<Stored<SharedSecret>>(resources.sharedSecrets, scope);
  const reconcile = secretSyncReconciler({
    ...reconcilerDeps(deps),
    secrets: secrets.store,
    sharedSecrets: sharedSecrets.store,
  });
  const controller = addController(manager, deps, { name: 'secretsync', workers: 2, reconcile });
  controller
    .watchPrimary(secrets)
    .watch(sharedSecrets, (shared) =>
      secrets.store
        .byIndex(BY_SOURCE, `${shared.metadata?.namespace}/${shared.metadata?.name}`)
        .map((s) => `${s.metadata?.namespace}/${s.metadata?.name}`),
    );
  return { controller };
}
