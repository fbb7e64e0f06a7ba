import type { Project } from '../api/project.ts';

/**
 * Which Project a namespace belongs to, pure. A project's namespace is the one recorded in its
 * `status.namespace` (a later change of the prefix never moves a project), otherwise
 * `<projectNamespacePrefix><name>` with the prefix configured now (`Config.status`), as the
 * project controller names it (`projectNamespaceName`).
 */

/** Index of Projects by the namespace recorded in their status. */
export const BY_PROJECT_NAMESPACE = 'project-namespace';

/** The index function of {@link BY_PROJECT_NAMESPACE}: only recorded namespaces (the prefix may change). */
export const recordedNamespace = (project: Project): string[] =>
  project.status?.namespace ? [project.status.namespace] : [];

export interface ProjectLookup {
  /** Projects whose `status.namespace` is `namespace` (the {@link BY_PROJECT_NAMESPACE} index). */
  readonly byRecordedNamespace: (namespace: string) => readonly Project[];
  readonly byName: (name: string) => Project | undefined;
  /** The configured `projectNamespacePrefix`. */
  readonly prefix: string;
}

/** The name of the Project whose namespace `namespace` is, if any. */
export function projectOfNamespace(namespace: string, lookup: ProjectLookup): string | undefined {
  const recorded = lookup.byRecordedNamespace(namespace)[0];
  if (recorded) return recorded.metadata.name;
  const { prefix } = lookup;
  if (namespace.length <= prefix.length || !namespace.startsWith(prefix)) return undefined;
  const project = lookup.byName(namespace.slice(prefix.length));
  // A project with a recorded namespace owns that one only.
  return project && !project.status?.namespace ? project.metadata.name : undefined;
}
