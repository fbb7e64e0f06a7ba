import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import { isAccessProxyPath, type ProxyLookup, routeProxyRequest } from './route.ts';
import type { ProxyRoute } from './target.ts';

/** Projects p1 (namespace p-p1, which also owns the namespace shared-x) and p2 (p-p2); q has no namespace. */
const lookup: ProxyLookup = {
  projectOfNamespace: (namespace) =>
    ({ 'p-p1': 'p1', 'shared-x': 'p1', 'p-p2': 'p2' })[namespace as 'p-p1' | 'shared-x' | 'p-p2'],
  namespaceOfProject: (project) => ({ p1: 'p-p1', p2: 'p-p2' })[project as 'p1' | 'p2'],
};

const route = (path: string, method = 'GET', query = '') =>
  routeProxyRequest(method, path, new URLSearchParams(query), lookup);

function routed(path: string, method = 'GET', query = ''): ProxyRoute {
  const result = route(path, method, query);
  if (result instanceof StatusError) throw new Error(`${path}: ${result.code} ${result.message}`);
  return result;
}

function refusedWith(code: number, path: string, method = 'GET'): StatusError {
  const result = route(path, method);
  expect(result, path).toBeInstanceOf(StatusError);
  expect((result as StatusError).code, `${path}: ${(result as StatusError).message}`).toBe(code);
  return result as StatusError;
}

describe('targets', () => {
  test('a cluster path: the target, the rest upstream as sent, the attributes on the target', () => {
    expect(routed('/kubernetes/cluster/prod/api/v1/namespaces/a/pods/x%3Ay/log', 'GET')).toEqual({
      target: { kind: 'Cluster', cluster: 'prod' },
      upstreamPath: '/api/v1/namespaces/a/pods/x%3Ay/log',
      attributes: {
        target: 'Cluster',
        cluster: 'prod',
        verb: 'get',
        resourceRequest: true,
        apiGroup: '',
        resource: 'pods',
        subresource: 'log',
        name: 'x:y',
        namespace: 'a',
        path: '/api/v1/namespaces/a/pods/x:y/log',
      },
    });
  });

  test('a virtual cluster path carries the project and the virtual cluster in the project namespace', () => {
    const { target, upstreamPath, attributes } = routed(
      '/kubernetes/project/p1/virtualcluster/vc1/apis/apps/v1/deployments',
      'GET',
      'watch=1',
    );
    expect(target).toEqual({ kind: 'ProjectVirtualCluster', project: 'p1', virtualCluster: 'vc1' });
    expect(upstreamPath).toBe('/apis/apps/v1/deployments');
    expect(attributes).toMatchObject({
      target: 'ProjectVirtualCluster',
      project: 'p1',
      virtualCluster: { name: 'vc1', namespace: 'p-p1' },
      verb: 'watch',
      apiGroup: 'apps',
      resource: 'deployments',
      namespace: '',
    });
    expect(attributes.cluster).toBeUndefined();
  });

  test('a space path carries the project and the space', () => {
    const { target, upstreamPath, attributes } = routed(
      '/kubernetes/project/p1/space/shared-x/api/v1/namespaces/shared-x/configmaps/c',
      'DELETE',
    );
    expect(target).toEqual({ kind: 'ProjectSpace', project: 'p1', space: 'shared-x' });
    expect(upstreamPath).toBe('/api/v1/namespaces/shared-x/configmaps/c');
    expect(attributes).toMatchObject({
      target: 'ProjectSpace',
      project: 'p1',
      space: 'shared-x',
      verb: 'delete',
      namespace: 'shared-x',
      resource: 'configmaps',
      name: 'c',
    });
  });

  test('an empty rest is /, a trailing slash is kept', () => {
    expect(routed('/kubernetes/cluster/prod').upstreamPath).toBe('/');
    expect(routed('/kubernetes/cluster/prod/').upstreamPath).toBe('/');
    expect(routed('/kubernetes/cluster/prod/api/').upstreamPath).toBe('/api/');
    expect(routed('/kubernetes/cluster/prod/api/').attributes).toMatchObject({
      resourceRequest: false,
      verb: 'get',
    });
  });

  test('a cluster named like a path segment is a cluster like any other', () => {
    for (const name of ['api', 'kubernetes', 'cluster', 'project', 'apis', 'v1']) {
      const { target, upstreamPath } = routed(`/kubernetes/cluster/${name}/api/v1/pods`);
      expect(target).toEqual({ kind: 'Cluster', cluster: name });
      expect(upstreamPath).toBe('/api/v1/pods');
    }
  });

  test('raw characters a Go client leaves unescaped in a path go upstream as sent', () => {
    const { upstreamPath, attributes } = routed(
      "/kubernetes/cluster/prod/api/v1/namespaces/a/pods/[::1]:80;x=$!'()*+,@~/proxy",
    );
    expect(upstreamPath).toBe("/api/v1/namespaces/a/pods/[::1]:80;x=$!'()*+,@~/proxy");
    expect(attributes).toMatchObject({
      resource: 'pods',
      name: "[::1]:80;x=$!'()*+,@~",
      subresource: 'proxy',
    });
  });

  test('keywords and names are read percent-decoded, as the target reads them; the rest stays as sent', () => {
    const { target, upstreamPath } = routed('/kubernetes/%63luster/pro%64/ap%69/v1/pods');
    expect(target).toEqual({ kind: 'Cluster', cluster: 'prod' });
    expect(upstreamPath).toBe('/ap%69/v1/pods');
  });
});

