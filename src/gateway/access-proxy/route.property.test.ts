import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import { isAccessProxyPath, type ProxyLookup, routeProxyRequest } from './route.ts';
import type { ProxyTarget } from './target.ts';

/**
 * Properties of the access proxy's routing over generated paths full of adversarial spellings
 * (dot segments raw and encoded, encoded and raw separators, doubled slashes, odd case, names that
 * are keywords): whatever is routed goes to exactly the target that every lenient reading of the
 * path names (Go's decoding and `path.Clean`, a WHATWG URL parser), the rest goes upstream as a
 * path those readers read the same way, and a space never carries a request for another
 * namespace or for anything cluster-scoped. The oracles below are written independently of
 * `route.ts`: plain string handling, and the WHATWG parser itself.
 */

const lookup: ProxyLookup = {
  projectOfNamespace: (namespace) => (namespace === 'p-a' ? 'a' : namespace === 'p-b' ? 'b' : undefined),
  namespaceOfProject: (project) => (project === 'a' ? 'p-a' : project === 'b' ? 'p-b' : undefined),
};

/** Segments a well-formed path is made of, keywords and names of targets among them. */
const plain = fc.constantFrom(
  ...['kubernetes', 'cluster', 'project', 'space', 'virtualcluster', 'management', 'a', 'b', 'p-a', 'p-b'],
  ...['api', 'apis', 'v1', 'apps', 'namespaces', 'watch', 'proxy', 'pods', 'nodes', 'status', 'finalize'],
  ...['version', 'openapi', 'v2', 'v3'],
);
/** Spellings meant to make some reader see another path than the one routed. */
const adversarial = fc.oneof(
  fc.constantFrom(
    ...['..', '.', '%2e%2e', '%2E.', '.%2e', '%2e', '', '%2F', 'a%2Fb', 'p-a%2F..%2Fp-b', '%5C', 'a\\b'],
    ...['%63luster', '%70-a', '%61', 'Cluster', 'a.', 'P-A', '%ZZ', '%FF', '..%2F', '%2e%2e%2f'],
  ),
  fc.string({
    unit: fc.constantFrom(
      'a',
      'b',
      'A',
      '.',
      '%',
      '2',
      'e',
      'E',
      'f',
      'F',
      '5',
      'c',
      'C',
      '\\',
      '-',
      ':',
      '/',
    ),
    maxLength: 6,
  }),
);
const segment = fc.oneof({ weight: 10, arbitrary: plain }, { weight: 1, arbitrary: adversarial });
const namespace = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('p-a', 'p-b', 'a') },
  { weight: 1, arbitrary: adversarial },
);
/** A Kubernetes API path as a client would send it, some of its segments spelled adversarially. */
const apiRest = fc
  .tuple(
    fc.oneof(
      fc.constant(['api', 'v1']),
      fc.tuple(segment, segment).map(([group, version]) => ['apis', group, version]),
    ),
    fc.constantFrom([], [], [], ['watch'], ['proxy']),
    fc.oneof(
      fc.constant([] as string[]),
      namespace.map((ns) => ['namespaces', ns]),
    ),
    fc.array(segment, { maxLength: 3 }),
  )
  .map((parts) => parts.flat());
/** The discovery, version and OpenAPI documents a space reaches. */
const discoveryRest = fc
  .constantFrom(
    'api',
    'api/v1',
    'apis',
    'apis/apps',
    'apis/apps/v1',
    'version',
    'openapi/v2',
    'openapi/v3/apis/apps/v1',
  )
  .map((text) => text.split('/'));
