import { describe, expect, test } from 'vitest';
import { StatusError } from '../api/status.ts';
import { isResourceVersion, routeRequest, upstreamPath } from './paths.ts';

const q = (text = '') => new URLSearchParams(text);
const api = '/apis/management.platform/v1';

describe('routing', () => {
  test.each([
    ['GET', `${api}/namespaces/ns/sharedsecrets`, '', 'list', 'sharedsecrets', '', 'ns', ''],
    ['GET', `${api}/namespaces/ns/sharedsecrets`, 'watch=true', 'watch', 'sharedsecrets', '', 'ns', ''],
    ['GET', `${api}/sharedsecrets`, '', 'list', 'sharedsecrets', '', '', ''],
    ['GET', `${api}/namespaces/ns/sharedsecrets/a`, '', 'get', 'sharedsecrets', '', 'ns', 'a'],
    ['POST', `${api}/namespaces/ns/sharedsecrets`, '', 'create', 'sharedsecrets', '', 'ns', ''],
    ['PUT', `${api}/namespaces/ns/sharedsecrets/a`, '', 'update', 'sharedsecrets', '', 'ns', 'a'],
    [
      'PATCH',
      `${api}/namespaces/ns/sharedsecrets/a/status`,
      '',
      'patch',
      'sharedsecrets',
      'status',
      'ns',
      'a',
    ],
    ['DELETE', `${api}/namespaces/ns/sharedsecrets/a`, '', 'delete', 'sharedsecrets', '', 'ns', 'a'],
    ['DELETE', `${api}/namespaces/ns/sharedsecrets`, '', 'deletecollection', 'sharedsecrets', '', 'ns', ''],
    ['GET', `${api}/projects/p/members`, '', 'get', 'projects', 'members', '', 'p'],
    ['GET', `${api}/config/c`, '', 'get', 'configs', '', '', 'c'],
    [
      'POST',
      `${api}/namespaces/p-web/virtualclusterinstances/vc/kubeconfig`,
      '',
      'create',
      'virtualclusterinstances',
      'kubeconfig',
      'p-web',
      'vc',
    ],
    ['GET', `${api}/users/alice/accesskeys`, '', 'get', 'users', 'accesskeys', '', 'alice'],
  ])('%s %s?%s', (method, path, query, verb, resource, subresource, namespace, name) => {
    const route = routeRequest(method, path, q(query));
    if (route instanceof StatusError || route.kind !== 'resource') throw new Error('not a resource route');
    expect(route.attributes).toMatchObject({
      verb,
      resource,
      subresource,
      namespace,
      name,
      resourceRequest: true,
      apiGroup: 'management.platform',
    });
    expect(upstreamPath(route.attributes)).toBe(path.replace('/config/', '/configs/'));
  });

  test('projects and virtual clusters are known from the path', () => {
    const members = routeRequest('GET', `${api}/projects/web/members`, q());
    expect(!(members instanceof StatusError) && members.attributes.project).toBe('web');
    const vci = routeRequest('POST', `${api}/namespaces/p-web/virtualclusterinstances/dev/kubeconfig`, q());
    expect(!(vci instanceof StatusError) && vci.attributes.virtualCluster).toEqual({
      name: 'dev',
      namespace: 'p-web',
    });
  });

  test.each([
    '/api',
    '/apis',
    '/apis/management.platform',
    api,
    '/version',
    '/openapi/v2',
    '/openapi/v3',
    `/openapi/v3${api}`,
  ])('non-resource %s', (path) => {
    const route = routeRequest('GET', path, q());
    expect(!(route instanceof StatusError) && route.kind).toBe('nonResource');
  });

  test.each([
    ['GET', '/nope', 404],
    ['GET', `${api}/widgets`, 404],
    ['GET', `${api}/namespaces/ns`, 404],
    ['GET', `${api}/namespaces/ns/sharedsecrets/a/b/c`, 404],
    ['GET', `${api}/namespaces/ns/sharedsecrets/a/nothing`, 404],
    ['GET', `${api}/ownedaccesskeys/a/members`, 404],
    ['GET', `${api}/namespaces/ns/ownedaccesskeys`, 404],
    ['GET', `${api}/namespaces/Bad_NS/sharedsecrets`, 400],
    ['GET', `${api}/namespaces/ns/sharedsecrets/Bad_Name`, 400],
    ['GET', `${api}/namespaces/ns/sharedsecrets/%zz`, 400],
    ['PUT', `${api}/sharedsecrets/a`, 404],
    ['OPTIONS', `${api}/namespaces/ns/sharedsecrets`, 405],
    // Names of Object.prototype's properties are nothing special.
    ['GET', `${api}/namespaces/ns/toString`, 404],
    ['GET', `${api}/constructor`, 404],
    ['GET', `${api}/__proto__`, 404],
    ['GET', `${api}/projects/web/hasOwnProperty`, 404],
    ['GET', '/toString', 404],
    ['GET', '/constructor', 404],
  ])('%s %s is %d', (method, path, code) => {
    const route = routeRequest(method, path, q());
    expect(route).toBeInstanceOf(StatusError);
    expect((route as StatusError).code).toBe(code);
  });
});

