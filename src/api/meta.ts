import { z } from 'zod';

/** API group of every kind this platform serves, stored or virtual. */
export const API_GROUP = 'management.platform';
/** The only served and stored version. */
export const API_VERSION = 'v1';
/** The `apiVersion` value of every object of the group. */
/** The verbs of the Kubernetes API (RBAC's resource verbs). */
export const KUBERNETES_VERBS = [
  'get',
  'list',
  'watch',
  'create',
  'update',
  'patch',
  'delete',
  'deletecollection',
] as const;

export const GROUP_VERSION = `${API_GROUP}/${API_VERSION}` as const;

/**
 * Marks a schema as free-form: any JSON object is accepted and kept as is. The CRD generator
 * turns this into `x-kubernetes-preserve-unknown-fields: true`, so the apiserver does not prune it.
 */
const FREE_FORM = { 'x-kubernetes-preserve-unknown-fields': true } as const;

/**
 * An RFC 3339 timestamp in UTC as Kubernetes writes it (`2024-01-02T03:04:05Z`, fractional
 * seconds allowed). Kubernetes' `metav1.Time` always serializes in UTC, so offsets are refused.
 */
export const timestampSchema = () => z.iso.datetime({ offset: false, local: false });

/** A free-form JSON object (kept as is, never pruned). */
const freeFormObjectSchema = () => z.record(z.string(), z.unknown()).meta(FREE_FORM);

const OwnerReferenceSchema = z
  .object({
    apiVersion: z.string().min(1).describe('API version of the referent.'),
    kind: z.string().min(1).describe('Kind of the referent.'),
    name: z.string().min(1).describe('Name of the referent.'),
    uid: z.string().min(1).describe('UID of the referent.'),
    controller: z.boolean().optional().describe('True when the reference points to the managing controller.'),
    blockOwnerDeletion: z
      .boolean()
      .optional()
      .describe(
        "Default false. When true and the owner has the 'foregroundDeletion' finalizer, the owner cannot be removed until this reference is removed. Setting it requires 'delete' permission on the owner, otherwise 422.",
      ),
  })
  .describe('A reference to an object this object depends on.');

const ManagedFieldsEntrySchema = z
  .object({
    manager: z.string().optional().describe('Identifier of the workflow managing the fields.'),
    operation: z.enum(['Apply', 'Update']).optional().describe('Allowed values: `Apply`, `Update`.'),
    apiVersion: z
      .string()
      .optional()
      .describe('Version of the resource the field set applies to, format group/version.'),
    time: timestampSchema()
      .optional()
      .describe(
        'When the entry was added; updated when the manager adds, changes or removes an owned field. Not updated when a field is taken over by another manager.',
      ),
    fieldsType: z.enum(['FieldsV1']).optional().describe('Only value: `FieldsV1`.'),
    fieldsV1: freeFormObjectSchema().optional().describe('The field set in FieldsV1 format.'),
    subresource: z
      .string()
      .optional()
      .describe(
        'Subresource used for the update; empty string for the main resource. Distinguishes managers with the same name.',
      ),
  })
  .describe('Housekeeping entry: which workflow manages which fields.');

/**
 * Common metadata of every object, exactly the spec's table. Server-populated fields are
 * optional here because clients do not send them; the apiserver (or the gateway, for virtual
 * kinds) fills them.
 */
