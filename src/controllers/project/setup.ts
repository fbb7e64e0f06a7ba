import type { V1Namespace, V1ResourceQuota, V1RoleBinding } from '@kubernetes/client-node';
import { PROJECT_LABEL } from '../../api/labels.ts';
import type { Project } from '../../api/project.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { platformConfigSource } from '../../config/platform-config.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import { addController, type ControllerDeps, DEFAULT_PLATFORM_NAMESPACE, reconcilerDeps } from '../common.ts';
import { BY_PROJECT, projectOf, projectReconciler } from './reconcile.ts';

/**
 * The Project controller: primary Projects (cluster-scoped), reconciled on spec changes, deletion
 * and finalizer changes (not on status or label writes); the namespaces, RoleBindings and
 * ResourceQuotas it labels with the project map back to it; a platform config change (the namespace prefix)
 * re-evaluates every project.
 */
export function setupProjectController(manager: Manager, deps: ControllerDeps) {
  const platformNamespace = deps.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE;
  const projects = manager.informer<Stored<Project>>(resources.projects);
  const namespaces = manager.informer<V1Namespace>(resources.namespaces, { labelSelector: PROJECT_LABEL });
  const roleBindings = manager.informer<V1RoleBinding>(
    resources.roleBindings,
    { labelSelector: PROJECT_LABEL },
    { [BY_PROJECT]: projectOf },
  );
  const resourceQuotas = manager.informer<V1ResourceQuota>(
    resources.resourceQuotas,
    { labelSelector: PROJECT_LABEL },
    { [BY_PROJECT]: projectOf },
  );
  const config = platformConfigSource(manager, platformNamespace);
  const reconcile = projectReconciler({
    ...reconcilerDeps(deps),
    projects: projects.store,
    namespaces: namespaces.store,
    roleBindings: roleBindings.store,
    resourceQuotas: resourceQuotas.store,
    config: () => config.current(),
  });
  const controller = addController(manager, deps, { name: 'project', workers: 2, reconcile });
  controller
    // Its own status writes change nothing it converges; a spec change, the start of a deletion
    // and a finalizer removed by hand do.
    .watchPrimary(projects, { predicates: [anyOf(generationChanged, lifecycleChanged)] })
    .watch(namespaces, projectOf)
    .watch(roleBindings, projectOf)
    .watch(resourceQuotas, projectOf)
    .watch(config.informer, () => projects.store.keys());
  return { controller };
}
