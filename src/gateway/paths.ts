import { API_GROUP, API_VERSION } from '../api/meta.ts';
import { isNamespaceName, isObjectName } from '../api/names.ts';
import { KINDS, type KindInfo } from '../api/registry.ts';
import { badRequest, methodNotAllowed, notFound, StatusError, sanitize } from '../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../authz/attributes.ts';

/**
 * The management API's path grammar, pure: from method, path and query to what is asked, in
 * Kubernetes' authorizer terms ({@link RequestAttributes}). Everything the gateway decides about a
 * request (scope, audit, which handler) starts from here.
 *
 * Paths are relative to the gateway's base path (`/kubernetes/management`):
 *
 * - non-resource: `/api`, `/apis`, `/apis/management.platform`, `/apis/management.platform/v1`,
 *   `/version`, `/openapi/v2`, `/openapi/v3`, `/openapi/v3/apis/management.platform/v1`,
 *   `/healthz`, `/livez`, `/readyz`;
 * - resources: `/apis/management.platform/v1/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`.
 */

export const BASE_PATH = '/kubernetes/management';
export const GROUP_PATH = `/apis/${API_GROUP}`;
export const GROUP_VERSION_PATH = `/apis/${API_GROUP}/${API_VERSION}`;

export type NonResourceEndpoint =
  | 'api'
  | 'apis'
  | 'group'
  | 'groupVersion'
  | 'version'
  | 'openapiV2'
  | 'openapiV3'
  | 'openapiV3GroupVersion'
  | 'healthz'
  | 'readyz';

export interface NonResourceRoute {
  readonly kind: 'nonResource';
  readonly endpoint: NonResourceEndpoint;
  readonly attributes: RequestAttributes;
}

export interface ResourceRoute {
  readonly kind: 'resource';
  /** The kind served at the resource (for `projects/members`, ProjectMembers). */
  readonly info: KindInfo | undefined;
  /** The top-level resource's kind (for `projects/members`, Project). */
  readonly parent: KindInfo;
  readonly attributes: RequestAttributes;
  /** The query, as sent. */
  readonly query: URLSearchParams;
}

export type Route = NonResourceRoute | ResourceRoute;

// Maps, not object literals: a path segment such as `toString` or `constructor` must find
// nothing, not a property of Object.prototype.
const NON_RESOURCE: ReadonlyMap<string, NonResourceEndpoint> = new Map(
  Object.entries({
    '/api': 'api',
    '/apis': 'apis',
    [GROUP_PATH]: 'group',
    [GROUP_VERSION_PATH]: 'groupVersion',
    '/version': 'version',
    '/openapi/v2': 'openapiV2',
    '/openapi/v3': 'openapiV3',
    [`/openapi/v3${GROUP_VERSION_PATH}`]: 'openapiV3GroupVersion',
    '/healthz': 'healthz',
    '/livez': 'healthz',
    '/readyz': 'readyz',
  } satisfies Record<string, NonResourceEndpoint>),
);

/** Other spellings of resources in paths (the established product's docs say `config`). */
const RESOURCE_ALIASES: ReadonlyMap<string, string> = new Map([['config', 'configs']]);

/** Subresources served per top-level resource, besides the CRD's `status`. */
const VIRTUAL_SUBRESOURCES: ReadonlyMap<string, readonly string[]> = new Map([
  ['projects', ['members']],
  ['virtualclusterinstances', ['kubeconfig']],
  ['users', ['accesskeys', 'tokenrevocation']],
  ['teams', ['accesskeys']],
]);

/**
 * Whether a query asks for a watch, read as kube-apiserver reads the parameter (its
 * `Convert_Slice_string_To_bool`): the first `watch` value counts, and every value but `0` and
 * `false` (any case) is true, the empty one included.
 */
export function isWatch(query: URLSearchParams): boolean {
  const value = query.get('watch');
  return value !== null && value !== '0' && value.toLowerCase() !== 'false';
}

/** The largest resource version kube-apiserver's storage reads (`strconv.ParseUint(rv, 10, 64)`). */
const MAX_RESOURCE_VERSION = 18_446_744_073_709_551_615n;

