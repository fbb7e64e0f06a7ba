import { deprecatedFieldWarnings } from '../../api/deprecated-fields.ts';
import {
  KEY_HASH_PATTERN,
  KEY_ID_PATTERN,
  LAST_APPLIED_ANNOTATION,
  lastAppliedWithoutKey,
} from '../../api/ownedaccesskey.ts';
import { projectNamespaceName } from '../../api/project-namespace.ts';
import { hashAccessKey, MalformedAccessKey, parseAccessKey } from '../../identity/keys.ts';
import {
  type AdmissionDecision,
  allow,
  type Cause,
  invalid,
  type JsonPatchOperation,
  pointerToken,
  type Subject,
} from '../decision.ts';
import type { AdmittedObject } from '../review.ts';
import { scopeFindings } from './scope.ts';

/**
 * OwnedAccessKey admission.
 *
 * Mutation (CREATE): a supplied `spec.key` is replaced by `spec.keyHash` (HMAC-SHA-256 under the
 * platform pepper) and `spec.keyId` (the key's public id); the plaintext never reaches etcd. The
 * CRD's CEL rule `!has(self.key)` is the backstop should the mutation ever not run.
 *
 * A create with neither `key` nor `keyHash` is refused with directions: keys are minted by the
 * management API (which returns the key once) or supplied as `spec.key`.
 */

const HOW_TO_GET_A_KEY =
  'create access keys through the management API (POST .../ownedaccesskeys returns the key once), or supply your own key in spec.key (format pak_<id>_<secret><checksum>); the platform stores only its keyed hash';

interface KeySpec {
  key?: unknown;
  keyHash?: unknown;
  keyId?: unknown;
  ttl?: unknown;
  scope?: unknown;
}

const specOf = (object: AdmittedObject | null | undefined): KeySpec =>
  object && typeof object.spec === 'object' && object.spec !== null ? (object.spec as KeySpec) : {};

export function subjectOf(object: AdmittedObject | null | undefined, kind: string): Subject {
  return { kind, name: object?.metadata?.name ?? object?.metadata?.generateName ?? '' };
}

/**
 * The mutation of a key object on CREATE, given the pepper. Idempotent: an object without
 * `spec.key` (for example this mutation's own output) yields no patch.
 */
/**
 * The patch that takes a plaintext key out of `kubectl apply`'s last-applied annotation (which
 * would otherwise store it in etcd beside its hash). None when it holds no key.
 */
function lastAppliedKeyPatch(object: AdmittedObject): JsonPatchOperation[] {
  const annotations = (object as { metadata?: { annotations?: Record<string, unknown> } }).metadata
    ?.annotations;
  const applied = annotations?.[LAST_APPLIED_ANNOTATION];
  if (typeof applied !== 'string') return [];
  const path = `/metadata/annotations/${pointerToken(LAST_APPLIED_ANNOTATION)}`;
  const cleaned = lastAppliedWithoutKey(applied);
  if (cleaned === applied) return [];
  return [cleaned === undefined ? { op: 'remove', path } : { op: 'replace', path, value: cleaned }];
}

export function mutateOwnedAccessKey(object: AdmittedObject, pepper: Uint8Array): AdmissionDecision {
  const subject = subjectOf(object, 'OwnedAccessKey');
  const spec = specOf(object);
  const annotationPatch = lastAppliedKeyPatch(object);
  if (spec.key === undefined) {
    if (spec.keyHash === undefined) {
      return invalid(subject, [
        {
          field: 'spec.key',
          reason: 'FieldValueRequired',
          message: `an access key is required: ${HOW_TO_GET_A_KEY}`,
        },
      ]);
    }
    return annotationPatch.length > 0 ? allow({ patches: annotationPatch }) : allow();
  }
  if (typeof spec.key !== 'string') {
    return invalid(subject, [
      { field: 'spec.key', reason: 'FieldValueInvalid', message: 'must be a string' },
    ]);
  }
  const parsed = parseAccessKey(spec.key);
  if (parsed instanceof MalformedAccessKey) {
    // Never echo the value: it may be someone's real key with a typo.
    return invalid(subject, [
      {
        field: 'spec.key',
        reason: 'FieldValueInvalid',
        message: `${parsed.message}; expected pak_<16 base32 id>_<43 base62 secret><6 base62 checksum>`,
      },
    ]);
  }
  const keyHash = hashAccessKey(spec.key, pepper);
  const causes: Cause[] = [];
  if (spec.keyHash !== undefined && spec.keyHash !== keyHash) {
    causes.push({ field: 'spec.keyHash', reason: 'FieldValueInvalid', message: 'does not match spec.key' });
  }
  if (spec.keyId !== undefined && spec.keyId !== parsed.id) {
    causes.push({
      field: 'spec.keyId',
      reason: 'FieldValueInvalid',
      message: 'does not match the id part of spec.key',
    });
  }
  if (causes.length > 0) return invalid(subject, causes);
  const patches: JsonPatchOperation[] = [
    { op: 'remove', path: '/spec/key' },
    { op: spec.keyHash === undefined ? 'add' : 'replace', path: '/spec/keyHash', value: keyHash },
    { op: spec.keyId === undefined ? 'add' : 'replace', path: '/spec/keyId', value: parsed.id },
    ...annotationPatch,
  ];
  return allow({ patches });
}

