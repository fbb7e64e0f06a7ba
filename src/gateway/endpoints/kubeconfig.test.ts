import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { accessProxyServer } from '../../clusters/kubeconfig.ts';
import { ingressEndpoint, servingCaOf } from './kubeconfig.ts';

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

describe('servingCaOf', () => {
  test("ca.crt of the gateway's certificate directory, read when asked (a renewed CA is the one handed out)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-'));
    writeFileSync(join(dir, 'tls.crt'), 'serving');
    expect(servingCaOf(dir)).toBeUndefined();
    writeFileSync(join(dir, 'ca.crt'), 'first CA');
    expect(servingCaOf(dir)).toBe('first CA');
    writeFileSync(join(dir, 'ca.crt'), 'renewed CA');
    expect(servingCaOf(dir)).toBe('renewed CA');
  });

  test('no CA for a gateway without TLS', () => {
    expect(servingCaOf(undefined)).toBeUndefined();
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
