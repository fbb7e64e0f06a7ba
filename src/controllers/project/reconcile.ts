import type { V1Namespace, V1ResourceQuota, V1RoleBinding } from '@kubernetes/client-node';
import type { ConfigStatus } from '../../api/config.ts';
import { CLEANUP_FINALIZER, PROJECT_LABEL } from '../../api/labels.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import type { Project, ProjectStatus } from '../../api/project.ts';
import { projectNamespaceName } from '../../api/project-namespace.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { applyObject, deleteObject } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { isAlreadyExists, TerminalError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import { deepEqual } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../../runtime/kube-client.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import {
  desiredProjectChildren,
  namespaceBelongsTo,
  PROJECT_QUOTA_NAME,
  QUOTA_CONDITION,
  quotaCondition,
  VIRTUAL_CLUSTER_INSTANCE_COUNT,
} from './desired.ts';

/** Index of member RoleBindings (and namespaces) by the project named in their label. */
export const BY_PROJECT = 'project';
export const projectOf = (object: { metadata?: { labels?: Record<string, string> } }): string[] => {
  const project = object.metadata?.labels?.[PROJECT_LABEL];
  return project ? [project] : [];
};

/** The namespace exists and is not this project's: never adopted, never deleted. */
export class NamespaceConflict extends TerminalError {}

/** How long to wait before looking again at a namespace that is still terminating. */
const TERMINATING_RECHECK_MS = 2_000;

export interface ProjectReconcilerDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  projects: Store<Stored<Project>>;
  namespaces: Store<V1Namespace>;
  roleBindings: Store<V1RoleBinding>;
  /** The ResourceQuotas labelled with a project (ours: {@link PROJECT_QUOTA_NAME}). */
  resourceQuotas: Store<V1ResourceQuota>;
  config: () => ConfigStatus;
}

/**
 * The Project controller's reconciler: {@link reconcileProject} on the scaffold, with the
 * finalizer that guards the namespace's deletion.
 */
export function projectReconciler(deps: ProjectReconcilerDeps) {
  return objectReconciler<Stored<Project>, ProjectStatus>({
    kind: 'Project',
    resource: resources.projects,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.projects,
    finalizer: CLEANUP_FINALIZER,
    action: 'ConvergeProject',
    apply: (project) => reconcileProject(deps, project),
    // Gone without our finalizer: the namespace's owner reference lets garbage collection finish.
    cleanup: async (_name, project) => {
      if (project) await deleteNamespace(deps, project);
    },
  });
}

/**
 * Converges a Project's namespace and member RoleBindings and its status (`namespace`, `Ready`).
 * Deletion deletes the namespace (and with it everything in it) before the finalizer goes.
 */
async function reconcileProject(
  deps: ProjectReconcilerDeps,
  project: Stored<Project>,
): Promise<Converged<ProjectStatus>> {
  const namespaceName = projectNamespaceName(project, deps.config().projectNamespacePrefix);
  const desired = desiredProjectChildren(project, namespaceName);
  if (!(await ensureNamespace(deps.api, deps.namespaces, project, desired.namespace))) {
    const message = `namespace ${namespaceName} is still being deleted; it is created again once it is gone`;
    return {
      ready: { status: 'Unknown', reason: 'NamespaceTerminating', message },
      reconciling: { reason: 'WaitingForNamespace', message },
      requeueAfter: TERMINATING_RECHECK_MS,
    };
  }
  await convergeMemberBindings(deps, project, namespaceName, desired.roleBindings);
  const quota = await convergeQuota(deps, project, namespaceName, desired.quota);
  const condition = quotaCondition(project, namespaceName, quota);
  return {
    ready: {
      status: 'True',
      reason: 'Converged',
      message: `namespace ${namespaceName}, member bindings and quotas match the spec`,
    },
    ...(condition ? { conditions: [condition] } : { removeConditions: [QUOTA_CONDITION] }),
    status: { namespace: namespaceName },
  };
}

/**
 * Applies the project's ResourceQuota when the cache's differs (an edit by anyone else is undone),
 * deletes it when the project no longer sets quotas. A Normal Event tells each change. Returns
 * the quota as the cache last saw it (its status: whether it is counted yet).
 */
async function convergeQuota(
  deps: ProjectReconcilerDeps,
  project: Stored<Project>,
  namespaceName: string,
  desired: V1ResourceQuota | undefined,
): Promise<V1ResourceQuota | undefined> {
  const current = deps.resourceQuotas
    .byIndex(BY_PROJECT, project.metadata.name!)
    .find(
      (quota) => quota.metadata?.namespace === namespaceName && quota.metadata?.name === PROJECT_QUOTA_NAME,
    );
  if (!desired) {
    if (!current) return undefined;
    await deleteObject(deps.api, resources.resourceQuotas, current);
    void deps.events.record(projectReference(project), {
      type: 'Normal',
      reason: 'QuotaRemoved',
      action: 'ConvergeQuota',
      note: `no quota set: ResourceQuota ${namespaceName}/${PROJECT_QUOTA_NAME} deleted`,
    });
    return undefined;
  }
  if (current && quotaMatches(current, desired)) return current;
  await applyObject(deps.api, desired, {
    fieldManager: fieldManagers.project,
    force: true,
    resource: resources.resourceQuotas,
  });
  void deps.events.record(projectReference(project), {
    type: 'Normal',
    reason: 'QuotaApplied',
    action: 'ConvergeQuota',
    note: `ResourceQuota ${namespaceName}/${PROJECT_QUOTA_NAME}: ${VIRTUAL_CLUSTER_INSTANCE_COUNT}=${desired.spec?.hard?.[VIRTUAL_CLUSTER_INSTANCE_COUNT]}`,
  });
  return current;
}