describe('spellings that must reach no other target', () => {
  test.each([
    ['/kubernetes/cluster/a/../b/api/v1/pods'],
    ['/kubernetes/cluster/a/%2e%2e/b/api'],
    ['/kubernetes/cluster/a/%2E./b/api'],
    ['/kubernetes/cluster/a/.%2e/b'],
    ['/kubernetes/cluster/../cluster/b'],
    ['/kubernetes/cluster/a/./api'],
    ['/kubernetes/cluster/a/%2e/api'],
    ['/kubernetes/cluster/a%2F..%2Fb/api'],
    ['/kubernetes/cluster/a%2fb/api'],
    ['/kubernetes/cluster/a%5Cb/api'],
    ['/kubernetes/cluster/a\\..\\b/api'],
    ['/kubernetes//cluster/b/api'],
    ['/kubernetes/cluster//b/api'],
    ['/kubernetes/cluster/a//api/v1/pods'],
    ['/kubernetes/cluster/a/api/v1//pods'],
    ['/kubernetes/cluster/a/api/v1/pods//'],
    ['/kubernetes/cluster/a/api/v1/pods#x'],
    ['/kubernetes/cluster/a/api/v1/pods?watch=1'],
    ['/kubernetes/cluster/a b/api'],
    ['/kubernetes/cluster/a/api/v1/namespaces/é'],
    ['/kubernetes/cluster/a/api/v1/pods/x\ty'],
    ['/kubernetes/cluster/a/api/v1/pods/{x}'],
    ['/kubernetes/cluster/a/%ZZ'],
    ['/kubernetes/cluster/a/%FF'],
    ['/kubernetes/project/p1/space/p-p1/api/v1/namespaces/p-p1/../../namespaces/p-p2/pods'],
    ['/kubernetes/project/p1/space/p-p1/api/v1/namespaces/p-p1%2F..%2Fp-p2/pods'],
  ])('%s is refused as not canonical (400)', (path) => {
    expect(refusedWith(400, path).message).toMatch(/not canonical/);
  });

  test.each([
    ['/kubernetes/cluster/Prod/api'],
    ['/kubernetes/cluster/prod./api'],
    ['/kubernetes/cluster/.prod/api'],
    ['/kubernetes/cluster/a:b/api'],
    ['/kubernetes/cluster'],
    ['/kubernetes/cluster/'],
    ['/kubernetes/Cluster/prod/api'],
    ['/kubernetes/clusters/prod/api'],
    ['/Kubernetes/cluster/prod/api'],
    ['/kubernetes/project/P1/space/p-p1/api'],
    ['/kubernetes/project/p1/Space/p-p1/api'],
    ['/kubernetes/project/p1/space/p.p1/api'],
    ['/kubernetes/project/p1/virtualcluster/VC/api'],
    ['/kubernetes/project/p1/virtualcluster'],
    ['/kubernetes/project/p1'],
  ])('%s names no target (404)', (path) => {
    refusedWith(404, path);
  });

  test('a space of another project or of none, and a virtual cluster of an unknown project, are routed: whether they exist is answered after the scope (404 by the targets), so a key scoped elsewhere learns nothing', () => {
    for (const [path, space] of [
      ['/kubernetes/project/p1/space/p-p2/api/v1/namespaces/p-p2/pods', 'p-p2'],
      ['/kubernetes/project/p2/space/shared-x/api', 'shared-x'],
      ['/kubernetes/project/p1/space/default/api/v1/namespaces/default/pods', 'default'],
    ] as const) {
      const routed = route(path);
      expect(routed instanceof StatusError ? routed.message : routed.target, path).toMatchObject({
        kind: 'ProjectSpace',
        space,
      });
    }
    const unknownProject = route('/kubernetes/project/q/virtualcluster/vc/api');
    expect(
      unknownProject instanceof StatusError ? unknownProject.message : unknownProject.attributes,
    ).toMatchObject({
      target: 'ProjectVirtualCluster',
      project: 'q',
      virtualCluster: { name: 'vc', namespace: '' },
    });
  });
});