/**
 * Validation of a key object (after mutation): a stored key has a hash and an id of the right
 * shape, its ttl is within the platform maximum (`maxTtlSeconds`, 0 or undefined = none), and its
 * scope passes {@link scopeFindings}. Deprecated fields set (`spec.parent`, `spec.oidcLogin`) are
 * admitted with a warning naming each.
 */
export function validateOwnedAccessKey(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
  maxTtlSeconds: number | undefined,
): AdmissionDecision {
  const spec = specOf(object);
  const causes: Cause[] = [];
  if (spec.key !== undefined) {
    causes.push({
      field: 'spec.key',
      reason: 'FieldValueForbidden',
      message: `the plaintext key is never stored; ${HOW_TO_GET_A_KEY}`,
    });
  }
  if (oldObject === undefined || oldObject === null) {
    if (typeof spec.keyHash !== 'string' || !KEY_HASH_PATTERN.test(spec.keyHash)) {
      causes.push({
        field: 'spec.keyHash',
        reason: 'FieldValueRequired',
        message: `a key is required: ${HOW_TO_GET_A_KEY}`,
      });
    }
    if (typeof spec.keyId !== 'string' || !KEY_ID_PATTERN.test(spec.keyId)) {
      causes.push({
        field: 'spec.keyId',
        reason: 'FieldValueRequired',
        message: 'the public id of the key is required with spec.keyHash',
      });
    }
  }
  const ttlChanged = specOf(oldObject).ttl !== spec.ttl;
  if (maxTtlSeconds && ttlChanged && typeof spec.ttl === 'number' && spec.ttl > maxTtlSeconds) {
    causes.push({
      field: 'spec.ttl',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${spec.ttl}: must be at most ${maxTtlSeconds} seconds, the platform maximum auth.accessKeyMaxTTLSeconds`,
    });
  }
  const scope = scopeFindings(spec.scope, 'spec.scope');
  causes.push(...scope.causes);
  const warnings = [...scope.warnings, ...deprecatedFieldWarnings(object)];
  const subject = subjectOf(object, 'OwnedAccessKey');
  return causes.length > 0 ? invalid(subject, causes, warnings) : allow({ warnings });
}

/** Whether validating `object` needs the platform maximum ttl (only when it sets or changes a positive ttl). */
export function needsMaxTtl(oldObject: AdmittedObject | null | undefined, object: AdmittedObject): boolean {
  const ttl = specOf(object).ttl;
  return typeof ttl === 'number' && ttl > 0 && specOf(oldObject).ttl !== ttl;
}

interface SpaceEntry {
  readonly index: number;
  readonly project: string;
  readonly space: string;
}

/** The `scope.spaces` entries naming one space of one project (`*` names every space: nothing to check). */
export function namedSpaces(object: AdmittedObject): SpaceEntry[] {
  const spaces = (
    object.spec as { scope?: { spaces?: { project?: unknown; space?: unknown }[] } } | undefined
  )?.scope?.spaces;
  if (!Array.isArray(spaces)) return [];
  return spaces.flatMap((entry, index) =>
    typeof entry?.project === 'string' && typeof entry.space === 'string' && entry.space !== '*'
      ? [{ index, project: entry.project, space: entry.space }]
      : [],
  );
}

/**
 * A space is a namespace of its project (the project's own, `projectNamespaceName`); a
 * `scope.spaces` entry naming another matches nothing, which admission says. `projects` holds
 * each project {@link namedSpaces} named (undefined: no such project).
 */
export function spaceWarnings(
  object: AdmittedObject,
  projectNamespacePrefix: string,
  projects: ReadonlyMap<string, { readonly recordedNamespace: string | undefined } | undefined>,
): string[] {
  return namedSpaces(object).flatMap(({ index, project, space }) => {
    const found = projects.get(project);
    const namespace = found
      ? projectNamespaceName(
          { metadata: { name: project }, status: { namespace: found.recordedNamespace } },
          projectNamespacePrefix,
        )
      : undefined;
    if (namespace === space) return [];
    return [
      `scope.spaces[${index}]: ${space} is not a namespace of project ${project}${found ? ` (its namespace is ${namespace})` : ' (no such project)'}: this entry matches nothing`,
    ];
  });
}
