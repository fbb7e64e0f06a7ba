import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { type SyncConfig, validateSyncConfig } from '../../sync/config.ts';
import { namedHostNamespaces, placementProblems } from '../../sync/placement.ts';
import { type AdmissionDecision, allow, type Cause, invalid } from '../decision.ts';
import type { AdmittedObject } from '../review.ts';
import { subjectOf } from './ownedaccesskey.ts';

type Spec = { config?: unknown; clusterRef?: unknown } | undefined;
const specOf = (object: AdmittedObject | null | undefined) => object?.spec as Spec;
const asInstance = (object: AdmittedObject) =>
  object as unknown as Pick<VirtualClusterInstance, 'metadata' | 'spec'>;

/** The parsed configuration of an object, when it has a valid one. */
function syncConfigOf(object: AdmittedObject): SyncConfig | null {
  const config = specOf(object)?.config;
  return typeof config === 'string' ? validateSyncConfig(config).config : null;
}

/**
 * Whether the placement (cluster, host namespace, namespace mappings) needs checking: on create,
 * and on updates that change `spec.clusterRef` or `spec.config`. An unchanged placement was
 * checked when it was written; the controller checks it again before it starts a syncer.
 */
function placementChanged(oldObject: AdmittedObject | null | undefined, object: AdmittedObject): boolean {
  if (!oldObject) return true;
  const before = specOf(oldObject);
  const after = specOf(object);
  return (
    before?.config !== after?.config ||
    JSON.stringify(before?.clusterRef) !== JSON.stringify(after?.clusterRef)
  );
}

/**
 * The namespaces whose project the placement rule needs (the instance's own and every host
 * namespace it names), or none when the placement is unchanged.
 */
export function placementLookups(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
): string[] {
  if (!placementChanged(oldObject, object)) return [];
  const own = object.metadata?.namespace ?? '';
  const named = namedHostNamespaces(asInstance(object), syncConfigOf(object)).map((n) => n.namespace);
  return [...new Set([own, ...named])].filter(Boolean);
}

/**
 * A VirtualClusterInstance's `spec.config` (YAML text) must be a configuration the syncer
 * accepts: each error names the offending field inside it, e.g.
 * `spec.config: sync.toHost.endpoints.patches[2].expression: ...`. Its syncer may write only
 * into this cluster and into its own project's namespaces (`placementProblems`); `projectOf`
 * gives the project label of each namespace {@link placementLookups} named.
 */
export function validateVirtualClusterInstance(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
  projectOf: (namespace: string) => string | undefined,
): AdmissionDecision {
  const causes: Cause[] = [];
  const config = specOf(object)?.config;
  // An unchanged configuration was accepted when it was written; do not block unrelated edits
  // (for example removing a finalizer) because the rules have grown stricter since.
  const configChanged = !oldObject || specOf(oldObject)?.config !== config;
  if (config !== undefined && configChanged) {
    if (typeof config !== 'string') {
      causes.push({ field: 'spec.config', reason: 'FieldValueInvalid', message: 'must be YAML text' });
    } else {
      for (const message of validateSyncConfig(config).errors)
        causes.push({ field: 'spec.config', reason: 'FieldValueInvalid', message });
    }
  }
  if (placementChanged(oldObject, object)) {
    causes.push(...placementProblems(asInstance(object), syncConfigOf(object), projectOf));
  }
  return causes.length === 0 ? allow() : invalid(subjectOf(object, 'VirtualClusterInstance'), causes);
}

/**
 * The template a new instance names (`spec.templateRef.name`), to be looked up; none on update
 * (templateRef cannot change after creation, and an instance whose template was deleted since
 * must stay editable, e.g. to remove its finalizer) nor for a registered instance.
 */
export function templateToCheck(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
): string | undefined {
  if (oldObject) return undefined;
  const name = (object.spec as { templateRef?: { name?: unknown } } | undefined)?.templateRef?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

/**
 * A new instance must name a VirtualClusterTemplate that exists: otherwise nothing could provision
 * it (422 naming `spec.templateRef.name`). `exists` is undefined when {@link templateToCheck}
 * named nothing to look up.
 */
export function validateTemplateRef(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
  exists: boolean | undefined,
): AdmissionDecision {
  const name = templateToCheck(oldObject, object);
  if (name === undefined || exists !== false) return allow();
  return invalid(subjectOf(object, 'VirtualClusterInstance'), [
    {
      field: 'spec.templateRef.name',
      reason: 'FieldValueNotFound',
      message: `VirtualClusterTemplate ${JSON.stringify(name)} does not exist (kubectl get virtualclustertemplates lists them)`,
    },
  ]);
}
