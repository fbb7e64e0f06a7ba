import type { KubernetesObject } from '@kubernetes/client-node';
import { patchStatus } from './apply.ts';
import type { Condition } from './conditions.ts';
import { addFinalizer, removeFinalizer } from './finalizers.ts';
import type { KubeApi } from './kube-api.ts';
import type { ResourceRef } from './kube-client.ts';

/** The status every object under the scaffold carries: its conditions and the generation they describe. */
export interface ScaffoldStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

/**
 * The writes the scaffold makes to its own objects. `kubeWrites` makes them through the API;
 * tests pass doubles.
 */
export interface ScaffoldWrites<T> {
  /** Adds `finalizer` to the object as read (refused when it changed since); returns the object written. */
  addFinalizer(obj: T, finalizer: string): Promise<T>;
  /** Removes `finalizer` from the object; returns the object written. */
  removeFinalizer(obj: T, finalizer: string): Promise<T>;
  /**
   * Writes `status` over the object as read, refused (409) when the object changed since, so a
   * condition another writer set is never dropped. Returns the object written, or undefined when
   * the status is unchanged (nothing written).
   */
  writeStatus(obj: T, status: ScaffoldStatus): Promise<T | undefined>;
}

/** The scaffold's writes through the API: JSON patches for finalizers, a merge patch of the status subresource. */
export function kubeWrites<T extends KubernetesObject>(
  api: KubeApi,
  resource: ResourceRef,
): ScaffoldWrites<T> {
  return {
    addFinalizer: (obj, finalizer) => addFinalizer(api, resource, obj, finalizer),
    removeFinalizer: (obj, finalizer) => removeFinalizer(api, resource, obj, finalizer),
    // Guarded by the resourceVersion: other writers may own conditions of their own.
    writeStatus: (obj, status) => patchStatus(api, resource, obj, status, { unchanged: true }),
  };
}