const rest = fc.oneof(apiRest, discoveryRest, fc.array(segment, { maxLength: 6 }));
const targetPrefix = fc.oneof(
  fc.tuple(fc.constant('cluster'), segment).map(([kind, name]) => ['kubernetes', kind, name]),
  fc
    .tuple(
      fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(['a', 'p-a'], ['b', 'p-b']) },
        { weight: 1, arbitrary: fc.tuple(fc.oneof(fc.constantFrom('a', 'b'), adversarial), namespace) },
      ),
      fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('space', 'virtualcluster') },
        { weight: 1, arbitrary: segment },
      ),
    )
    .map(([[project, name], kind]) => ['kubernetes', 'project', project, kind, name]),
  fc.array(segment, { maxLength: 3 }),
);
const path = fc
  .tuple(targetPrefix, rest, fc.boolean())
  .map(([head, tail, trailingSlash]) => `/${[...head, ...tail].join('/')}${trailingSlash ? '/' : ''}`);
const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS');
const query = fc.constantFrom(
  '',
  'watch=1',
  'fieldSelector=metadata.name=p-a',
  'fieldSelector=metadata.name=a',
);

/** Go's reading: `url.PathUnescape` of the whole path, then `path.Clean`'s segments. */
function goReading(rawPath: string): string[] | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawPath);
  } catch {
    return undefined;
  }
  return clean(decoded.split('/'));
}

/** A WHATWG URL parser's reading (dot segments resolved, `\` a separator), then decoded and cleaned. */
function whatwgReading(rawPath: string): string[] | undefined {
  const { pathname } = new URL(rawPath, 'http://platform.invalid');
  try {
    return clean(decodeURIComponent(pathname).split('/'));
  } catch {
    return undefined;
  }
}

function clean(segments: readonly string[]): string[] {
  const out: string[] = [];
  for (const segment of segments) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return out;
}

/** The target a reading names, and how many segments name it. */
function targetOf(segments: readonly string[]): { target: ProxyTarget; length: number } | undefined {
  const [root, kind, first, projectKind, second] = segments;
  if (root !== 'kubernetes' || first === undefined) return undefined;
  if (kind === 'cluster') return { target: { kind: 'Cluster', cluster: first }, length: 3 };
  if (kind !== 'project' || second === undefined) return undefined;
  if (projectKind === 'space')
    return { target: { kind: 'ProjectSpace', project: first, space: second }, length: 5 };
  if (projectKind === 'virtualcluster') {
    return { target: { kind: 'ProjectVirtualCluster', project: first, virtualCluster: second }, length: 5 };
  }
  return undefined;
}

const RUNS = { numRuns: 3000 };

/** Counts what a property saw, so that a test whose generator never reaches the case fails instead of passing empty. */
function tally() {
  const counts = new Map<string, number>();
  return {
    count: (what: string) => counts.set(what, (counts.get(what) ?? 0) + 1),
    of: (what: string) => counts.get(what) ?? 0,
  };
}

