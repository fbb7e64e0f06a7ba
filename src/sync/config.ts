import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { prototypeKeyPaths } from '../runtime/json.ts';
import { singleExpressionError } from './patches/expression.ts';
import { InvalidPatchPath, type PathSegment, parsePath, pathMayReach } from './patches/path.ts';
import { fieldName, IDENTITY_FIELDS, isReservedKey, RESTRICTED_FIELDS } from './reserved.ts';

/**
 * The part of a virtual cluster's configuration the syncer reads. Other keys of the file are kept
 * (they are visible to expressions as `context.vcluster.config`) but not checked here.
 */

/** `labels: {}`: the value is a label selector (or a map of labels), translated as a Service's. */
const labelsSchema = z.strictObject({});

const referenceSchema = z.strictObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  apiVersionPath: z.string().optional(),
  kindPath: z.string().optional(),
  namePath: z.string().optional(),
  namespacePath: z.string().optional(),
  /**
   * As SPEC.md writes it: the value is a label selector, and the objects of `kind` in the
   * object's namespace that it selects are the references (synced with it).
   */
  labels: labelsSchema.optional(),
});

const patchSchema = z.strictObject({
  path: z.string(),
  expression: z.string().optional(),
  reverseExpression: z.string().optional(),
  reference: referenceSchema.optional(),
  /** The reference product's form: `labels` beside (instead of) `reference`. */
  labels: labelsSchema.optional(),
});

const resourceSchema = (enabledByDefault: boolean) =>
  z
    .strictObject({
      enabled: z.boolean().default(enabledByDefault),
      patches: z.array(patchSchema).default([]),
    })
    .prefault({});

const namespacesSchema = z
  .strictObject({
    enabled: z.boolean().default(false),
    mappingsOnly: z.boolean().default(false),
    mappings: z.strictObject({ byName: z.record(z.string(), z.string()).default({}) }).prefault({}),
    extraLabels: z.record(z.string(), z.string()).default({}),
  })
  .prefault({});

const syncConfigSchema = z.looseObject({
  sync: z
    .looseObject({
      toHost: z
        .looseObject({
          endpoints: resourceSchema(true),
          services: resourceSchema(true),
          secrets: resourceSchema(false),
          configMaps: resourceSchema(false),
          namespaces: namespacesSchema,
        })
        .prefault({}),
    })
    .prefault({}),
  networking: z
    .looseObject({
      advanced: z.looseObject({ clusterDomain: z.string().min(1).default('cluster.local') }).prefault({}),
    })
    .prefault({}),
});

export type SyncConfig = z.infer<typeof syncConfigSchema>;
export type PatchConfig = z.infer<typeof patchSchema>;
export type ReferencePatchConfig = z.infer<typeof referenceSchema>;

/** The patch lists, by the key under `sync.toHost`. */
export const SYNCED_RESOURCES = ['endpoints', 'services', 'secrets', 'configMaps'] as const;
export type SyncedResource = (typeof SYNCED_RESOURCES)[number];

/** Kind of the object -> the resource whose patch list applies. */
export const RESOURCE_BY_KIND: Readonly<Record<string, SyncedResource>> = {
  Endpoints: 'endpoints',
  Service: 'services',
  Secret: 'secrets',
  ConfigMap: 'configMaps',
};

export class InvalidSyncConfig extends Error {
  override readonly name = 'InvalidSyncConfig';
  constructor(readonly errors: string[]) {
    super(`invalid virtual cluster configuration:\n${errors.map((e) => `  ${e}`).join('\n')}`);
  }
}

export interface SyncConfigValidation {
  /** The configuration merged with defaults; null when there are errors. */
  config: SyncConfig | null;
  /** One line per problem, each starting with the path of the offending field. */
  errors: string[];
}

function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

/** The label or annotation key a path names literally (`metadata.labels["k"]`), if any. */
function metadataKeyOf(segments: readonly PathSegment[]): string | null {
  const [metadata, map, key] = segments;
  if (segments.length !== 3 || metadata?.type !== 'key' || metadata.key !== 'metadata') return null;
  if (map?.type !== 'key' || (map.key !== 'labels' && map.key !== 'annotations')) return null;
  return key?.type === 'key' ? key.key : null;
}

/** Why a path may not be patched, or null. The whole object (`''`) is checked at sync time. */
function forbiddenPathError(path: string, segments: readonly PathSegment[]): string | null {
  const reached = [...IDENTITY_FIELDS, ...RESTRICTED_FIELDS].filter((field) => pathMayReach(segments, field));
  if (reached.length > 0) {
    return `${JSON.stringify(path)} may not patch ${reached.map(fieldName).join(', ')}`;
  }
  const key = metadataKeyOf(segments);
  if (key !== null && isReservedKey(key)) {
    return `${JSON.stringify(path)} may not set ${JSON.stringify(key)}: the key is reserved on the host`;
  }
  return null;
}

/**
 * Whether a reference may name objects of this API version and kind: only the kinds the syncer
 * syncs (the core v1 kinds with a patch list), as the reference product needs a mapper for the
 * referenced kind. Any other would be a name translated for an object that is never synced.
 */
export function isReferenceableKind(apiVersion: string, kind: string): boolean {
  return apiVersion === 'v1' && Object.hasOwn(RESOURCE_BY_KIND, kind);
}

/** The kinds a reference may name, for error messages. */
export const REFERENCEABLE_KINDS_TEXT = `v1 ${Object.keys(RESOURCE_BY_KIND).join(', ')}`;