export const ObjectMetaSchema = z
  .object({
    name: z
      .string()
      .optional()
      .describe(
        'Unique within a namespace. Required on create unless `generateName` is used. Cannot be updated.',
      ),
    generateName: z
      .string()
      .optional()
      .describe(
        'Optional prefix used only when `name` is absent. The server appends a unique suffix, so the returned name differs from the prefix, and the prefix may be truncated to fit the suffix. If the generated name exists, the server returns 409.',
      ),
    namespace: z
      .string()
      .optional()
      .describe(
        "Must be a DNS_LABEL. Empty equals the 'default' namespace ('default' is canonical). Cannot be updated. Empty for objects that are not namespaced.",
      ),
    selfLink: z.string().optional().describe('Deprecated; no longer populated.'),
    uid: z
      .string()
      .optional()
      .describe(
        'Unique in time and space. Set by the server on creation; read-only; does not change on PUT.',
      ),
    resourceVersion: z
      .string()
      .optional()
      .describe(
        'Opaque value for change detection, optimistic concurrency and watch. Clients pass it back unmodified. Read-only.',
      ),
    generation: z.int().optional().describe('Sequence number of the desired state. Read-only.'),
    creationTimestamp: timestampSchema()
      .nullable()
      .optional()
      .describe('Server time of creation, RFC 3339, UTC. Clients cannot set it. Null for lists.'),
    deletionTimestamp: timestampSchema()
      .optional()
      .describe(
        'Set by the server when graceful deletion is requested; not settable by clients. After it has been set it cannot be unset or moved later, but it may be shortened. Unset means no graceful deletion has been requested.',
      ),
    deletionGracePeriodSeconds: z
      .int()
      .optional()
      .describe(
        'Seconds allowed for graceful termination. Only set together with `deletionTimestamp`. May only be shortened. Read-only.',
      ),
    labels: z.record(z.string(), z.string()).optional().describe('Used to organize and select objects.'),
    annotations: z
      .record(z.string(), z.string())
      .optional()
      .describe('Unstructured, not queryable, preserved on modification.'),
    ownerReferences: z
      .array(OwnerReferenceSchema)
      .optional()
      .refine((refs) => !refs || refs.filter((ref) => ref.controller === true).length <= 1, {
        message: 'at most one owner reference may be the managing controller',
      })
      .describe(
        'Objects this object depends on. If all are deleted the object is garbage collected. At most one entry may be the managing controller.',
      ),
    finalizers: z
      .array(z.string())
      .optional()
      .describe(
        'Must be empty before the object is removed. Entries may be removed in any order (no order is enforced). While `deletionTimestamp` is set, entries can only be removed.',
      ),
    managedFields: z
      .array(ManagedFieldsEntrySchema)
      .optional()
      .describe('Housekeeping: which workflow manages which fields.'),
  })
  .describe('Standard object metadata.');

const CONDITION_STATUSES = ['True', 'False', 'Unknown'] as const;
const CONDITION_SEVERITIES = ['Error', 'Warning', 'Info', ''] as const;

/**
 * One observation of an object's state. The shape of the established product (Cluster-API style,
 * with `severity`) plus `observedGeneration`, which our controllers set so that a reader can tell
 * whether the condition describes the current `metadata.generation`.
 */
export const ConditionSchema = z
  .object({
    type: z
      .string()
      .min(1)
      .max(316)
      .describe('Type of the condition in CamelCase, for example `Ready`. Unique within the list.'),
    status: z.enum(CONDITION_STATUSES).describe('Status of the condition: `True`, `False` or `Unknown`.'),
    severity: z
      .enum(CONDITION_SEVERITIES)
      .optional()
      .describe(
        'How severe a `False` condition is: `Error`, `Warning` or `Info`. Set only when `status` is `False`.',
      ),
    reason: z
      .string()
      .max(1024)
      .optional()
      .describe('Machine-readable reason of the last transition, in CamelCase.'),
    message: z.string().max(32768).optional().describe('Human-readable details of the last transition.'),
    lastTransitionTime: timestampSchema().describe(
      'Last time the condition changed `status`, RFC 3339, UTC. Unchanged while only reason or message change.',
    ),
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .describe('The `metadata.generation` the condition was computed from.'),
  })
  .describe('One observation of the state of the object.');

/** Conditions, at most one per `type` (a list map keyed by `type`, as Kubernetes does). */
export const conditionsSchema = () =>
  z
    .array(ConditionSchema)
    .max(64)
    .refine((conditions) => new Set(conditions.map((c) => c.type)).size === conditions.length, {
      message: 'condition types must be unique',
    })
    .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
    .describe('Current state of the object as a list of conditions, at most one per type.');

/**
 * `status.observedGeneration`: the `metadata.generation` the controller last wrote status for.
 * kstatus (Flux, `kubectl wait`-style tooling, cli-utils) reads an object whose observed
 * generation lags its generation as still in progress, whatever its conditions say.
 */
export const observedGenerationSchema = () =>
  z
    .int()
    .min(0)
    .optional()
    .describe(
      'The `metadata.generation` this status describes; while it is lower than the generation, the controller has not yet acted on the latest spec.',
    );

/** `apiVersion` and `kind` of an object of this group. */
export const typeMetaShape = <K extends string>(kind: K) => ({
  apiVersion: z
    .literal(GROUP_VERSION)
    .describe(
      'Versioned schema of the representation; the server converts recognized schemas to the latest internal value and may reject unrecognized ones.',
    ),
  kind: z
    .literal(kind)
    .describe(
      'The resource kind (CamelCase); the server may infer it from the endpoint; it cannot be updated.',
    ),
});

export type Condition = z.infer<typeof ConditionSchema>;
export type ConditionStatus = Condition['status'];
