import { isNamespaceName, isObjectName } from '../../api/names.ts';
import { badRequest, forbidden, notFound, StatusError, sanitize } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { type RequestInfo, requestInfo } from './request-info.ts';
import type { ProxyRoute, ProxyTarget } from './target.ts';

/**
 * The access proxy's path grammar, pure: from a request's method, path and query to the target it
 * goes to and what it asks there ({@link ProxyRoute}).
 *
 * - `/kubernetes/cluster/<cluster>/<rest>`: a connected cluster;
 * - `/kubernetes/project/<project>/virtualcluster/<name>/<rest>`: a project's virtual cluster;
 * - `/kubernetes/project/<project>/space/<namespace>/<rest>`: one namespace of the project, on the
 *   host cluster.
 *
 * `<rest>` goes upstream exactly as the client sent it (percent-encoding kept, `/` when empty),
 * and only once the whole path is canonical, so that the target reads the very path we routed and
 * authorized. Decisions (each a refusal before anything leaves the platform):
 *
 * - 400 for a path that is not canonical: a `.` or `..` segment, raw or percent-encoded (`%2e`);
 *   an encoded `/` or `\` (`%2F`, `%5C`); an empty segment (`//`) anywhere but at the very end;
 *   malformed or non-UTF-8 percent-encoding; a raw character outside RFC 3986's path characters
 *   (and the `[` `]` Go's clients leave raw): `\` (a WHATWG URL parser reads it as `/`), `#`,
 *   `?`, spaces, anything not ASCII.
 *   Different readers resolve these differently (Go's `path.Clean`, WHATWG, a proxy in front),
 *   so no reading of them is safe, and no client sends them.
 * - 404 for a canonical path that names no target: an unknown keyword, a missing name, or a name
 *   that is no valid object name (a namespace name for a space), so `Prod`, `prod.` or `a:b`
 *   (no such object can exist: the same answer as for one that does not exist). Keywords and
 *   names are read percent-decoded, as the target would read them: `%63luster` is `cluster`.
 *   Whether a named target exists is NOT decided here but after the key's scope (the targets
 *   answer 404 for an unknown cluster, virtual cluster, project or a space outside its project):
 *   a key scoped elsewhere gets the scope's 403 either way and learns nothing of what exists.
 * - 403 for a space request outside its namespace: a space reaches only resource requests in its
 *   namespace (the namespace object itself by `get` only) and the discovery, version and OpenAPI
 *   documents kubectl reads (`GET` of {@link SPACE_NON_RESOURCE_PATHS}, `/openapi/v3/...`).
 *
 * The request is read by {@link requestInfo} on the decoded rest (what the target's Go server
 * sees as `req.URL.Path`); `attributes.path` is that reading, which equals `upstreamPath` for a
 * path without percent-encoding.
 */

/** What routing needs to know of projects, from the gateway's informers. */
export interface ProxyLookup {
  /** The project whose namespace `namespace` is (`projectOfNamespace` in `api/project-namespace.ts`). */
  projectOfNamespace(namespace: string): string | undefined;
  /** The namespace of the project, undefined when there is no such project. */
  namespaceOfProject(project: string): string | undefined;
}

const PREFIX = 'kubernetes';

/** The non-resource paths a space reaches (with `GET`), besides everything under `/openapi/v3/`. */
export const SPACE_NON_RESOURCE_PATHS: readonly string[] = Object.freeze([
  '/api',
  '/api/v1',
  '/apis',
  '/version',
  '/openapi/v2',
  '/openapi/v3',
]);

/**
 * Whether `path` (absolute, as sent) is the access proxy's to answer. True for every path that
 * the most lenient reader (percent-decoding, `\` for `/`, empty and `.` segments dropped, `..`
 * resolved, any case) would take for a proxy path, so that a non-canonical spelling of one is
 * refused by {@link routeProxyRequest} rather than answered by another handler.
 */
export function isAccessProxyPath(path: string): boolean {
  const segments: string[] = [];
  for (const segment of leniently(path).split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment.toLowerCase());
  }
  const [prefix, kind, , projectKind] = segments;
  if (prefix !== PREFIX) return false;
  return (
    kind === 'cluster' ||
    (kind === 'project' && (projectKind === 'virtualcluster' || projectKind === 'space'))
  );
}

/** The path percent-decoded where it decodes (whatever does not stays as it is), `\` read as `/`. */
function leniently(path: string): string {
  const decoded = path.replace(/(%[0-9a-fA-F]{2})+/g, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes;
    }
  });
  return decoded.replaceAll('\\', '/');
}

/**
 * Routes a request of the access proxy. `path` is absolute and as sent (not percent-decoded),
 * `query` as `kubernetesQuery` (request-info.ts) reads the raw query. Returns a
 * {@link StatusError} (400, 403, 404; see the module comment) for what may not go anywhere.
 */