/** Whether `text` is a `resourceVersion` kube-apiserver can read: empty, or a decimal of at most 64 bits. */
export function isResourceVersion(text: string): boolean {
  return text === '' || (/^\d{1,20}$/.test(text) && BigInt(text) <= MAX_RESOURCE_VERSION);
}

/**
 * The Kubernetes verb of a resource request. As in kube-apiserver's `RequestInfoFactory`, only a
 * collection GET becomes `watch` or `list`; a named GET is a `get`, whatever its query says (the
 * apiserver answers it with the object).
 */
export function resourceVerb(method: string, hasName: boolean, query: URLSearchParams): string | undefined {
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (hasName) return 'get';
      return isWatch(query) ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return hasName ? 'delete' : 'deletecollection';
    default:
      return undefined;
  }
}

function decodeSegment(segment: string): string | StatusError {
  try {
    return decodeURIComponent(segment);
  } catch {
    return badRequest('the request path is not valid percent-encoding');
  }
}

/** A request on a path that is no API resource (verb: the lower-cased method). */
export const nonResourceAttributes = (method: string, path: string): RequestAttributes =>
  nonResourceRequest(method.toLowerCase(), path);

/**
 * Routes a request. `path` is relative to {@link BASE_PATH} and not yet percent-decoded; `query`
 * is the parsed query. Returns a {@link StatusError} (404, 400, 405) for what is not served.
 */
export function routeRequest(method: string, path: string, query: URLSearchParams): Route | StatusError {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  const endpoint = NON_RESOURCE.get(trimmed === '' ? '/' : trimmed);
  if (endpoint) {
    return { kind: 'nonResource', endpoint, attributes: nonResourceAttributes(method, trimmed) };
  }
  if (!trimmed.startsWith(`${GROUP_VERSION_PATH}/`)) return notFound();
  const segments = decodeSegments(trimmed.slice(GROUP_VERSION_PATH.length + 1));
  if (segments instanceof StatusError) return segments;
  const target = resourceTarget(segments);
  if (target instanceof StatusError) return target;
  const verb = resourceVerb(method, target.name !== '', query);
  if (verb === undefined) return methodNotAllowed(`${sanitize(method)} is not supported`);
  const refused = refusedForVerb(target, verb, query);
  if (refused) return refused;
  return {
    kind: 'resource',
    info: target.info,
    parent: target.parent,
    attributes: resourceAttributes(target, verb, trimmed),
    query,
  };
}

/** The path segments below the group version, percent-decoded; 404 for an empty one. */
function decodeSegments(path: string): string[] | StatusError {
  const segments: string[] = [];
  for (const part of path.split('/')) {
    const decoded = decodeSegment(part);
    if (typeof decoded !== 'string') return decoded;
    if (decoded === '') return notFound();
    segments.push(decoded);
  }
  return segments;
}

/** What a resource path names: `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`, aliases resolved. */
interface ResourceTarget {
  readonly namespace: string;
  readonly resource: string;
  readonly name: string;
  readonly subresource: string;
  readonly parent: KindInfo;
  readonly info: KindInfo | undefined;
}

/** The resource the segments name, whatever the verb; 404 or 400 for what is not served or not valid. */
function resourceTarget(segments: readonly string[]): ResourceTarget | StatusError {
  let namespace = '';
  let rest = segments;
  if (segments[0] === 'namespaces') {
    if (segments.length < 3) return notFound('namespaces are not served by the management API');
    namespace = segments[1] ?? '';
    if (!isNamespaceName(namespace)) {
      return badRequest(`invalid namespace "${sanitize(namespace)}": must be a DNS-1123 label`);
    }
    rest = segments.slice(2);
  }
  if (rest.length === 0 || rest.length > 3) return notFound();
  const [resourceSegment = '', name = '', subresource = ''] = rest;
  const resource = RESOURCE_ALIASES.get(resourceSegment) ?? resourceSegment;
  const parent = KINDS.find(
    (kind) => kind.plural === resource && !('subresourceOf' in kind && kind.subresourceOf),
  );
  if (!parent) return notFound(`the server could not find the requested resource "${sanitize(resource)}"`);
  if (parent.scope !== 'Namespaced' && namespace !== '') return notFound(`${resource} is not namespaced`);
  if (name !== '' && !isObjectName(name)) {
    return badRequest(`invalid name "${sanitize(name)}": must be a lower case DNS-1123 subdomain`);
  }
  if (subresource === '') return { namespace, resource, name, subresource, parent, info: parent };
  if (subresource === 'status' && parent.stored)
    return { namespace, resource, name, subresource, parent, info: parent };
  if ((VIRTUAL_SUBRESOURCES.get(resource) ?? []).includes(subresource)) {
    const info = KINDS.find(
      (kind) =>
        'subresourceOf' in kind &&
        kind.subresourceOf?.plural === resource &&
        kind.subresourceOf.subresource === subresource,
    );
    return { namespace, resource, name, subresource, parent, info };
  }
  return notFound(
    `the server could not find the requested resource "${sanitize(resource)}/${sanitize(subresource)}"`,
  );
}

