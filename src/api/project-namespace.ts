import type { Project } from './project.ts';

/**
 * The project-namespace rule, the one place every component reads it from: a project's namespace
 * is the one recorded in its `status.namespace` (set once the controller created it; a later
 * change of the prefix never moves a project), otherwise `<projectNamespacePrefix><name>` with
 * the prefix configured now (`Config.status`). An empty recorded namespace counts as none.
 */

/** What the rule reads of a Project: its name and recorded namespace. */
type ProjectNamespaceFacts = {
  readonly metadata: { readonly name?: string };
  readonly status?: { readonly namespace?: string };
};

/** The namespace of a project, by the rule above. */
export function projectNamespaceName(project: ProjectNamespaceFacts, prefix: string): string {
  return project.status?.namespace || `${prefix}${project.metadata.name ?? ''}`;
}

/** Index of Projects by the namespace recorded in their status. */
export const BY_PROJECT_NAMESPACE = 'project-namespace';

/** The index function of {@link BY_PROJECT_NAMESPACE}: only recorded namespaces (the prefix may change). */
export const recordedNamespace = (project: Project): string[] =>
  project.status?.namespace ? [project.status.namespace] : [];

interface ProjectLookup {
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
