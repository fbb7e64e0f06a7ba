import { describe, expect, test } from 'vitest';
import { nonResourceRequest } from '../../authz/attributes.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { scopeRefusal } from './scope.ts';

const identity = (scope: AuthenticatedIdentity['accessKey']['scope']): AuthenticatedIdentity => ({
  kind: 'User',
  name: 'alice',
  username: 'alice',
  groups: [],
  uid: undefined,
  accessKey: { name: 'k', id: 'i', type: 'User', scope, expiresAt: null },
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
});
