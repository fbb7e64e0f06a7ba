import { canonicalScopeRole, type Scope } from '../api/scope.ts';
import { scopeNarrows } from './scope.ts';

// Comparing scopes: whether one lets through no more than another (writing or minting a key).

const coveredName = (outer: readonly string[] | undefined, name: string) =>
  outer === undefined || outer.length === 0 || outer.includes('*') || outer.includes(name);

/**
 * Whether every request `inner` lets through, `outer` lets through too (so writing `inner` where
 * `outer` was, or minting `inner` from a key scoped `outer`, widens nothing). Conservative: it
 * may answer false for scopes that are in fact narrower (deprecated rules must appear in `outer`
 * as they are), never true for one that is wider.
 */
export function scopeWithin(inner: Scope | undefined, outer: Scope | undefined): boolean {
  if (!scopeNarrows(outer)) return true;
  if (!scopeNarrows(inner)) return false;
  const o = outer as Scope;
  const i = inner as Scope;
  const outerProjects = (o.projects ?? []).map((entry) => entry.project);
  const projectCovered = (project: string) => outerProjects.includes('*') || outerProjects.includes(project);
  const roleEntries = (scope: Scope) => [
    ...(scope.roles ?? []),
    ...(scope.allowPlatformCli === true ? [{ role: 'platform-cli' as const }] : []),
  ];
  const outerRoles = roleEntries(o);
  return (
    (i.projects ?? []).every((entry) =>
      entry.project !== '*' ? projectCovered(entry.project) : outerProjects.includes('*'),
    ) &&
    (i.spaces ?? []).every(
      (entry) =>
        projectCovered(entry.project) ||
        (o.spaces ?? []).some(
          (outerEntry) =>
            outerEntry.project === entry.project &&
            (outerEntry.space === '*' || outerEntry.space === entry.space),
        ),
    ) &&
    (i.virtualClusters ?? []).every(
      (entry) =>
        projectCovered(entry.project) ||
        (o.virtualClusters ?? []).some(
          (outerEntry) =>
            outerEntry.project === entry.project &&
            (outerEntry.virtualCluster === '*' || outerEntry.virtualCluster === entry.virtualCluster),
        ),
    ) &&
    (i.clusters ?? []).every((entry) =>
      (o.clusters ?? []).some(
        (outerEntry) => outerEntry.cluster === '*' || outerEntry.cluster === entry.cluster,
      ),
    ) &&
    roleEntries(i).every((entry) =>
      outerRoles.some(
        (outerEntry) =>
          canonicalScopeRole(outerEntry.role) === canonicalScopeRole(entry.role) &&
          restrictionCovered(outerEntry.projects, entry.projects) &&
          restrictionCovered(outerEntry.virtualClusters, entry.virtualClusters),
      ),
    ) &&
    (i.rules ?? []).every((rule) =>
      (o.rules ?? []).some((outerRule) => JSON.stringify(outerRule) === JSON.stringify(rule)),
    )
  );
}

/** A role entry's restriction list `inner` (empty: none) within `outer` (empty: none). */
function restrictionCovered(
  outer: readonly string[] | undefined,
  inner: readonly string[] | undefined,
): boolean {
  if (outer === undefined || outer.length === 0 || outer.includes('*')) return true;
  if (inner === undefined || inner.length === 0 || inner.includes('*')) return false;
  return inner.every((name) => coveredName(outer, name));
}
