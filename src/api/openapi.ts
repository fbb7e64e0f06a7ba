import { type JsonSchema, toOpenApiSchema } from './jsonschema.ts';
import { API_GROUP, API_VERSION } from './meta.ts';
import { KINDS, type KindInfo, type Verb } from './registry.ts';

/** Name of a kind's schema in `components.schemas`, reversed group as Kubernetes names CRD schemas. */
export function schemaName(kind: string): string {
  return `${API_GROUP.split('.').reverse().join('.')}.${API_VERSION}.${kind}`;
}

const gvk = (kind: string) => [{ group: API_GROUP, version: API_VERSION, kind }];
const ref = (kind: string) => ({ $ref: `#/components/schemas/${schemaName(kind)}` });
const STATUS_REF = { $ref: `#/components/schemas/${schemaName('Status')}` };

const param = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string', uniqueItems: true },
});
const NAMESPACE = param('namespace', 'Object name and auth scope, such as for teams and projects.');
const NAME = param('name', 'Name of the object.');

function operation(
  info: KindInfo,
  action: string,
  responseKind: string,
  options: { body?: boolean; patch?: boolean; id: string },
): JsonSchema {
  const jsonContent = (schema: unknown) => ({
    'application/json': { schema },
    'application/yaml': { schema },
  });
  return {
    operationId: options.id,
    tags: [`${API_GROUP}_${API_VERSION}`],
    ...(options.body
      ? {
          requestBody: {
            required: true,
            content: options.patch
              ? Object.fromEntries(
                  [
                    'application/json-patch+json',
                    'application/merge-patch+json',
                    'application/apply-patch+yaml',
                  ].map((type) => [type, { schema: { type: 'object' } }]),
                )
              : jsonContent(ref(info.kind)),
          },
        }
      : {}),
    responses: {
      '200': { description: 'OK', content: jsonContent(ref(responseKind)) },
      ...(action === 'post'
        ? { '201': { description: 'Created', content: jsonContent(ref(responseKind)) } }
        : {}),
      default: { description: 'Error', content: { 'application/json': { schema: STATUS_REF } } },
    },
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk(info.kind)[0],
  };
}

function pathsOf(info: KindInfo): Record<string, JsonSchema> {
  const base = `/apis/${API_GROUP}/${API_VERSION}`;
  const can = (verb: Verb) => info.verbs.includes(verb);
  const id = (verb: string, suffix = '') =>
    `${verb}${info.scope === 'Namespaced' ? 'Namespaced' : ''}${info.kind}${suffix}`;
  const paths: Record<string, JsonSchema> = {};
  const scopePrefix = info.scope === 'Namespaced' ? `${base}/namespaces/{namespace}` : base;
  const scopeParams = info.scope === 'Namespaced' ? [NAMESPACE] : [];

  if ('subresourceOf' in info && info.subresourceOf) {
    const path = `${scopePrefix}/${info.subresourceOf.plural}/{name}/${info.subresourceOf.subresource}`;
    const item: JsonSchema = { parameters: [...scopeParams, NAME] };
    if (can('get')) item.get = operation(info, 'get', info.kind, { id: id('read') });
    if (can('create')) item.post = operation(info, 'post', info.kind, { id: id('create'), body: true });
    paths[path] = item;
    return paths;
  }

  const collection: JsonSchema = { parameters: scopeParams };
  if (can('list')) collection.get = operation(info, 'list', `${info.kind}List`, { id: id('list') });
  if (can('create')) collection.post = operation(info, 'post', info.kind, { id: id('create'), body: true });
  if (can('deletecollection'))
    collection.delete = operation(info, 'deletecollection', 'Status', { id: id('deleteCollection') });
  if (Object.keys(collection).length > 1) paths[`${scopePrefix}/${info.plural}`] = collection;

  const item: JsonSchema = { parameters: [...scopeParams, NAME] };
  if (can('get')) item.get = operation(info, 'get', info.kind, { id: id('read') });
  if (can('update')) item.put = operation(info, 'put', info.kind, { id: id('replace'), body: true });
  if (can('patch'))
    item.patch = operation(info, 'patch', info.kind, { id: id('patch'), body: true, patch: true });
  if (can('delete')) item.delete = operation(info, 'delete', 'Status', { id: id('delete') });
  if (Object.keys(item).length > 1) paths[`${scopePrefix}/${info.plural}/{name}`] = item;

  if (info.stored) {
    paths[`${scopePrefix}/${info.plural}/{name}/status`] = {
      parameters: [...scopeParams, NAME],
      get: operation(info, 'get', info.kind, { id: id('read', 'Status') }),
      put: operation(info, 'put', info.kind, { id: id('replace', 'Status'), body: true }),
      patch: operation(info, 'patch', info.kind, { id: id('patch', 'Status'), body: true, patch: true }),
    };
    if (info.scope === 'Namespaced' && can('list')) {
      paths[`${base}/${info.plural}`] = {
        get: operation(info, 'list', `${info.kind}List`, { id: `list${info.kind}ForAllNamespaces` }),
      };
    }
  }
  return paths;
}

function listSchema(info: KindInfo): JsonSchema {
  return {
    type: 'object',
    description: `A list of ${info.kind} objects.`,
    properties: {
      apiVersion: { type: 'string', description: 'Versioned schema of the representation.' },
      kind: { type: 'string', description: 'The resource kind.' },
      metadata: {
        type: 'object',
        description: 'List metadata.',
        properties: {
          resourceVersion: { type: 'string' },
          continue: { type: 'string' },
          remainingItemCount: { type: 'integer', format: 'int64' },
        },
      },
      items: { type: 'array', items: ref(info.kind), description: `The ${info.kind} objects.` },
    },
    required: ['items'],
    'x-kubernetes-group-version-kind': gvk(`${info.kind}List`),
  };
}

const STATUS_SCHEMA: JsonSchema = {
  type: 'object',
  description: 'The result of an operation that returns no object, or an error (a Kubernetes Status).',
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    status: { type: 'string', description: '`Success` or `Failure`.' },
    message: { type: 'string' },
    reason: { type: 'string' },
    code: { type: 'integer', format: 'int32' },
    details: {
      type: 'object',
      properties: {
        name: { type: 'string' },
        group: { type: 'string' },
        kind: { type: 'string' },
        causes: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              reason: { type: 'string' },
              message: { type: 'string' },
              field: { type: 'string' },
            },
          },
        },
      },
    },
  },
};

/**
 * The OpenAPI v3 document of the group version, every kind (stored and virtual) from the same
 * zod schemas as the CRDs; what the gateway serves at `/openapi/v3/apis/management.platform/v1`.
 * Each kind schema carries `x-kubernetes-group-version-kind`, which `kubectl explain` looks up.
 */
export function openApiV3ForGroupVersion(): JsonSchema {
  const schemas: Record<string, JsonSchema> = { [schemaName('Status')]: STATUS_SCHEMA };
  const paths: Record<string, JsonSchema> = {};
  for (const info of KINDS) {
    schemas[schemaName(info.kind)] = {
      ...toOpenApiSchema(info.schema, 'openapi'),
      'x-kubernetes-group-version-kind': gvk(info.kind),
    };
    if (info.stored || info.verbs.includes('list'))
      schemas[schemaName(`${info.kind}List`)] = listSchema(info);
    Object.assign(paths, pathsOf(info));
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Cluster management platform', version: `${API_GROUP}/${API_VERSION}` },
    paths,
    components: { schemas },
  };
}
