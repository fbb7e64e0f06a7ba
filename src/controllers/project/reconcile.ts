import type { V1Namespace, V1RoleBinding } from '@kubernetes/client-node';
import type { ConfigStatus } from '../../api/config.ts';
import type { Project } from '../../api/project.ts';
import { applyObject, deepEqual, patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { type Condition, type ConditionInput, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, isAlreadyExists, isNotFound, TerminalError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { addFinalizer, isBeingDeleted, removeFinalizer } from '../../runtime/finalizers.ts';
import { collectionPath, type KubeApi, objectPath } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { fieldManagers, resources, type Stored } from '../resources.ts';
import { CLEANUP_FINALIZER } from '../sharedsecret/reconcile.ts';
import {
  desiredProjectChildren,
  namespaceBelongsTo,
  PROJECT_LABEL,
  projectNamespaceName,
} from './desired.ts';

/** Index of member RoleBindings (and namespaces) by the project named in their label. */
export const BY_PROJECT = 'project';
export const projectOf = (object: { metadata?: { labels?: Record<string, string> } }): string[] => {
  const project = object.metadata?.labels?.[PROJECT_LABEL];
  return project ? [project] : [];
};

/** The namespace exists and is not this project's: never adopted, never deleted. */
export class NamespaceConflict extends TerminalError {
  override readonly name = 'NamespaceConflict';
}

export interface ProjectReconcilerDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  projects: Store<Stored<Project>>;
  namespaces: Store<V1Namespace>;
  roleBindings: Store<V1RoleBinding>;
  config: () => ConfigStatus;
}

/**
 * Converges a Project's namespace and member RoleBindings and its status (`namespace`, `Ready`).
 * Deletion deletes the namespace (and with it everything in it) before the finalizer goes.
 */
export function projectReconciler(deps: ProjectReconcilerDeps) {
  const { api, projects, namespaces, roleBindings } = deps;

  const deleteNamespace = async (project: Stored<Project>) => {
    const name = projectNamespaceName(project, deps.config().projectNamespacePrefix);
    const existing = namespaces.get(name);
    if (!existing || !namespaceBelongsTo(existing, project)) return;
    try {
      await api.request({
        method: 'DELETE',
        path: objectPath(resources.namespaces, undefined, name),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: existing.metadata?.uid } },
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  };

  return async function reconcile(name: string): Promise<ReconcileResult | undefined> {
    const project = projects.get(name);
    // Gone without our finalizer: the namespace's owner reference lets garbage collection finish.
    if (!project) return undefined;
    if (isBeingDeleted(project)) {
      await deleteNamespace(project);
      await removeFinalizer(api, resources.projects, project, CLEANUP_FINALIZER);
      return undefined;
    }
    const current = await addFinalizer(api, resources.projects, project, CLEANUP_FINALIZER);
    const namespace = projectNamespaceName(current, deps.config().projectNamespacePrefix);

    let ready: ConditionInput;
    try {
      await converge(current, namespace);
      ready = {
        type: 'Ready',
        status: 'True',
        reason: 'Converged',
        message: `namespace ${namespace} and member bindings match the spec`,
      };
    } catch (err) {
      const reason = errorReason(err);
      const message = err instanceof Error ? err.message : String(err);
      ready = { type: 'Ready', status: 'False', reason, message };
      const conflict = err instanceof NamespaceConflict;
      await writeStatus(current, conflict ? current.status?.namespace : namespace, ready).catch(() => {});
      void deps.events.record(regardingOf(current), {
        type: 'Warning',
        reason,
        action: 'ConvergeProject',
        note: message,
      });
      throw err;
    }
    await writeStatus(current, namespace, ready);
    return undefined;
  };

  /**
   * The cache holds only labelled namespaces, so a namespace missing from it is created, never
   * applied: server-side apply would silently take over a namespace someone else made.
   */
  async function ensureNamespace(project: Stored<Project>, desired: V1Namespace): Promise<void> {
    const name = desired.metadata?.name ?? '';
    let existing = namespaces.get(name);
    if (!existing) {
      try {
        await api.request({ method: 'POST', path: collectionPath(resources.namespaces), body: desired });
        return;
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
      existing = await api.request<V1Namespace>({
        method: 'GET',
        path: objectPath(resources.namespaces, undefined, name),
      });
    }
    if (!namespaceBelongsTo(existing, project)) {
      throw new NamespaceConflict(`namespace ${name} exists and does not belong to this project`);
    }
    if (existing.metadata?.deletionTimestamp) {
      // The namespace of an earlier project of the same name is still terminating: wait for it.
      throw new Error(`namespace ${name} is still terminating`);
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
  }

  async function converge(project: Stored<Project>, namespaceName: string): Promise<void> {
    const desired = desiredProjectChildren(project, namespaceName);
    await ensureNamespace(project, desired.namespace);

    const current = roleBindings
      .byIndex(BY_PROJECT, project.metadata.name!)
      .filter((binding) => binding.metadata?.namespace === namespaceName);
    const currentByName = new Map(current.map((binding) => [binding.metadata?.name, binding]));
    await Promise.all(
      desired.roleBindings
        .filter((binding) => !bindingMatches(currentByName.get(binding.metadata?.name), binding))
        .map((binding) =>
          applyObject(api, binding, {
            fieldManager: fieldManagers.project,
            force: true,
            resource: resources.roleBindings,
          }),
        ),
    );
    const wanted = new Set(desired.roleBindings.map((binding) => binding.metadata?.name));
    await Promise.all(
      current
        .filter((binding) => !wanted.has(binding.metadata?.name))
        .map(async (binding) => {
          try {
            await api.request({
              method: 'DELETE',
              path: objectPath(resources.roleBindings, namespaceName, binding.metadata?.name ?? ''),
              body: {
                apiVersion: 'v1',
                kind: 'DeleteOptions',
                preconditions: { uid: binding.metadata?.uid },
              },
            });
          } catch (err) {
            if (!isNotFound(err)) throw err;
          }
        }),
    );
  }

  async function writeStatus(
    project: Stored<Project>,
    namespace: string | undefined,
    ready: ConditionInput,
  ): Promise<void> {
    const conditions = setCondition(
      (project.status?.conditions ?? []) as Condition[],
      { ...ready, observedGeneration: project.metadata.generation },
      new Date(deps.clock.now()),
    );
    await patchStatus(api, resources.projects, project, { ...project.status, namespace, conditions });
  }
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

function regardingOf(project: Project) {
  return {
    apiVersion: project.apiVersion,
    kind: 'Project',
    name: project.metadata.name,
    uid: project.metadata.uid,
  };
}
