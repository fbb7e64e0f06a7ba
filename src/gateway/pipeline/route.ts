import { API_GROUP, API_VERSION } from '../../api/meta.ts';
import { isNamespaceName, isObjectName } from '../../api/names.ts';
import { KINDS, type KindInfo } from '../../api/registry.ts';
import { badRequest, methodNotAllowed, notFound, StatusError, sanitize } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { type EndpointRoute, routeAllows } from '../../http/endpoint.ts';
import type { GatewayEndpoint } from '../endpoints/endpoint.ts';

/**
 * Routing of the management API, pure: from method, path and query to what is asked, in
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
  const raw = trimmed.slice(GROUP_VERSION_PATH.length + 1).split('/');
  const segments: string[] = [];
  for (const part of raw) {
    const decoded = decodeSegment(part);
    if (typeof decoded !== 'string') return decoded;
    if (decoded === '') return notFound();
    segments.push(decoded);
  }

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
  const namespaced = parent.scope === 'Namespaced';
  if (!namespaced && namespace !== '') return notFound(`${resource} is not namespaced`);
  if (name !== '' && !isObjectName(name)) {
    return badRequest(`invalid name "${sanitize(name)}": must be a lower case DNS-1123 subdomain`);
  }
  let info: KindInfo | undefined = parent;
  if (subresource !== '') {
    const virtual = VIRTUAL_SUBRESOURCES.get(resource) ?? [];
    if (subresource === 'status' && parent.stored) info = parent;
    else if (virtual.includes(subresource)) {
      info = KINDS.find(
        (kind) =>
          'subresourceOf' in kind &&
          kind.subresourceOf?.plural === resource &&
          kind.subresourceOf.subresource === subresource,
      );
    } else
      return notFound(
        `the server could not find the requested resource "${sanitize(resource)}/${sanitize(subresource)}"`,
      );
  }
  // A namespaced kind needs its namespace, except for the list (and watch) across namespaces.
  const verb = resourceVerb(method, name !== '', query);
  if (verb === undefined) return methodNotAllowed(`${sanitize(method)} is not supported`);
  if (namespaced && namespace === '' && !(name === '' && (verb === 'list' || verb === 'watch'))) {
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
  const attributes: RequestAttributes = {
    target: 'Management',
    verb,
    resourceRequest: true,
    apiGroup: API_GROUP,
    resource,
    subresource,
    name,
    namespace,
    path: trimmed,
    ...(resource === 'projects' && name !== '' ? { project: name } : {}),
    ...(resource === 'clusters' && name !== '' ? { cluster: name } : {}),
    ...(resource === 'virtualclusterinstances' && name !== '' ? { virtualCluster: { name, namespace } } : {}),
  };
  return { kind: 'resource', info, parent, attributes, query };
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

// -----------------------------------------------------------------------------------------------
// The route stage: which endpoint answers a request (or the proxy), and what it is.

/** Where a request goes after routing. */
export type Routed =
  /** One of the gateway's endpoints (its own resources, TokenReview, documents, login). */
  | {
      readonly kind: 'endpoint';
      readonly endpoint: GatewayEndpoint;
      readonly attributes: RequestAttributes;
      readonly resource: ResourceRoute | undefined;
    }
  /** A stored kind: the impersonating proxy to kube-apiserver. */
  | { readonly kind: 'proxy'; readonly attributes: RequestAttributes; readonly resource: ResourceRoute }
  /**
   * Under the management API but not served: answered with `error` after authentication, as
   * kube-apiserver answers unknown paths (an unauthenticated caller learns nothing about them).
   */
  | { readonly kind: 'unknown'; readonly attributes: RequestAttributes; readonly error: StatusError };

/** Two endpoints claim the same route: a wiring mistake, found when the table is built. */
export class ConflictingEndpoints extends Error {
  override readonly name = 'ConflictingEndpoints';
}

/**
 * The endpoints by route, and the routing of every request to one of them or to the proxy. Pure
 * once built; `projectOf` adds the project (and space) a namespaced request concerns.
 */
