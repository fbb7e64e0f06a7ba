import type { KubernetesObject } from '@kubernetes/client-node';
import { PatchStrategy } from '@kubernetes/client-node';
import { ObjectBeingDeletedError } from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import { objectPath, type ResourceRef } from './kube-client.ts';

/**
 * Finalizer helpers. The contract for callers (reconcilers):
 * - Ensure the finalizer only while the object is NOT being deleted (`addFinalizer` refuses with
 *   `ObjectBeingDeletedError` otherwise: adding one then could block deletion forever).
 * - Remove it only AFTER the cleanup it guards has fully succeeded; if cleanup throws, leave it,
 *   the reconcile is retried.
 * Both are JSON patches guarded by `test` operations, so they fail with a conflict-like error
 * (HTTP 409/422) instead of overwriting a concurrent change; the reconcile then retries from the
 * fresher cache. Both return the patched object, or the given one when there was nothing to do.
 */
export function hasFinalizer(obj: KubernetesObject, finalizer: string): boolean {
  return (obj.metadata?.finalizers ?? []).includes(finalizer);
}

export function isBeingDeleted(obj: KubernetesObject): boolean {
  return Boolean(obj.metadata?.deletionTimestamp);
}

export async function addFinalizer<T extends KubernetesObject>(
  api: KubeApi,
  resource: ResourceRef,
  obj: T,
  finalizer: string,
): Promise<T> {
  if (hasFinalizer(obj, finalizer)) return obj;
  if (isBeingDeleted(obj)) {
    throw new ObjectBeingDeletedError(
      `${obj.metadata?.name} is being deleted; not adding finalizer ${finalizer}`,
    );
  }
  const resourceVersion = obj.metadata?.resourceVersion;
  if (!resourceVersion)
    throw new Error('addFinalizer needs the object as read, with metadata.resourceVersion');
  const finalizers = obj.metadata?.finalizers;
  const patch = [
    // The object is unchanged since we read it, so it is still not being deleted.
    { op: 'test', path: '/metadata/resourceVersion', value: resourceVersion },
    finalizers === undefined
      ? { op: 'add', path: '/metadata/finalizers', value: [finalizer] }
      : { op: 'add', path: '/metadata/finalizers/-', value: finalizer },
  ];
  return patchJson(api, resource, obj, patch);
}

export async function removeFinalizer<T extends KubernetesObject>(
  api: KubeApi,
  resource: ResourceRef,
  obj: T,
  finalizer: string,
): Promise<T> {
  const index = (obj.metadata?.finalizers ?? []).indexOf(finalizer);
  if (index < 0) return obj;
  // Guard on the element itself rather than resourceVersion: status writes by others must not
  // make removal fail, but another finalizer shifting into this index must.
  const patch = [
    { op: 'test', path: `/metadata/finalizers/${index}`, value: finalizer },
    { op: 'remove', path: `/metadata/finalizers/${index}` },
  ];
  return patchJson(api, resource, obj, patch);
}

function patchJson<T extends KubernetesObject>(
  api: KubeApi,
  resource: ResourceRef,
  obj: T,
  patch: unknown[],
): Promise<T> {
  return api.request<T>({
    method: 'PATCH',
    path: objectPath(resource, obj.metadata?.namespace, obj.metadata?.name ?? ''),
    body: patch,
    contentType: PatchStrategy.JsonPatch,
  });
}
