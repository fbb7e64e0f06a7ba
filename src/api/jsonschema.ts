import { z } from 'zod';
import { isJsonObject } from '../runtime/json.ts';

/** A JSON Schema (OpenAPI v3 flavour) node, as the generators emit it. */
export type JsonSchema = { [key: string]: unknown };

/** Which consumer the schema is for: a CRD (structural, apiserver rules) or a served OpenAPI document. */
type SchemaTarget = 'crd' | 'openapi';

const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);
/** Keys zod emits that neither a CRD nor an OpenAPI v3.0 document accepts. */
const DROPPED_KEYS = new Set(['$schema', '$id', 'id', 'propertyNames', 'contentEncoding', 'const']);

/**
 * The OpenAPI v3 schema of a zod schema (its input side: what clients send), cleaned for
 * Kubernetes: safe-integer bounds become `format: int64`, zod's date-time regex gives way to
 * `format: date-time`, `propertyNames` (not allowed in CRDs) is dropped because the same rule is
 * carried by CEL, and free-form objects keep only `x-kubernetes-preserve-unknown-fields`.
 */
export function toOpenApiSchema(schema: z.ZodType, target: SchemaTarget): JsonSchema {
  const raw = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'input',
    unrepresentable: 'any',
    reused: 'inline',
    cycles: 'throw',
  }) as JsonSchema;
  return clean(raw, target);
}

function clean(node: JsonSchema, target: SchemaTarget): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED_KEYS.has(key)) continue;
    if (key === 'properties' && isJsonObject(value)) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([name, child]) => [name, clean(child as JsonSchema, target)]),
      );
    } else if ((key === 'items' || key === 'additionalProperties') && isJsonObject(value)) {
      out[key] = clean(value, target);
    } else if ((key === 'anyOf' || key === 'oneOf' || key === 'allOf') && Array.isArray(value)) {
      out[key] = value.map((child) => clean(child as JsonSchema, target));
    } else {
      out[key] = value;
    }
  }
  if ('const' in node && !('enum' in node)) out.enum = [node.const];
  if (out.type === 'integer') {
    if (SAFE_INTEGER_BOUNDS.has(out.minimum as number)) delete out.minimum;
    if (SAFE_INTEGER_BOUNDS.has(out.maximum as number)) delete out.maximum;
    out.format ??= 'int64';
  }
  if (out.format === 'date-time') delete out.pattern;
  if (out.format === 'base64') out.format = 'byte';
  if (out['x-kubernetes-preserve-unknown-fields'] === true) {
    delete out.additionalProperties;
    delete out.properties;
  }
  // Structural schemas forbid `properties` next to `additionalProperties`; zod only adds
  // `additionalProperties: false` for strict objects, which we do not use, so dropping it loses nothing.
  if (out.properties && 'additionalProperties' in out) delete out.additionalProperties;
  if (Array.isArray(out.required) && out.required.length === 0) delete out.required;
  return out;
}