/** Why a `verb` request on the target is refused, if it is: a missing namespace, an unreadable resourceVersion. */
function refusedForVerb(
  target: ResourceTarget,
  verb: string,
  query: URLSearchParams,
): StatusError | undefined {
  const { namespace, resource, name } = target;
  // A namespaced kind needs its namespace, except for the list (and watch) across namespaces.
  if (
    target.parent.scope === 'Namespaced' &&
    namespace === '' &&
    !(name === '' && (verb === 'list' || verb === 'watch'))
  ) {
    return notFound(`${resource} is namespaced: use /namespaces/<namespace>/${resource}`);
  }
  // kube-apiserver validates it for lists (400) but answers a get or a watch with one it cannot
  // read with a 500: refused here for every read, as the list is.
  const resourceVersion = query.get('resourceVersion');
  if (
    (verb === 'get' || verb === 'list' || verb === 'watch') &&
    resourceVersion !== null &&
    !isResourceVersion(resourceVersion)
  ) {
    return badRequest(
      `resourceVersion: Invalid value: "${sanitize(resourceVersion)}": must be empty or a resource version (a decimal number)`,
    );
  }
  return undefined;
}

/** The authorizer's view of a resource request (`path`: relative to the base, trimmed). */
function resourceAttributes(target: ResourceTarget, verb: string, path: string): RequestAttributes {
  const { namespace, resource, name, subresource } = target;
  return {
    target: 'Management',
    verb,
    resourceRequest: true,
    apiGroup: API_GROUP,
    resource,
    subresource,
    name,
    namespace,
    path,
    ...(resource === 'projects' && name !== '' ? { project: name } : {}),
    ...(resource === 'clusters' && name !== '' ? { cluster: name } : {}),
    ...(resource === 'virtualclusterinstances' && name !== '' ? { virtualCluster: { name, namespace } } : {}),
  };
}

/** The path of the same request on kube-apiserver (resource names canonical, aliases resolved). */
export function upstreamPath(attributes: RequestAttributes): string {
  const parts = [GROUP_VERSION_PATH];
  if (attributes.namespace) parts.push('namespaces', encodeURIComponent(attributes.namespace));
  parts.push(attributes.resource);
  if (attributes.name) parts.push(encodeURIComponent(attributes.name));
  if (attributes.subresource) parts.push(attributes.subresource);
  return parts.join('/');
}

/**
 * The project a namespaced request concerns, and its space: the namespace itself (a space is a
 * namespace of a project, as the reference product uses the word).
 */
export function withProject(
  attributes: RequestAttributes,
  projectOf: (namespace: string) => string | undefined,
): RequestAttributes {
  if (attributes.namespace === '') return attributes;
  const project = attributes.project ?? projectOf(attributes.namespace);
  if (project === undefined) return attributes;
  return { ...attributes, project, space: attributes.namespace };
}

/** 405 in kube-apiserver's words. */
export function methodNotAllowedFor(attributes: RequestAttributes): StatusError {
  const resource = attributes.subresource
    ? `${attributes.resource}/${attributes.subresource}`
    : attributes.resource;
  return new StatusError(
    405,
    'MethodNotAllowed',
    `the server does not allow this method on the requested resource (${attributes.verb} ${resource})`,
  );
}
