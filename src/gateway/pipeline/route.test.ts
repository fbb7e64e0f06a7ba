import { describe, expect, test } from 'vitest';
import type { GatewayEndpoint } from '../endpoints/endpoint.ts';
import { ConflictingEndpoints, EndpointTable } from './route.ts';

const api = '/apis/management.platform/v1';

describe('the endpoint table', () => {
  const endpoint = (name: string, route: GatewayEndpoint['route']): GatewayEndpoint => ({
    name,
    route,
    authentication: 'key',
    handle: () => ({ code: 200, object: name }),
  });
  const table = new EndpointTable([
    endpoint('members', { kind: 'resource', resource: 'projects', subresource: 'members', verbs: ['get'] }),
    endpoint('keys', { kind: 'resource', resource: 'ownedaccesskeys', verbs: ['get', 'list'] }),
    endpoint('discovery', { kind: 'nonResource', paths: ['/apis'] }),
    endpoint('review', { kind: 'path', path: '/kubernetes/tokenreview', prefix: true, methods: ['POST'] }),
    endpoint('login', { kind: 'path', path: '/auth/login', methods: ['GET'] }),
  ]);
  const projectOf = (namespace: string) => (namespace === 'p-web' ? 'web' : undefined);
  const route = (method: string, path: string, query = '') =>
    table.route(method, path, query === '' ? '' : `?${query}`, {
      projectOfNamespace: projectOf,
      namespaceOfProject: () => undefined,
    });
  const named = (routed: ReturnType<typeof route>) =>
    routed.kind === 'refused'
      ? routed.error.code
      : routed.kind === 'endpoint'
        ? routed.endpoint.name
        : routed.kind;

  test('paths, prefixes, management resources and non-resource paths find their endpoint', () => {
    expect(named(route('POST', '/kubernetes/tokenreview/cluster/edge'))).toBe('review');
    expect(named(route('GET', '/auth/login'))).toBe('login');
    expect(named(route('GET', '/kubernetes/management/apis'))).toBe('discovery');
    expect(named(route('GET', `/kubernetes/management${api}/projects/web/members`))).toBe('members');
    expect(named(route('GET', `/kubernetes/management${api}/ownedaccesskeys`))).toBe('keys');
  });

  test('stored kinds go to the proxy; other methods are 405; unknown paths wait for authentication', () => {
    expect(named(route('GET', `/kubernetes/management${api}/namespaces/p-web/sharedsecrets`))).toBe('proxy');
    expect(named(route('GET', '/auth/login/x'))).toBe(404);
    expect(named(route('DELETE', '/auth/login'))).toBe(405);
    expect(named(route('GET', '/elsewhere'))).toBe(404);
    const unknown = route('GET', '/kubernetes/management/nope');
    expect(unknown.kind).toBe('unknown');
    const verb = route('DELETE', `/kubernetes/management${api}/projects/web/members`);
    expect(verb.kind === 'unknown' && verb.error.code).toBe(405);
  });

  test("a path endpoint's refusal names the endpoint (its answer headers go on it); other refusals none", () => {
    const refused = route('DELETE', '/auth/login');
    expect(refused.kind === 'refused' && refused.endpoint?.name).toBe('login');
    const elsewhere = route('GET', '/elsewhere');
    expect(elsewhere.kind === 'refused' && elsewhere.endpoint).toBeUndefined();
  });

  test("a namespaced request concerns its namespace's project, and the namespace is its space", () => {
    const routed = route('GET', `/kubernetes/management${api}/namespaces/p-web/sharedsecrets`);
    expect(routed.kind === 'proxy' && routed.attributes).toMatchObject({
      project: 'web',
      space: 'p-web',
    });
    const elsewhere = route('GET', `/kubernetes/management${api}/namespaces/other/sharedsecrets`);
    expect(elsewhere.kind === 'proxy' && elsewhere.attributes.space).toBeUndefined();
  });

  test("a proxied request's query is read as its target reads it: what Go would read otherwise is refused after authentication", () => {
    const cluster = '/kubernetes/cluster/edge/api/v1/namespaces/a/configmaps';
    const named = route('GET', cluster, 'fieldSelector=metadata.name%3Dallowed');
    expect(named.kind === 'cluster' && named.attributes).toMatchObject({ verb: 'list', name: 'allowed' });
    // WHATWG splits only on '&': a scope naming `allowed` would pass a list Go reads unnamed.
    for (const query of [
      'fieldSelector=metadata.name%3Dallowed,x;=y',
      'fieldSelector=metadata.name%3Dallowed&a=%zz',
    ]) {
      const refused = route('GET', cluster, query);
      expect(refused.kind === 'unknown' && refused.error.code, query).toBe(400);
    }
  });

  test('two endpoints for one route are a wiring mistake', () => {
    expect(
      () =>
        new EndpointTable([
          endpoint('a', { kind: 'path', path: '/x', methods: ['GET'] }),
          endpoint('b', { kind: 'path', path: '/x', methods: ['POST'] }),
        ]),
    ).toThrow(ConflictingEndpoints);
  });
});
