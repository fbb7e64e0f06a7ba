import { createHash } from 'node:crypto';
import { openApiV3ForGroupVersion } from '../../api/openapi.ts';
import { GROUP_VERSION_PATH } from '../paths.ts';
import { openApiV2Protobuf } from './openapi-v2-protobuf.ts';

/**
 * The OpenAPI documents the gateway serves, from the zod schemas (`openApiV3ForGroupVersion`):
 *
 * - `/openapi/v3`: the index kubectl reads first; `serverRelativeURL` carries the base path,
 *   because client-go requests it as an absolute path on the server's host;
 * - `/openapi/v3/apis/management.platform/v1`: the document, with the query parameters kube-apiserver
 *   declares on writes (`dryRun`, `fieldManager`, `fieldValidation`, `force`). kubectl looks for
 *   `fieldValidation` on a kind's PATCH operation to decide that the server validates fields
 *   itself; without it kubectl falls back to client-side validation through the protobuf OpenAPI
 *   v2 document (as it does for kinds without a PATCH operation, DirectClusterEndpointToken);
 * - `/openapi/v2`: the same schemas as Swagger 2.0 JSON, for tools that still read v2, and as
 *   protobuf (`openapi-v2-protobuf.ts`) for kubectl's client-side validation.
 */

type Json = Record<string, unknown>;

const queryParam = (name: string, description: string) => ({
  name,
  in: 'query',
  description,
  schema: { type: 'string', uniqueItems: true },
});

const DRY_RUN = queryParam(
  'dryRun',
  'When present, modifications are not persisted. `All` processes every stage.',
);
const FIELD_MANAGER = queryParam('fieldManager', 'Name of the actor making the change.');
const FIELD_VALIDATION = queryParam(
  'fieldValidation',
  'How the server treats unknown or duplicate fields: `Ignore`, `Warn` (default) or `Strict`.',
);
const FORCE = {
  name: 'force',
  in: 'query',
  description: 'Force an apply request: take over fields owned by other managers.',
  schema: { type: 'boolean', uniqueItems: true },
};
const WATCH_PARAMS = [
  queryParam('labelSelector', 'Restricts the list by labels.'),
  queryParam('fieldSelector', 'Restricts the list by fields.'),
  { ...queryParam('limit', 'Most items per page.'), schema: { type: 'integer', uniqueItems: true } },
  queryParam('continue', 'Token of the next page.'),
  queryParam('resourceVersion', 'Which version of the list to serve.'),
  { ...queryParam('watch', 'Stream changes.'), schema: { type: 'boolean', uniqueItems: true } },
];

/** The group version document with write query parameters added; memoized. */
let groupVersionDocument: { json: string; hash: string; doc: Json } | undefined;

export function openApiV3GroupVersion(): { json: string; hash: string; doc: Json } {
  if (groupVersionDocument) return groupVersionDocument;
  const doc = openApiV3ForGroupVersion() as Json;
  const paths = (doc.paths ?? {}) as Record<string, Json>;
  for (const item of Object.values(paths)) {
    for (const [method, params] of [
      ['post', [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]],
      ['put', [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]],
      ['patch', [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE]],
      ['delete', [DRY_RUN]],
    ] as const) {
      const operation = item[method] as Json | undefined;
      if (operation) operation.parameters = [...((operation.parameters as unknown[]) ?? []), ...params];
    }
    const list = item.get as Json | undefined;
    if (list && list['x-kubernetes-action'] === 'list') {
      list.parameters = [...((list.parameters as unknown[]) ?? []), ...WATCH_PARAMS];
    }
  }
  const json = JSON.stringify(doc);
  const hash = createHash('sha512').update(json).digest('hex').toUpperCase();
  groupVersionDocument = { json, hash, doc };
  return groupVersionDocument;
}

/** `/openapi/v3`: where each group version's document is. */
export function openApiV3Index(basePath: string): Json {
  const { hash } = openApiV3GroupVersion();
  return {
    paths: {
      [GROUP_VERSION_PATH.slice(1)]: {
        serverRelativeURL: `${basePath}/openapi/v3${GROUP_VERSION_PATH}?hash=${hash}`,
      },
    },
  };
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (typeof value !== 'object' || value === null) return value;
  const out: Json = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof inner === 'string'
        ? inner.replace('#/components/schemas/', '#/definitions/')
        : rewriteRefs(inner);
  }
  return out;
}

function v2Parameter(parameter: Json): Json {
  const schema = (parameter.schema ?? {}) as Json;
  const { schema: _schema, ...rest } = parameter;
  return { ...rest, type: schema.type ?? 'string', ...(schema.uniqueItems ? { uniqueItems: true } : {}) };
}

function v2Operation(operation: Json): Json {
  const { requestBody, responses, parameters, ...rest } = operation;
  const params = ((parameters as Json[] | undefined) ?? []).map(v2Parameter);
  const body = requestBody as { content?: Record<string, { schema?: unknown }> } | undefined;
  const consumes = body?.content ? Object.keys(body.content) : undefined;
  if (body?.content) {
    const first = Object.values(body.content)[0];
    params.push({ name: 'body', in: 'body', required: true, schema: first?.schema ?? { type: 'object' } });
  }
  const v2Responses: Json = {};
  for (const [code, response] of Object.entries((responses ?? {}) as Record<string, Json>)) {
    const content = response.content as Record<string, { schema?: unknown }> | undefined;
    const schema = content ? Object.values(content)[0]?.schema : undefined;
    v2Responses[code] = { description: response.description ?? '', ...(schema ? { schema } : {}) };
  }
  return {
    ...rest,
    ...(consumes ? { consumes } : {}),
    produces: ['application/json', 'application/yaml'],
    schemes: ['https'],
    ...(params.length > 0 ? { parameters: params } : {}),
    responses: v2Responses,
  };
}

let v2Document: string | undefined;

/** `/openapi/v2` as Swagger 2.0 JSON; memoized. */
export function openApiV2(): string {
  if (v2Document) return v2Document;
  const v3 = openApiV3GroupVersion().doc;
  const components = (v3.components ?? {}) as { schemas?: Json };
  const paths: Json = {};
  for (const [path, item] of Object.entries((v3.paths ?? {}) as Record<string, Json>)) {
    const out: Json = {};
    for (const [key, value] of Object.entries(item)) {
      out[key] = key === 'parameters' ? (value as Json[]).map(v2Parameter) : v2Operation(value as Json);
    }
    paths[path] = out;
  }
  v2Document = JSON.stringify(
    rewriteRefs({
      swagger: '2.0',
      info: v3.info,
      paths,
      definitions: components.schemas ?? {},
    }),
  );
  return v2Document;
}

let v2Protobuf: Buffer | undefined;

/** `/openapi/v2` as protobuf (gnostic's `openapi.v2.Document`), from the same JSON; memoized. */
export function openApiV2ProtobufDocument(): Buffer {
  v2Protobuf ??= openApiV2Protobuf(JSON.parse(openApiV2()) as Record<string, unknown>);
  return v2Protobuf;
}
