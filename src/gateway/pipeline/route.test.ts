import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import { routeRequest, upstreamPath } from './route.ts';

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
  ])('%s %s is %d', (method, path, code) => {
    const route = routeRequest(method, path, q());
    expect(route).toBeInstanceOf(StatusError);
    expect((route as StatusError).code).toBe(code);
  });
});
