import type { V1Role, V1RoleBinding } from '@kubernetes/client-node';
import { OWNER_UID_LABEL } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import { addController, type ControllerDeps, reconcilerDeps, watchScope } from '../common.ts';
import { BY_OWNER_SECRET, ownerSecretKey, sharedSecretReconciler } from './reconcile.ts';

/**
 * The SharedSecret controller: primary SharedSecrets, reconciled when their spec changes, their
 * deletion begins or their finalizers change (the former finalizer is released then), not on
 * status or label writes; owned Roles and RoleBindings (only those we label, so the caches stay
 * small) map back to their secret.
 */
export function setupSharedSecretController(manager: Manager, deps: ControllerDeps) {
  const scope = watchScope(deps);
  const sharedSecrets = manager.informer<Stored<SharedSecret>>(resources.sharedSecrets, scope);
  const childSelector = { ...scope, labelSelector: OWNER_UID_LABEL };
  const roles = manager.informer<V1Role>(resources.roles, childSelector, {
    [BY_OWNER_SECRET]: ownerSecretKey,
  });
  const roleBindings = manager.informer<V1RoleBinding>(resources.roleBindings, childSelector, {
    [BY_OWNER_SECRET]: ownerSecretKey,
  });
  const reconcile = sharedSecretReconciler({
    ...reconcilerDeps(deps),
    sharedSecrets: sharedSecrets.store,
    roles: roles.store,
    roleBindings: roleBindings.store,
  });
  const controller = addController(manager, deps, { name: 'sharedsecret', workers: 4, reconcile });
  controller
    // Its own status writes (and anyone's metadata edits) change nothing it projects.
    .watchPrimary(sharedSecrets, { predicates: [anyOf(generationChanged, lifecycleChanged)] })
    .owns(roles, 'SharedSecret')
    .owns(roleBindings, 'SharedSecret');
  return { controller, sharedSecrets };
}