describe('watch, as kube-apiserver reads the parameter', () => {
  test.each([
    ['watch=true', 'watch'],
    ['watch=1', 'watch'],
    ['watch=yes', 'watch'],
    ['watch=', 'watch'],
    ['watch=TRUE', 'watch'],
    ['watch=0', 'list'],
    ['watch=false', 'list'],
    ['watch=False', 'list'],
    ['watch=0&watch=1', 'list'],
    ['', 'list'],
  ])('collection GET ?%s is a %s', (query, verb) => {
    const route = routeRequest('GET', `${api}/namespaces/ns/sharedsecrets`, q(query));
    expect(!(route instanceof StatusError) && route.attributes.verb).toBe(verb);
  });

  test('a named GET is a get whatever the query says (the apiserver answers the object)', () => {
    const route = routeRequest('GET', `${api}/namespaces/ns/sharedsecrets/a`, q('watch=true'));
    expect(!(route instanceof StatusError) && route.attributes.verb).toBe('get');
  });
});

describe('resourceVersion of reads', () => {
  test.each(['', '0', '00', '1', '4711', '18446744073709551615'])('%j is read', (rv) => {
    expect(isResourceVersion(rv)).toBe(true);
    for (const path of [`${api}/namespaces/ns/sharedsecrets`, `${api}/namespaces/ns/sharedsecrets/a`]) {
      const query = new URLSearchParams({ resourceVersion: rv });
      expect(routeRequest('GET', path, query)).not.toBeInstanceOf(StatusError);
      query.set('watch', '1');
      expect(routeRequest('GET', path, query)).not.toBeInstanceOf(StatusError);
    }
  });

  // kube-apiserver answers a get or a watch with these with a 500 (its storage cannot parse them).
  test.each(['x', ' ', ' 1', '-1', '+1', '1e3', '0x10', '1.0', '18446744073709551616', '١'])(
    '%j is 400 for get, list and watch; writes do not read it',
    (rv) => {
      expect(isResourceVersion(rv)).toBe(false);
      const query = new URLSearchParams({ resourceVersion: rv });
      for (const [method, path, extra] of [
        ['GET', `${api}/namespaces/ns/sharedsecrets/a`, ''],
        ['GET', `${api}/namespaces/ns/sharedsecrets`, ''],
        ['GET', `${api}/namespaces/ns/sharedsecrets`, 'yes'],
      ] as const) {
        const asked = new URLSearchParams(query);
        if (extra) asked.set('watch', extra);
        const route = routeRequest(method, path, asked);
        expect(route).toBeInstanceOf(StatusError);
        expect((route as StatusError).code).toBe(400);
        expect((route as StatusError).message).toContain('resourceVersion');
      }
      expect(routeRequest('PATCH', `${api}/namespaces/ns/sharedsecrets/a`, query)).not.toBeInstanceOf(
        StatusError,
      );
    },
  );
});
