import type { Project } from '../api/project.ts';
import { BY_PROJECT_NAMESPACE, projectNamespaceName, projectOfNamespace } from '../api/project-namespace.ts';
import type { Stored } from '../api/resources.ts';
import type { PlatformConfigSource } from '../config/platform-config.ts';
import type { Informer } from '../runtime/informer.ts';

/**
 * The gateway's two readings of the project-namespace rule (`../api/project-namespace.ts`) on its
 * Project cache and the platform config: a namespace's project (scope, audit, the access proxy's
 * spaces) and a project's namespace (TokenReview, the access proxy's virtual clusters).
 */

/** The Project a namespace belongs to: recorded on the Project, or `<configured prefix><name>` without one. */
export function projectLookup(
  projects: Informer<Stored<Project>>,
  config: PlatformConfigSource,
): (namespace: string) => string | undefined {
  return (namespace) =>
    projectOfNamespace(namespace, {
      byRecordedNamespace: (recorded) => projects.store.byIndex(BY_PROJECT_NAMESPACE, recorded),
      byName: (name) => projects.store.get(name),
      prefix: config.current().projectNamespacePrefix,
    });
}

/** The namespace of a project: the one recorded on it, or `<configured prefix><name>` (whether or not it exists). */
export function projectNamespaceOf(
  projects: Informer<Stored<Project>>,
  config: PlatformConfigSource,
): (project: string) => string {
  return (project) =>
    projectNamespaceName(
      projects.store.get(project) ?? { metadata: { name: project } },
      config.current().projectNamespacePrefix,
    );
}