describe('routing over adversarial paths', () => {
  test('a route goes to exactly the target every lenient reading names, with the rest they read', () => {
    const seen = tally();
    fc.assert(
      fc.property(path, method, query, (rawPath, verb, rawQuery) => {
        const route = routeProxyRequest(verb, rawPath, new URLSearchParams(rawQuery), lookup);
        if (route instanceof StatusError) {
          seen.count(String(route.code));
          return;
        }
        seen.count(route.target.kind);
        expect(isAccessProxyPath(rawPath)).toBe(true);
        for (const reading of [goReading(rawPath), whatwgReading(rawPath)]) {
          expect(reading).toBeDefined();
          const named = targetOf(reading ?? []);
          expect(named?.target).toEqual(route.target);
          // The rest as the readers read the upstream path is the rest of their reading of the whole path.
          expect(goReading(route.upstreamPath)).toEqual(reading?.slice(named?.length));
        }
        expect(rawPath.endsWith(route.upstreamPath === '/' ? '' : route.upstreamPath)).toBe(true);
      }),
      RUNS,
    );
    // Each kind of target was routed, and spellings were refused: the property held over real cases.
    // (Expected per run: about 800 clusters, 330 virtual clusters, 30 spaces, 500 refusals as not canonical.)
    expect(seen.of('Cluster')).toBeGreaterThan(100);
    expect(seen.of('ProjectVirtualCluster')).toBeGreaterThan(50);
    expect(seen.of('ProjectSpace')).toBeGreaterThan(5);
    expect(seen.of('400')).toBeGreaterThan(100);
  });

  test("whatever the path says, a routed space's and virtual cluster's attributes name exactly its target and project (the scope judges them; the targets check the project owns them)", () => {
    fc.assert(
      fc.property(path, method, query, (rawPath, verb, rawQuery) => {
        const route = routeProxyRequest(verb, rawPath, new URLSearchParams(rawQuery), lookup);
        if (route instanceof StatusError) return;
        const { target, attributes } = route;
        if (target.kind === 'ProjectSpace') {
          expect(attributes).toMatchObject({
            target: 'ProjectSpace',
            project: target.project,
            space: target.space,
          });
          expect(attributes.virtualCluster).toBeUndefined();
        }
        if (target.kind === 'ProjectVirtualCluster') {
          expect(attributes).toMatchObject({ target: 'ProjectVirtualCluster', project: target.project });
          expect(attributes.virtualCluster).toEqual({
            name: target.virtualCluster,
            namespace: lookup.namespaceOfProject(target.project) ?? '',
          });
          expect(attributes.space).toBeUndefined();
        }
      }),
      RUNS,
    );
  });

  test('a space route never carries another namespace or a cluster-scoped request', () => {
    const spacePath = fc
      .tuple(
        fc.oneof({ weight: 8, arbitrary: fc.constant('p-a') }, { weight: 1, arbitrary: namespace }),
        rest,
        fc.boolean(),
      )
      .map(([space, tail, slash]) => ({
        space,
        rawPath: `/kubernetes/project/a/space/${space}/${tail.join('/')}${slash ? '/' : ''}`,
      }));
    const seen = tally();
    fc.assert(
      fc.property(spacePath, method, query, ({ space, rawPath }, verb, rawQuery) => {
        const route = routeProxyRequest(verb, rawPath, new URLSearchParams(rawQuery), lookup);
        if (route instanceof StatusError) {
          seen.count(String(route.code));
          return;
        }
        seen.count(route.attributes.resourceRequest ? 'resource' : 'nonResource');
        // The space as the path names it, read percent-decoded (a routed path decodes).
        const named = decodeURIComponent(space);
        expect(route.target).toEqual({ kind: 'ProjectSpace', project: 'a', space: named });
        const { attributes } = route;
        const upstream = goReading(route.upstreamPath) ?? [];
        if (attributes.resourceRequest) {
          expect(attributes.namespace).toBe(named);
          // Independently of the reading: the upstream path spells the namespace p-a right after
          // the version (and a legacy path verb), and is the namespace itself only for a get.
          const afterVersion = upstream.slice(upstream[0] === 'api' ? 2 : 3);
          const scoped = ['watch', 'proxy'].includes(afterVersion[0] ?? '')
            ? afterVersion.slice(1)
            : afterVersion;
          expect(scoped.slice(0, 2)).toEqual(['namespaces', named]);
          if (scoped.length === 2 || ['status', 'finalize'].includes(scoped[2] ?? '')) {
            expect(['GET', 'HEAD']).toContain(verb);
          }
          expect(scoped.length === 2 || scoped[2] !== 'status').toBe(true);
        } else {
          expect(verb).toBe('GET');
          expect(upstream[0]).toMatch(/^(api|apis|version|openapi)$/);
        }
      }),
      RUNS,
    );
    // Expected per run: about 75 resource and 150 non-resource requests routed, 2,000 refused with a 403.
    expect(seen.of('resource')).toBeGreaterThan(10);
    expect(seen.of('nonResource')).toBeGreaterThan(20);
    expect(seen.of('403')).toBeGreaterThan(100);
  });
});
