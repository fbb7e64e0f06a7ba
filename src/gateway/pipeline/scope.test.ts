import { describe, expect, test } from 'vitest';
import { nonResourceRequest } from '../../authz/attributes.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { GatewayEndpoint } from '../endpoints/endpoint.ts';
import type { Routed } from './route.ts';
import { checkRoutedScope, scopeRefusal } from './scope.ts';

const identity = (scope: AuthenticatedIdentity['accessKey']['scope']): AuthenticatedIdentity => ({
  kind: 'User',
  name: 'alice',
  username: 'alice',
  groups: [],
  uid: undefined,
  accessKey: { name: 'k', id: 'i', type: 'User', scope, expiresAt: null, ttlAfterLastActivity: false },
});
const inSpace = (namespace: string) => ({
  ...nonResourceRequest('list', ''),
  resourceRequest: true,
  apiGroup: 'management.platform',
  resource: 'sharedsecrets',
  namespace,
  project: 'web',
  space: namespace,
});

describe('the scope stage', () => {
  test("a key's scope narrows requests to what it lists: 403 with the reason otherwise", () => {
    const spaces = identity({ spaces: [{ project: 'web', space: 'p-web' }] });
    expect(scopeRefusal(spaces, inSpace('p-web'))).toBeUndefined();
    const refused = scopeRefusal(spaces, inSpace('p-web-2'));
    expect(refused?.code).toBe(403);
    expect(refused?.message).toContain('forbidden for User "alice"');
  });

  test('endpoints that check the scope themselves, or serve every key, are not narrowed here', () => {
    const narrow = identity({ clusters: [{ cluster: 'edge' }] });
    expect(scopeRefusal(narrow, inSpace('p-web'), 'handler')).toBeUndefined();
    expect(scopeRefusal(narrow, inSpace('p-web'), 'any')).toBeUndefined();
    expect(scopeRefusal(narrow, inSpace('p-web'), 'request')?.code).toBe(403);
  });

  test('the stage judges the routed request by how its endpoint says; proxied requests always', () => {
    const narrow = identity({ spaces: [{ project: 'web', space: 'p-web' }] });
    const check = (routed: Routed) => () => checkRoutedScope(narrow, routed);
    const outside = inSpace('p-other');
    expect(check({ kind: 'proxy', attributes: outside, resource: {} as never })).toThrow(
      expect.objectContaining({ code: 403 }),
    );
    expect(check({ kind: 'proxy', attributes: inSpace('p-web'), resource: {} as never })).not.toThrow();
    const endpoint = (scope: GatewayEndpoint['scope']): GatewayEndpoint => ({
      name: 'e',
      route: { kind: 'nonResource', paths: ['/x'] },
      authentication: 'key',
      ...(scope ? { scope } : {}),
      handle: () => ({ code: 200, object: {} }),
    });
    const routedTo = (scope: GatewayEndpoint['scope']) =>
      check({ kind: 'endpoint', endpoint: endpoint(scope), attributes: outside, resource: undefined });
    expect(routedTo(undefined)).toThrow(expect.objectContaining({ code: 403 }));
    expect(routedTo('handler')).not.toThrow();
    expect(routedTo('any')).not.toThrow();
    // Not authenticated (an endpoint without a key): nothing to narrow.
    expect(() =>
      checkRoutedScope(undefined, { kind: 'proxy', attributes: outside, resource: {} as never }),
    ).not.toThrow();
  });
});