function referenceErrors(at: string, ref: ReferencePatchConfig): string[] {
  const errors: string[] = [];
  // The fallback kind must be synced even with kindPath/apiVersionPath: a value without them uses it.
  if (!isReferenceableKind(ref.apiVersion, ref.kind)) {
    errors.push(
      `${at}.reference.kind: ${ref.apiVersion} ${ref.kind} is not synced by the syncer (a reference may name ${REFERENCEABLE_KINDS_TEXT})`,
    );
  }
  for (const field of ['apiVersionPath', 'kindPath', 'namePath', 'namespacePath'] as const) {
    const relative = ref[field];
    if (relative === undefined || relative.trim() === '') continue;
    if (ref.labels !== undefined) {
      errors.push(`${at}.reference.${field}: not used with reference.labels (the value is the selector)`);
      continue;
    }
    try {
      parsePath(relative);
    } catch (err) {
      if (!(err instanceof InvalidPatchPath)) throw err;
      errors.push(`${at}.reference.${field}: ${err.message}`);
    }
  }
  return errors;
}

function patchErrors(list: string, patches: readonly PatchConfig[]): string[] {
  const errors: string[] = [];
  const firstIndexByPath = new Map<string, number>();
  patches.forEach((patch, i) => {
    const at = `${list}[${i}]`;
    const modes = [
      patch.expression !== undefined || patch.reverseExpression !== undefined,
      patch.reference !== undefined,
      patch.labels !== undefined,
    ].filter(Boolean).length;
    if (modes > 1) errors.push(`${at}: can only use one of: expression, labels or reference`);
    if (modes === 0) errors.push(`${at}: need to use one of: expression, labels or reference`);
    let segments: PathSegment[] | null = null;
    try {
      segments = parsePath(patch.path);
    } catch (err) {
      if (!(err instanceof InvalidPatchPath)) throw err;
      errors.push(`${at}.path: ${err.message}`);
    }
    const forbidden = segments === null ? null : forbiddenPathError(patch.path, segments);
    if (forbidden !== null) errors.push(`${at}.path: ${forbidden}`);
    const first = firstIndexByPath.get(patch.path.trim());
    if (first !== undefined)
      errors.push(`${at}: ${list}[${first}] has the same path ${JSON.stringify(patch.path)}`);
    else firstIndexByPath.set(patch.path.trim(), i);
    for (const field of ['expression', 'reverseExpression'] as const) {
      const text = patch[field];
      if (text === undefined) continue;
      const problem = singleExpressionError(text);
      if (problem !== null) errors.push(`${at}.${field}: ${problem}`);
    }
    if (patch.reference) errors.push(...referenceErrors(at, patch.reference));
  });
  return errors;
}

/** The virtual cluster's name inside namespace mappings. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: a literal placeholder, not a template
export const NAME_PLACEHOLDER = '${name}';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function namespaceMappingErrors(byName: Record<string, string>): string[] {
  const errors: string[] = [];
  for (const [virtual, host] of Object.entries(byName)) {
    const at = `sync.toHost.namespaces.mappings.byName[${JSON.stringify(virtual)}]`;
    const virtualPattern = virtual.includes('*');
    const hostPattern = host.includes('*');
    if (virtualPattern !== hostPattern) {
      errors.push(`${at}: a pattern needs a "*" on both sides`);
      continue;
    }
    for (const side of [virtual, host]) {
      if (!side.includes('*')) continue;
      if (side.indexOf('*') !== side.length - 1)
        errors.push(`${at}: ${JSON.stringify(side)} may hold one trailing "*" only`);
      else if (side.length - 1 > 32)
        errors.push(`${at}: ${JSON.stringify(side)} has a prefix longer than 32 characters`);
    }
    for (const side of [virtual, host]) {
      const literal = side.replaceAll(NAME_PLACEHOLDER, 'x').replace(/\*$/, 'x');
      if (!DNS_LABEL.test(literal) || literal.length > 63) {
        errors.push(`${at}: ${JSON.stringify(side)} is not a valid namespace name`);
      }
    }
  }
  return errors;
}

/**
 * Parses (YAML text or an already parsed object), applies defaults and checks everything that can
 * be checked without running anything. Pure: the admission webhook uses it too.
 */
export function validateSyncConfig(input: string | unknown): SyncConfigValidation {
  let raw: unknown = input;
  if (typeof input === 'string') {
    try {
      raw = parseYaml(input) ?? {};
    } catch (err) {
      return {
        config: null,
        errors: [`(file): not valid YAML: ${err instanceof Error ? err.message : err}`],
      };
    }
  }
  // No name in a configuration can be `__proto__` (namespaces, label keys and fields are not),
  // and the schema would drop it without a word: refused rather than ignored.
  const prototypeKeys = prototypeKeyPaths(raw);
  if (prototypeKeys.length > 0) {
    return {
      config: null,
      errors: prototypeKeys.map((path) => `${issuePath(path)}: the key "__proto__" is not supported`),
    };
  }
  const parsed = syncConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    return {
      config: null,
      errors: parsed.error.issues.map((i) => `${issuePath(i.path) || '(root)'}: ${i.message}`),
    };
  }
  const config = parsed.data;
  const errors: string[] = [];
  for (const resource of SYNCED_RESOURCES) {
    errors.push(...patchErrors(`sync.toHost.${resource}.patches`, config.sync.toHost[resource].patches));
  }
  errors.push(...namespaceMappingErrors(config.sync.toHost.namespaces.mappings.byName));
  return errors.length > 0 ? { config: null, errors } : { config, errors: [] };
}

/** {@link validateSyncConfig} that throws {@link InvalidSyncConfig}. */
export function loadSyncConfig(input: string | unknown): SyncConfig {
  const { config, errors } = validateSyncConfig(input);
  if (config === null) throw new InvalidSyncConfig(errors);
  return config;
}
