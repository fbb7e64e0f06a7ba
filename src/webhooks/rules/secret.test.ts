import { describe, expect, it } from 'vitest';
import { syncerServiceAccountName } from '../../controllers/virtualcluster/identity.ts';
import { isPlatformComponent, refuseComponentSecretSync } from './secret.ts';

describe('isPlatformComponent', () => {
  const syncer = syncerServiceAccountName({ metadata: { namespace: 'p-team', name: 'dev' } });
  it.each([
    ['the controller', 'system:serviceaccount:platform-system:platform-controller', true],
    ['any ServiceAccount of the platform namespace', 'system:serviceaccount:platform-system:x', true],
    ["a virtual cluster's syncer", `system:serviceaccount:p-team:${syncer}`, true],
    ["a tenant's own ServiceAccount", 'system:serviceaccount:p-team:builder', false],
    ['a user', 'alice', false],
    ['a user named like a ServiceAccount of the platform', 'platform-system:platform-controller', false],
  ])('%s', (_, username, expected) => {
    expect(isPlatformComponent({ username }, 'platform-system')).toBe(expected);
  });

  it('the refusal names the labels and the identity, and is a 403', () => {
    const decision = refuseComponentSecretSync(
      { namespace: 'finance', name: 'prod-db' },
      { username: 'system:serviceaccount:platform-system:platform-controller' },
    );
    expect(decision).toMatchObject({ allowed: false, code: 403 });
    expect(decision.message).toContain('prod-db');
  });
});
