import { methodNotAllowed, notFound, StatusError, sanitize } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { type EndpointRoute, routeAllows } from '../../http/endpoint.ts';
import { kubernetesQuery } from '../access-proxy/request-info.ts';
import { isAccessProxyPath, type ProxyLookup, routeProxyRequest } from '../access-proxy/route.ts';
import type { ProxyRoute } from '../access-proxy/target.ts';
import type { GatewayEndpoint } from '../endpoints/endpoint.ts';
import {
  BASE_PATH,
  methodNotAllowedFor,
  nonResourceAttributes,
  type ResourceRoute,
  routeRequest,
  withProject,
} from '../paths.ts';

/**
 * The route stage: which endpoint answers a request (or the proxy to kube-apiserver, or the access
 * proxy into a cluster), and what it is, from the path grammars (`../paths.ts`,
 * `../access-proxy/route.ts`) and the endpoints registered. The table is searched once per request.
 */

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
   * The access proxy: a request into a connected cluster, a virtual cluster or a space
   * (`/kubernetes/cluster/...`, `/kubernetes/project/...`), relayed as it is.
   */
  | { readonly kind: 'cluster'; readonly route: ProxyRoute; readonly attributes: RequestAttributes }
  /**
   * Under the management API but not served: answered with `error` after authentication, as
   * kube-apiserver answers unknown paths (an unauthenticated caller learns nothing about them).
   */
  | { readonly kind: 'unknown'; readonly attributes: RequestAttributes; readonly error: StatusError };

/**
 * A request answered with `error` before authentication: a path neither an endpoint nor the
 * management API serves (404), or a method a `path` endpoint does not serve (405, that
 * endpoint's answer headers on it).
 */
export interface RouteRefusal {
  readonly kind: 'refused';
  readonly endpoint: GatewayEndpoint | undefined;
  readonly error: StatusError;
}

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

  /**
   * Routes a request: `path` as sent (not percent-decoded), `search` the raw query with its `?`
   * (or empty). A proxied request's query is read as its target will read it (`kubernetesQuery`):
   * scope decisions are made on exactly what the target then does.
   */
  route(method: string, path: string, search: string, lookup: ProxyLookup): Routed | RouteRefusal {
    if (isAccessProxyPath(path)) return accessProxyRoute(method, path, search, lookup);
    const pathEndpoint = this.pathEndpoint(path);
    if (pathEndpoint) {
      const route = pathEndpoint.route as Extract<EndpointRoute, { kind: 'path' }>;
      if (!routeAllows(route.methods, method)) {
        const error = methodNotAllowed(`${sanitize(method)} is not supported`);
        return { kind: 'refused', endpoint: pathEndpoint, error };
      }
      const attributes = route.attributes?.(method, path) ?? nonResourceAttributes(method, path);
      return { kind: 'endpoint', endpoint: pathEndpoint, attributes, resource: undefined };
    }
    if (path !== BASE_PATH && !path.startsWith(`${BASE_PATH}/`))
      return { kind: 'refused', endpoint: undefined, error: notFound() };
    const relative = path.slice(BASE_PATH.length) || '/';
    return this.routeManagementApi(method, relative, new URLSearchParams(search), lookup.projectOfNamespace);
  }

  /** A request under {@link BASE_PATH} (`relative` to it): an endpoint, the proxy, or unknown. */
  private routeManagementApi(
    method: string,
    relative: string,
    query: URLSearchParams,
    projectOf: (namespace: string) => string | undefined,
  ): Routed {
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
  private pathEndpoint(path: string): GatewayEndpoint | undefined {
    const exact = this.exactPaths.get(path);
    if (exact) return exact;
    for (const { prefix, endpoint } of this.prefixPaths) {
      if (path === prefix || path.startsWith(`${prefix}/`)) return endpoint;
    }
    return undefined;
  }
}

/**
 * A request of the access proxy: into its target, or (a path it cannot route) answered with the
 * error after authentication, as the management API answers its unknown paths.
 */
function accessProxyRoute(method: string, path: string, search: string, lookup: ProxyLookup): Routed {
  // Go's url.ParseQuery, not the WHATWG reading: `a;b`, bad escapes and too many parameters are
  // refused, where the two would read a different request (a field selector naming one object
  // here, none there).
  const query = kubernetesQuery(search.startsWith('?') ? search.slice(1) : search);
  const route = query instanceof StatusError ? query : routeProxyRequest(method, path, query, lookup);
  if (route instanceof StatusError)
    return { kind: 'unknown', attributes: nonResourceAttributes(method, path), error: route };
  return { kind: 'cluster', route, attributes: route.attributes };
}

const resourceKey = (resource: string, subresource: string) =>
  subresource === '' ? resource : `${resource}/${subresource}`;