export class EndpointTable {
  private readonly exactPaths = new Map<string, GatewayEndpoint>();
  /** Prefix routes, longest first. */
  private readonly prefixPaths: { prefix: string; endpoint: GatewayEndpoint }[] = [];
  private readonly nonResource = new Map<string, GatewayEndpoint>();
  private readonly resources = new Map<string, GatewayEndpoint>();

  constructor(endpoints: readonly GatewayEndpoint[]) {
    const claim = <K>(map: Map<K, GatewayEndpoint>, key: K, endpoint: GatewayEndpoint) => {
      const existing = map.get(key);
      if (existing)
        throw new ConflictingEndpoints(`${endpoint.name} and ${existing.name} both serve ${String(key)}`);
      map.set(key, endpoint);
    };
    const prefixes = new Map<string, GatewayEndpoint>();
    for (const endpoint of endpoints) {
      const route = endpoint.route;
      if (route.kind === 'path') claim(route.prefix ? prefixes : this.exactPaths, route.path, endpoint);
      else if (route.kind === 'nonResource')
        for (const path of route.paths) claim(this.nonResource, path, endpoint);
      else claim(this.resources, resourceKey(route.resource, route.subresource ?? ''), endpoint);
    }
    this.prefixPaths = [...prefixes]
      .map(([prefix, endpoint]) => ({ prefix, endpoint }))
      .sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** Whether an endpoint serves this resource (discovery leaves out virtual kinds nobody serves). */
  serves(resource: string, subresource: string): boolean {
    return this.resources.has(resourceKey(resource, subresource));
  }

  route(
    method: string,
    path: string,
    query: URLSearchParams,
    projectOf: (namespace: string) => string | undefined,
  ): Routed | StatusError {
    const pathEndpoint = this.pathEndpoint(path);
    if (pathEndpoint) {
      const route = pathEndpoint.route as Extract<EndpointRoute, { kind: 'path' }>;
      const attributes = route.attributes?.(method, path) ?? nonResourceAttributes(method, path);
      if (!routeAllows(route.methods, method))
        return methodNotAllowed(`${sanitize(method)} is not supported`);
      return { kind: 'endpoint', endpoint: pathEndpoint, attributes, resource: undefined };
    }
    if (path !== BASE_PATH && !path.startsWith(`${BASE_PATH}/`)) return notFound();
    const relative = path.slice(BASE_PATH.length) || '/';
    const route = routeRequest(method, relative, query);
    if (route instanceof StatusError) {
      return { kind: 'unknown', attributes: nonResourceAttributes(method, relative), error: route };
    }
    if (route.kind === 'nonResource') {
      const endpoint = this.nonResource.get(route.attributes.path);
      return endpoint
        ? { kind: 'endpoint', endpoint, attributes: route.attributes, resource: undefined }
        : { kind: 'unknown', attributes: route.attributes, error: notFound() };
    }
    const attributes = withProject(route.attributes, projectOf);
    const { resource, subresource, verb } = attributes;
    const endpoint = this.resources.get(resourceKey(resource, subresource));
    if (endpoint) {
      const served = endpoint.route as Extract<EndpointRoute, { kind: 'resource' }>;
      if (!served.verbs.includes(verb)) {
        return { kind: 'unknown', attributes, error: methodNotAllowedFor(attributes) };
      }
      return { kind: 'endpoint', endpoint, attributes, resource: { ...route, attributes } };
    }
    if (route.parent.stored && (subresource === '' || subresource === 'status')) {
      return { kind: 'proxy', attributes, resource: { ...route, attributes } };
    }
    const what = subresource ? `${resource}/${subresource}` : resource;
    return { kind: 'unknown', attributes, error: notFound(`${sanitize(what)} is not served`) };
  }

  /** The endpoint serving `path` by a `path` route (whatever the method), if any. */
  pathEndpoint(path: string): GatewayEndpoint | undefined {
    const exact = this.exactPaths.get(path);
    if (exact) return exact;
    for (const { prefix, endpoint } of this.prefixPaths) {
      if (path === prefix || path.startsWith(`${prefix}/`)) return endpoint;
    }
    return undefined;
  }
}

const resourceKey = (resource: string, subresource: string) =>
  subresource === '' ? resource : `${resource}/${subresource}`;

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
