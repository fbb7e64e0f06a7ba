import { validateSyncConfig } from '../../sync/config.ts';
import { type AdmissionDecision, allow, invalid } from '../decision.ts';
import type { AdmittedObject } from '../review.ts';
import { subjectOf } from './ownedaccesskey.ts';

/**
 * A VirtualClusterInstance's `spec.config` (YAML text) must be a configuration the syncer
 * accepts: each error names the offending field inside it, e.g.
 * `spec.config: sync.toHost.endpoints.patches[2].expression: ...`.
 */
export function validateVirtualClusterInstance(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
): AdmissionDecision {
  const config = (object.spec as { config?: unknown } | undefined)?.config;
  if (config === undefined) return allow();
  // An unchanged configuration was accepted when it was written; do not block unrelated edits
  // (for example removing a finalizer) because the rules have grown stricter since.
  if (oldObject && (oldObject.spec as { config?: unknown } | undefined)?.config === config) return allow();
  if (typeof config !== 'string') {
    return invalid(subjectOf(object, 'VirtualClusterInstance'), [
      { field: 'spec.config', reason: 'FieldValueInvalid', message: 'must be YAML text' },
    ]);
  }
  const { errors } = validateSyncConfig(config);
  if (errors.length === 0) return allow();
  return invalid(
    subjectOf(object, 'VirtualClusterInstance'),
    errors.map((message) => ({ field: 'spec.config', reason: 'FieldValueInvalid', message })),
  );
}
