import { describe, expect, test } from 'vitest';
import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { instanceTarget, isProvisioned } from './managed-targets.ts';

const instance = (spec: VirtualClusterInstance['spec']): Stored<VirtualClusterInstance> =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'VirtualClusterInstance',
    metadata: { name: 'dev', namespace: 'p-web', uid: 'u1', resourceVersion: '7' },
    spec,
  }) as Stored<VirtualClusterInstance>;

describe('instanceTarget', () => {
  test('a provisioned instance (a template, no endpoint) is reached with its admin Secret, whatever else it names', () => {
    const target = instanceTarget(instance({ templateRef: { name: 'small' } }), 'web');
    expect(target.provisioned).toEqual({ instanceName: 'dev' });
    expect(target.secret).toEqual({ namespace: 'p-web', name: 'vc-dev-admin' });
    expect(target.description).toBe('virtual cluster "web/dev"');
  });

  test('a registered instance is reached with the Secret its spec names, or none', () => {
    const named = instanceTarget(
      instance({ endpoint: 'https://dev.example.com', credentialsSecretRef: { name: 'creds' } }),
      'web',
    );
    expect(named.provisioned).toBeUndefined();
    expect(named.secret).toEqual({ namespace: 'p-web', name: 'creds' });
    expect(instanceTarget(instance({ endpoint: 'https://dev.example.com' }), 'web').secret).toBeUndefined();
  });

  test('isProvisioned: a template and no endpoint', () => {
    expect(isProvisioned(instance({ templateRef: { name: 'small' } }))).toBe(true);
    expect(isProvisioned(instance({ endpoint: 'https://dev.example.com' }))).toBe(false);
    expect(isProvisioned(instance({}))).toBe(false);
  });
});