describe('a space reaches only its namespace', () => {
  const space = '/kubernetes/project/p1/space/p-p1';

  test.each([
    ['GET', '/api/v1/namespaces/p-p1/pods'],
    ['GET', '/api/v1/watch/namespaces/p-p1/pods'],
    ['POST', '/api/v1/namespaces/p-p1/pods/x/exec'],
    ['PATCH', '/apis/apps/v1/namespaces/p-p1/deployments/d/scale'],
    ['DELETE', '/apis/apps/v1/namespaces/p-p1/deployments'],
    ['GET', '/api/v1/namespaces/p-p1'],
    ['GET', '/api'],
    ['GET', '/api/v1'],
    ['GET', '/api/v1/'],
    ['GET', '/apis'],
    ['GET', '/apis/apps'],
    ['GET', '/apis/apps/v1'],
    ['GET', '/version'],
    ['GET', '/openapi/v2'],
    ['GET', '/openapi/v3'],
    ['GET', '/openapi/v3/apis/apps/v1'],
  ])('%s %s goes through', (method, rest) => {
    expect(routed(`${space}${rest}`, method).attributes).toMatchObject({
      target: 'ProjectSpace',
      space: 'p-p1',
    });
  });

  test.each([
    ['GET', '/api/v1/pods', /cluster-wide/],
    ['GET', '/api/v1/nodes', /cluster-wide/],
    ['GET', '/api/v1/namespaces', /cluster-wide/],
    ['GET', '/api/v1/namespaces/p-p2/pods', /namespace "p-p2"/],
    ['GET', '/api/v1/namespaces/p-p2', /namespace "p-p2"/],
    ['DELETE', '/api/v1/namespaces/p-p1', /delete namespaces/],
    ['PUT', '/api/v1/namespaces/p-p1/finalize', /update namespaces\/finalize/],
    ['PATCH', '/api/v1/namespaces/p-p1/status', /patch namespaces\/status/],
    ['GET', '/api/v1/namespaces/p-p1/namespaces/p-p2', /get namespaces/],
    ['GET', '/apis/example.com/v1/namespaces/p-p1', /get namespaces/],
    ['GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin', /cluster-wide/],
    ['POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', /cluster-wide/],
    ['GET', '/', /get \//],
    ['GET', '/healthz', /get \/healthz/],
    ['GET', '/metrics', /get \/metrics/],
    ['GET', '/logs/', /get \/logs/],
    ['GET', '/openapi/v3x', /openapi/],
    ['POST', '/api', /post \/api/],
    ['HEAD', '/version', /head \/version/],
  ])('%s %s is refused (403)', (method, rest, what) => {
    const refusal = refusedWith(403, `${space}${rest}`, method);
    expect(refusal.message).toMatch(/^space "p-p1" reaches only namespace "p-p1": /);
    expect(refusal.message).toMatch(what);
  });

  test('a list named by a field selector is still cluster-wide', () => {
    const result = routeProxyRequest(
      'GET',
      `${space}/api/v1/namespaces`,
      new URLSearchParams('fieldSelector=metadata.name=p-p1'),
      lookup,
    );
    expect(result).toBeInstanceOf(StatusError);
    expect((result as StatusError).code).toBe(403);
  });
});

describe('isAccessProxyPath', () => {
  test.each([
    '/kubernetes/cluster/prod/api',
    '/kubernetes/cluster',
    '/kubernetes/project/p1/space/p-p1/api',
    '/kubernetes/project/p1/virtualcluster/vc',
    // non-canonical spellings are claimed, so that routing refuses them with a 400
    '/kubernetes//cluster/prod',
    '/kubernetes/%63luster/prod',
    '/kubernetes/management/../cluster/prod',
    '/kubernetes/management/%2e%2e/cluster/prod',
    '/kubernetes/management%2F..%2Fcluster/prod',
    '/kubernetes\\cluster\\prod',
    '/Kubernetes/CLUSTER/prod',
    '/kubernetes/./project/p/space/s',
  ])('%s is a proxy path', (path) => {
    expect(isAccessProxyPath(path)).toBe(true);
  });

  test.each([
    '/kubernetes/management/apis',
    '/kubernetes/management/apis/management.platform/v1/clusters/prod',
    '/kubernetes/virtualcluster/ns/vc/api',
    '/kubernetes/project/p1/clusters/x',
    '/kubernetes/project',
    '/kubernetes',
    '/api/v1/pods',
    '/kubernetes/cluster/../management/apis',
  ])('%s is not', (path) => {
    expect(isAccessProxyPath(path)).toBe(false);
  });
});
