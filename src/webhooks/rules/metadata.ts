import type { Cause } from '../decision.ts';
import type { AdmittedMetadata, AdmittedObject, AdmittedOwnerReference } from '../review.ts';

/**
 * Rules on `metadata` common to every kind of ours.
 *
 * What kube-apiserver already enforces for custom resources (and e2e tests prove for ours):
 * immutable name, namespace, uid and creationTimestamp; deletionTimestamp and
 * deletionGracePeriodSeconds only ever shortened (by a delete request; updates cannot move them);
 * no new finalizers while deletionTimestamp is set; at most one controller owner reference.
 * {@link metadataUpdateCauses} restates those invariants so the gateway, which serves virtual
 * kinds without an apiserver behind them, applies the same rules; the webhook runs it too, as a
 * second line. What kube-apiserver does not enforce the way the spec wants is blockOwnerDeletion
 * (its optional OwnerReferencesPermissionEnforcement plugin checks `update` on `<owner>/finalizers`
 * and answers 403; the spec asks for `delete` on the owner and 422): see
 * {@link ownerReferencesNeedingDeletePermission}.
 */

const ownerRefs = (meta: AdmittedMetadata | undefined): readonly AdmittedOwnerReference[] =>
  Array.isArray(meta?.ownerReferences) ? meta.ownerReferences : [];

/**
 * The owner references of `object` whose `blockOwnerDeletion` is true and was not true before:
 * new entries (matched by owner uid) and entries flipped from false/unset. Each needs the
 * requester to hold `delete` on the owner.
 */
export function ownerReferencesNeedingDeletePermission(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject | null | undefined,
): { index: number; reference: AdmittedOwnerReference }[] {
  const before = new Map(ownerRefs(oldObject?.metadata).map((ref) => [ref.uid, ref]));
  return ownerRefs(object?.metadata)
    .map((reference, index) => ({ index, reference }))
    .filter(
      ({ reference }) =>
        reference.blockOwnerDeletion === true && before.get(reference.uid)?.blockOwnerDeletion !== true,
    );
}

/** At most one owner reference may be the managing controller. */
export function controllerReferenceCauses(object: AdmittedObject | null | undefined): Cause[] {
  const controllers = ownerRefs(object?.metadata).filter((ref) => ref.controller === true);
  if (controllers.length <= 1) return [];
  return [
    {
      field: 'metadata.ownerReferences',
      reason: 'FieldValueInvalid',
      message: `only one reference can have controller set to true; found ${controllers
        .map((ref) => `${ref.kind}/${ref.name}`)
        .join(', ')}`,
    },
  ];
}

/** A human name for an owner: `SharedSecret "db" (management.platform/v1)`. */
function describeOwner(reference: AdmittedOwnerReference): string {
  return `${reference.kind} "${reference.name}" (${reference.apiVersion})`;
}

/** The outcome of the `delete` check on one owner, gathered by the I/O edge. */
export type OwnerDeleteCheck =
  | { readonly outcome: 'allowed' }
  | { readonly outcome: 'denied' }
  | { readonly outcome: 'unresolvable'; readonly why: string };

/** Causes for owner references whose owner the requester may not delete (or that cannot be resolved). */
export function blockOwnerDeletionCauses(
  needed: readonly { index: number; reference: AdmittedOwnerReference }[],
  checks: readonly OwnerDeleteCheck[],
): Cause[] {
  const causes: Cause[] = [];
  needed.forEach(({ index, reference }, i) => {
    const check = checks[i];
    if (check?.outcome === 'allowed') return;
    const why =
      check?.outcome === 'unresolvable'
        ? `the owner's kind cannot be resolved (${check.why})`
        : 'the requester may not delete the owner';
    causes.push({
      field: `metadata.ownerReferences[${index}].blockOwnerDeletion`,
      reason: 'FieldValueForbidden',
      message: `cannot set blockOwnerDeletion on ${describeOwner(reference)}: ${why}; setting it requires 'delete' permission on the owner`,
    });
  });
  return causes;
}

function time(value: string | null | undefined): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The spec's metadata invariants between the stored object and its update: name, namespace,
 * uid and creationTimestamp never change; deletionTimestamp cannot be unset or moved later;
 * deletionGracePeriodSeconds cannot be unset or grow; while deletionTimestamp is set, finalizers
 * may only be removed (any order).
 */
export function metadataUpdateCauses(oldMeta: AdmittedMetadata, newMeta: AdmittedMetadata): Cause[] {
  const causes: Cause[] = [];
  for (const field of ['name', 'namespace', 'uid'] as const) {
    if ((oldMeta[field] ?? '') !== (newMeta[field] ?? '')) {
      causes.push({ field: `metadata.${field}`, reason: 'FieldValueInvalid', message: 'field is immutable' });
    }
  }
  const created = time(oldMeta.creationTimestamp);
  if (created !== undefined && time(newMeta.creationTimestamp) !== created) {
    causes.push({
      field: 'metadata.creationTimestamp',
      reason: 'FieldValueInvalid',
      message: 'field is immutable',
    });
  }
  const deleting = time(oldMeta.deletionTimestamp);
  if (deleting !== undefined) {
    const next = time(newMeta.deletionTimestamp);
    if (next === undefined || next > deleting) {
      causes.push({
        field: 'metadata.deletionTimestamp',
        reason: 'FieldValueInvalid',
        message: 'once set, deletionTimestamp can only be shortened, never unset or moved later',
      });
    }
  }
  const grace = oldMeta.deletionGracePeriodSeconds;
  if (typeof grace === 'number') {
    const next = newMeta.deletionGracePeriodSeconds;
    if (typeof next !== 'number' || next > grace) {
      causes.push({
        field: 'metadata.deletionGracePeriodSeconds',
        reason: 'FieldValueInvalid',
        message: 'once set, deletionGracePeriodSeconds can only be shortened',
      });
    }
  }
  if (deleting !== undefined) {
    const before = new Set(oldMeta.finalizers ?? []);
    const added = (newMeta.finalizers ?? []).filter((f) => !before.has(f));
    if (added.length > 0) {
      causes.push({
        field: 'metadata.finalizers',
        reason: 'FieldValueForbidden',
        message: `no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
      });
    }
  }
  return causes;
}
