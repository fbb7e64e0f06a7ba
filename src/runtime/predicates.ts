import type { KubernetesObject } from '@kubernetes/client-node';

/**
 * Which informer events of a watch enqueue anything (controller-runtime's predicates). A method
 * left out lets its events through; an event enqueues only when every predicate of its watch lets
 * it through. The replay of the caches when a controller starts counts as creations.
 */
export interface EventPredicate<T extends KubernetesObject = KubernetesObject> {
  create?(obj: T): boolean;
  update?(oldObj: T, newObj: T): boolean;
  delete?(obj: T): boolean;
}

/** Whether every predicate lets the creation of `obj` through. */
export function passesCreate<T extends KubernetesObject>(predicates: readonly EventPredicate<T>[], obj: T) {
  return predicates.every((p) => p.create?.(obj) ?? true);
}

/** Whether every predicate lets the update from `oldObj` to `newObj` through. */
export function passesUpdate<T extends KubernetesObject>(
  predicates: readonly EventPredicate<T>[],
  oldObj: T,
  newObj: T,
) {
  return predicates.every((p) => p.update?.(oldObj, newObj) ?? true);
}

/** Whether every predicate lets the deletion of `obj` through. */
export function passesDelete<T extends KubernetesObject>(predicates: readonly EventPredicate<T>[], obj: T) {
  return predicates.every((p) => p.delete?.(obj) ?? true);
}

/** Lets an update through when any of `predicates` does (creations and deletions likewise). */
export function anyOf<T extends KubernetesObject>(...predicates: EventPredicate<T>[]): EventPredicate<T> {
  return {
    create: (obj) => predicates.some((p) => p.create?.(obj) ?? true),
    update: (oldObj, newObj) => predicates.some((p) => p.update?.(oldObj, newObj) ?? true),
    delete: (obj) => predicates.some((p) => p.delete?.(obj) ?? true),
  };
}

/**
 * controller-runtime's GenerationChangedPredicate: an update passes only when
 * `metadata.generation` moved, which the apiserver does for a spec change and never for a write
 * of the status subresource or of metadata alone (labels, annotations, finalizers). So a
 * controller's own status write does not come back as a reconcile that changes nothing. Only for
 * kinds whose spec writes bump the generation (our CRDs, with a status subresource); creations
 * and deletions always pass.
 */
export const generationChanged: EventPredicate = {
  update: (oldObj, newObj) => oldObj.metadata?.generation !== newObj.metadata?.generation,
};

/**
 * Passes an update that begins the object's deletion or changes its finalizers: what the
 * reconcile scaffold acts on besides the spec (cleanup before the finalizer goes, a finalizer of
 * ours removed by hand put back). Beside {@link generationChanged} for controllers with a finalizer.
 */
export const lifecycleChanged: EventPredicate = {
  update: (oldObj, newObj) =>
    oldObj.metadata?.deletionTimestamp !== newObj.metadata?.deletionTimestamp ||
    !sameStrings(oldObj.metadata?.finalizers ?? [], newObj.metadata?.finalizers ?? []),
};

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}
