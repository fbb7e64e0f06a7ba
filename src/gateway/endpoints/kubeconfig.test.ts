import { describe, expect, test } from 'vitest';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { accessProxyServer } from '../../clusters/kubeconfig.ts';
import { ingressEndpoint } from './kubeconfig.ts';

const instance = (spec: VirtualClusterInstance['spec']): VirtualClusterInstance => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterInstance',
  metadata: { name: 'dev', namespace: 'p-web' },
  spec,
});

describe('ingressEndpoint', () => {
  test('an enabled ingress with a known endpoint is the server', () => {
    expect(
      ingressEndpoint(
        instance({ accessPoint: { ingress: { enabled: true } }, endpoint: 'https://dev.example.com' }),
      ),
    ).toBe('https://dev.example.com');
  });

  test.each([
    [{}, /spec.accessPoint.ingress.enabled is not true/],
    [{ endpoint: 'https://dev.example.com' }, /spec.accessPoint.ingress.enabled is not true/],
    [{ accessPoint: { ingress: { enabled: false } }, endpoint: 'https://x' }, /enabled is not true/],
    [{ accessPoint: { ingress: { enabled: true } } }, /spec.endpoint is not known yet/],
  ])('no ingress endpoint says why: %j', (spec, why) => {
    const answer = ingressEndpoint(instance(spec as VirtualClusterInstance['spec']));
    expect(typeof answer).toBe('object');
    expect((answer as { problem: string }).problem).toMatch(why);
    expect((answer as { problem: string }).problem).toContain('virtual cluster p-web/dev');
  });
});

describe('accessProxyServer', () => {
  test("the established product's paths under the gateway's base", () => {
    expect(
      accessProxyServer('https://platform.example.com/', {
        kind: 'ProjectVirtualCluster',
        project: 'web',
        virtualCluster: 'dev',
      }),
    ).toBe('https://platform.example.com/kubernetes/project/web/virtualcluster/dev');
    expect(accessProxyServer('https://platform.example.com:8443', { kind: 'Cluster', cluster: 'prod' })).toBe(
      'https://platform.example.com:8443/kubernetes/cluster/prod',
    );
  });
});