const projectReference = (project: Stored<Project>) => ({
  apiVersion: GROUP_VERSION,
  kind: 'Project',
  name: project.metadata.name ?? '',
  uid: project.metadata.uid ?? '',
});

function quotaMatches(existing: V1ResourceQuota, desired: V1ResourceQuota): boolean {
  return (
    Object.entries(desired.metadata?.labels ?? {}).every(([k, v]) => existing.metadata?.labels?.[k] === v) &&
    deepEqual(existing.metadata?.ownerReferences, desired.metadata?.ownerReferences) &&
    deepEqual(existing.spec?.hard ?? {}, desired.spec?.hard ?? {}) &&
    existing.spec?.scopes === undefined &&
    existing.spec?.scopeSelector === undefined
  );
}

async function deleteNamespace(deps: ProjectReconcilerDeps, project: Stored<Project>): Promise<void> {
  const name = projectNamespaceName(project, deps.config().projectNamespacePrefix);
  const existing = deps.namespaces.get(name);
  if (existing && namespaceBelongsTo(existing, project))
    await deleteObject(deps.api, resources.namespaces, existing);
}

/**
 * The cache holds only labelled namespaces, so a namespace missing from it is created, never
 * applied: server-side apply would silently take over a namespace someone else made. Returns
 * false while a namespace of that name is still being deleted.
 */
async function ensureNamespace(
  api: KubeApi,
  namespaces: Store<V1Namespace>,
  project: Stored<Project>,
  desired: V1Namespace,
): Promise<boolean> {
  const name = desired.metadata?.name ?? '';
  let existing = namespaces.get(name);
  if (!existing) {
    try {
      await api.request({
        method: 'POST',
        path: collectionPath(resources.namespaces),
        query: { fieldManager: fieldManagers.project },
        body: desired,
      });
      return true;
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    existing = await api.request<V1Namespace>({
      method: 'GET',
      path: objectPath(resources.namespaces, undefined, name),
    });
  }
  // A terminating namespace goes away by itself (typically an earlier project's of the same
  // name, whose uid differs): wait for it, whoever it belongs to, rather than call it a conflict.
  if (existing.metadata?.deletionTimestamp) return false;
  if (!namespaceBelongsTo(existing, project)) {
    throw new NamespaceConflict(`namespace ${name} exists and does not belong to this project`);
  }
  const upToDate =
    deepEqual(existing.metadata?.ownerReferences, desired.metadata?.ownerReferences) &&
    Object.entries(desired.metadata?.labels ?? {}).every(([k, v]) => existing.metadata?.labels?.[k] === v);
  if (!upToDate) {
    await applyObject(api, desired, {
      fieldManager: fieldManagers.project,
      force: true,
      resource: resources.namespaces,
    });
  }
  return true;
}

/** Applies the member RoleBindings that differ from the cache, deletes those no longer wanted. */
async function convergeMemberBindings(
  deps: ProjectReconcilerDeps,
  project: Stored<Project>,
  namespaceName: string,
  desired: V1RoleBinding[],
): Promise<void> {
  const current = deps.roleBindings
    .byIndex(BY_PROJECT, project.metadata.name!)
    .filter((binding) => binding.metadata?.namespace === namespaceName);
  const currentByName = new Map(current.map((binding) => [binding.metadata?.name, binding]));
  await Promise.all(
    desired
      .filter((binding) => !bindingMatches(currentByName.get(binding.metadata?.name), binding))
      .map((binding) =>
        applyObject(deps.api, binding, {
          fieldManager: fieldManagers.project,
          force: true,
          resource: resources.roleBindings,
        }),
      ),
  );
  const wanted = new Set(desired.map((binding) => binding.metadata?.name));
  await Promise.all(
    current
      .filter((binding) => !wanted.has(binding.metadata?.name))
      .map((binding) => deleteObject(deps.api, resources.roleBindings, binding)),
  );
}

function bindingMatches(existing: V1RoleBinding | undefined, desired: V1RoleBinding): boolean {
  if (!existing) return false;
  return (
    Object.entries(desired.metadata?.labels ?? {}).every(([k, v]) => existing.metadata?.labels?.[k] === v) &&
    deepEqual(existing.metadata?.ownerReferences, desired.metadata?.ownerReferences) &&
    deepEqual(existing.subjects ?? [], desired.subjects ?? []) &&
    deepEqual(existing.roleRef, desired.roleRef)
  );
}
