import { describe, expect, test } from 'vitest';
import { fieldManagers, isPlatformFieldManager, withDefaultFieldManager } from './field-managers.ts';

describe('withDefaultFieldManager', () => {
  test('a write that names no field manager is named the component', () => {
    for (const method of ['POST', 'PUT', 'PATCH'] as const)
      expect(
        withDefaultFieldManager(
          { method, path: '/api/v1/namespaces', query: { dryRun: 'All' } },
          'platform-gateway',
        ).query,
      ).toEqual({ dryRun: 'All', fieldManager: 'platform-gateway' });
  });

  test("a write's own field manager stays (a controller's apply)", () => {
    const apply = {
      method: 'PATCH' as const,
      path: '/api/v1/namespaces/ns/secrets/s',
      query: { fieldManager: fieldManagers.secretSync, force: true },
    };
    expect(withDefaultFieldManager(apply, fieldManagers.controller)).toBe(apply);
  });

  test('reads and deletes write no fields and are left alone', () => {
    for (const method of ['GET', 'DELETE'] as const) {
      const request = { method, path: '/api/v1/namespaces/ns' };
      expect(withDefaultFieldManager(request, fieldManagers.controller)).toBe(request);
    }
  });
});

test('the platform names its own managers and no one else', () => {
  for (const name of Object.values(fieldManagers)) expect(isPlatformFieldManager(name)).toBe(true);
  for (const name of ['unknown', 'kubectl', 'node-fetch', 'platform', 'toString', '__proto__'])
    expect(isPlatformFieldManager(name)).toBe(false);
});