export function routeProxyRequest(
  method: string,
  path: string,
  query: URLSearchParams,
  lookup: ProxyLookup,
): ProxyRoute | StatusError {
  const segments = canonicalSegments(path);
  if (segments instanceof StatusError) return segments;
  const named = namedTarget(segments.decoded);
  if (named instanceof StatusError) return named;
  const { target, length } = named;
  const upstreamPath = `/${segments.raw.slice(length).join('/')}`;
  const info = requestInfo(method, `/${segments.decoded.slice(length).join('/')}`, query);
  if (info instanceof StatusError) return info;
  switch (target.kind) {
    case 'Cluster':
      return { target, upstreamPath, attributes: { ...info, target: 'Cluster', cluster: target.cluster } };
    case 'ProjectVirtualCluster': {
      // An unknown project's virtual cluster lives in no namespace; the targets answer 404 for it.
      const namespace = lookup.namespaceOfProject(target.project) ?? '';
      const virtualCluster = { name: target.virtualCluster, namespace };
      const attributes: RequestAttributes = {
        ...info,
        target: 'ProjectVirtualCluster',
        project: target.project,
        virtualCluster,
      };
      return { target, upstreamPath, attributes };
    }
    case 'ProjectSpace': {
      const refusal = spaceRefusal(target.space, info);
      if (refusal) return refusal;
      const attributes: RequestAttributes = {
        ...info,
        target: 'ProjectSpace',
        project: target.project,
        space: target.space,
      };
      return { target, upstreamPath, attributes };
    }
  }
}

/** A canonical path's segments, as sent and percent-decoded; a 400 for any other path. */
function canonicalSegments(path: string): { raw: string[]; decoded: string[] } | StatusError {
  if (!path.startsWith('/')) return badRequest('the request path must be absolute');
  const unencoded = /[^A-Za-z0-9\-._~!$&'()*+,;=:@%/[\]]/.exec(path);
  if (unencoded)
    return notCanonical(`it holds "${sanitize(unencoded[0])}", which a path spells percent-encoded`);
  const raw = path.slice(1).split('/');
  const decoded: string[] = [];
  for (const [index, segment] of raw.entries()) {
    if (segment === '' && index < raw.length - 1) return notCanonical('it holds an empty segment ("//")');
    let text: string;
    try {
      text = decodeURIComponent(segment);
    } catch {
      return notCanonical('it is not valid percent-encoded UTF-8');
    }
    if (text === '.' || text === '..') return notCanonical('it holds a "." or ".." segment');
    if (text.includes('/') || text.includes('\\')) return notCanonical('it holds an encoded "/" or "\\"');
    decoded.push(text);
  }
  return { raw, decoded };
}

const notCanonical = (why: string) => badRequest(`the request path is not canonical: ${why}`);

/** The target the decoded segments name, and how many segments name it; 404 for none. */
function namedTarget(segments: readonly string[]): { target: ProxyTarget; length: number } | StatusError {
  const [prefix, kind, first = '', projectKind, second = ''] = segments;
  if (prefix === PREFIX && kind === 'cluster') {
    if (!isObjectName(first)) return notFound(`cluster "${sanitize(first)}" not found: not a valid name`);
    return { target: { kind: 'Cluster', cluster: first }, length: 3 };
  }
  if (
    prefix !== PREFIX ||
    kind !== 'project' ||
    (projectKind !== 'virtualcluster' && projectKind !== 'space')
  ) {
    return notFound();
  }
  if (!isObjectName(first)) return notFound(`project "${sanitize(first)}" not found: not a valid name`);
  if (projectKind === 'virtualcluster') {
    if (!isObjectName(second)) {
      return notFound(`virtual cluster "${sanitize(second)}" not found: not a valid name`);
    }
    return { target: { kind: 'ProjectVirtualCluster', project: first, virtualCluster: second }, length: 5 };
  }
  if (!isNamespaceName(second)) return notFound(`space "${sanitize(second)}" not found: not a valid name`);
  return { target: { kind: 'ProjectSpace', project: first, space: second }, length: 5 };
}

/** Why a space may not send `info`, if it may not; see the module comment. */
function spaceRefusal(space: string, info: RequestInfo): StatusError | undefined {
  if (isSpaceRequest(space, info)) return undefined;
  const what = info.resourceRequest
    ? `${info.verb} ${info.subresource ? `${info.resource}/${info.subresource}` : info.resource}${
        info.namespace ? ` in namespace "${sanitize(info.namespace)}"` : ' (cluster-wide)'
      }`
    : `${info.verb} ${sanitize(info.path)}`;
  return forbidden(
    `space "${space}" reaches only namespace "${space}": ${sanitize(what, 200)} is outside it`,
  );
}

function isSpaceRequest(space: string, info: RequestInfo): boolean {
  if (!info.resourceRequest) {
    const path = info.path.length > 1 && info.path.endsWith('/') ? info.path.slice(0, -1) : info.path;
    return info.verb === 'get' && isSpaceNonResourcePath(path);
  }
  if (info.namespace !== space) return false;
  // `namespaces/<space>` reads as the namespace `<space>` itself; anything else spelled
  // `namespaces` under it (another group's, a subresource, a write) is no request in the space.
  if (info.resource === 'namespaces') {
    return info.apiGroup === '' && info.name === space && info.subresource === '' && info.verb === 'get';
  }
  return true;
}

/** `/apis/<group>` and `/apis/<group>/<version>` are discovery too. */
function isSpaceNonResourcePath(path: string): boolean {
  if (SPACE_NON_RESOURCE_PATHS.includes(path) || path.startsWith('/openapi/v3/')) return true;
  const segments = path.split('/');
  return segments[1] === 'apis' && (segments.length === 3 || segments.length === 4);
}
