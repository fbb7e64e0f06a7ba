import { validateSyncConfig } from '../../sync/config.ts';
import { type AdmissionDecision, allow, type Cause, invalid } from '../decision.ts';
import type { AdmittedObject } from '../review.ts';
import { subjectOf } from './ownedaccesskey.ts';

const configOf = (object: AdmittedObject | null | undefined) =>
  (object?.spec as { config?: unknown } | undefined)?.config;

/**
 * A VirtualClusterTemplate's `spec.config` is the configuration of every instance made from it
 * that sets none: it must be one the syncer accepts, by the same rules as an instance's, each
 * error naming the field inside it (`spec.config: sync.toHost...`). Checked when it changes
 * only, so that rules grown stricter never block unrelated edits of an older template.
 */
export function validateVirtualClusterTemplate(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
): AdmissionDecision {
  const config = configOf(object);
  if (config === undefined || (oldObject && configOf(oldObject) === config)) return allow();
  const causes: Cause[] =
    typeof config === 'string'
      ? validateSyncConfig(config).errors.map((message) => ({
          field: 'spec.config',
          reason: 'FieldValueInvalid',
          message,
        }))
      : [{ field: 'spec.config', reason: 'FieldValueInvalid', message: 'must be YAML text' }];
  return causes.length === 0 ? allow() : invalid(subjectOf(object, 'VirtualClusterTemplate'), causes);
}
