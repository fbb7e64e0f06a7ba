import { stringify } from 'yaml';
import { type JsonSchema, toOpenApiSchema } from './jsonschema.ts';
import { API_GROUP, API_VERSION } from './meta.ts';
import { crdName, STORED_KINDS, type StoredKind } from './registry.ts';

/** The category every CRD of the group joins, so `kubectl get platform` lists them all. */
const CRD_CATEGORY = 'platform';

/**
 * The `openAPIV3Schema` of a stored kind. Root-level rules of the apiserver apply: `metadata`
 * is only `type: object` (the apiserver owns its schema), `apiVersion`/`kind` are plain strings,
 * and only `spec` is required (the apiserver requires the rest by itself).
 */
export function crdSchema(info: StoredKind): JsonSchema {
  const schema = toOpenApiSchema(info.schema, 'crd');
  const properties = { ...(schema.properties as Record<string, JsonSchema>) };
  for (const field of ['apiVersion', 'kind'] as const) {
    properties[field] = { type: 'string', description: properties[field]?.description };
  }
  properties.metadata = { type: 'object' };
  return { ...schema, properties, required: ['spec'] };
}

/** The CustomResourceDefinition of a stored kind. */
export function customResourceDefinition(info: StoredKind): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(info), labels: { 'app.kubernetes.io/part-of': 'platform' } },
    spec: {
      group: API_GROUP,
      names: {
        kind: info.kind,
        listKind: `${info.kind}List`,
        plural: info.plural,
        singular: info.singular,
        ...(info.shortNames.length > 0 ? { shortNames: [...info.shortNames] } : {}),
        categories: [CRD_CATEGORY],
      },
      scope: info.scope,
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: crdSchema(info) },
          subresources: Object.fromEntries(info.subresources.map((s) => [s, {}])),
          additionalPrinterColumns: info.printerColumns.map((c) => ({ ...c })),
          ...(info.selectableFields.length > 0
            ? { selectableFields: info.selectableFields.map((jsonPath) => ({ jsonPath })) }
            : {}),
        },
      ],
    },
  };
}

const HEADER = '# Generated from src/api by `platform crds`; do not edit.\n';

/** File name -> YAML text of every CRD, as committed under `crds/`. */
export function renderCrds(): Map<string, string> {
  return new Map(
    STORED_KINDS.map((info) => [
      `${crdName(info)}.yaml`,
      HEADER + stringify(customResourceDefinition(info), { lineWidth: 0, aliasDuplicateObjects: false }),
    ]),
  );
}
