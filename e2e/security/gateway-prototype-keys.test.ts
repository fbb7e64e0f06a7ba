import { describe, expect, it } from 'vitest';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';

/**
 * A tenant's request bodies with a key `__proto__` (issue 29) at the gateway's own endpoints
 * whose bodies are read with a schema: zod drops such a key without a word (a scope
 * `{__proto__: ...}` read as none, labels as if unset), so the gateway refuses it, 422 with the
 * field named, as the platform and sync configurations do. JSON and YAML bodies alike; nothing is
 * issued.
 */
describe('bodies with a key __proto__ at the gateway', () => {
  const env = useGatewayEnv();
  const NAMESPACE = 'p-web';

  const post = (path: string, key: string, body: string, contentType: string) =>
    call(`${env().api}${path}`, {
      method: 'POST',
      token: key,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': contentType },
      body,
    });

  const expectRefused = (
    answer: { status: number; json: Record<string, unknown> | undefined; text?: string },
    kind: string,
    fields: string[],
  ) => {
    expect(answer.status, JSON.stringify(answer.json)).toBe(422);
    expect(answer.json).toMatchObject({ kind: 'Status', reason: 'Invalid', details: { kind } });
    const details = answer.json?.details as { causes?: { field: string; reason: string }[] } | undefined;
    const causes = details?.causes ?? [];
    expect(causes.map((cause) => cause.field)).toEqual(fields);
    expect(new Set(causes.map((cause) => cause.reason))).toEqual(new Set(['FieldValueNotSupported']));
    expect(JSON.stringify(answer.json)).not.toMatch(/status":\{"token|kubeConfig/);
  };

  it('a DirectClusterEndpointToken whose scope or labels hold __proto__ is refused, naming each', async () => {
    const key = await env().user('tenant-direct');
    const path = '/directclusterendpointtokens';
    const json =
      '{"metadata":{"labels":{"__proto__":"x","constructor":"c"}},"spec":{"scope":{"__proto__":{"clusters":[{"cluster":"east"}]}}}}';
    expectRefused(await post(path, key, json, 'application/json'), 'DirectClusterEndpointToken', [
      'metadata.labels.__proto__',
      'spec.scope.__proto__',
    ]);
    const yaml = 'apiVersion: management.platform/v1\nkind: DirectClusterEndpointToken\n__proto__: {}\n';
    expectRefused(await post(path, key, yaml, 'application/yaml'), 'DirectClusterEndpointToken', [
      '__proto__',
    ]);
    // The names of Object.prototype's other members are keys as any other: the token is issued.
    const ordinary = await post(
      path,
      key,
      JSON.stringify({ metadata: { labels: { constructor: 'c', toString: 't' } } }),
      'application/json',
    );
    expect(ordinary.status, JSON.stringify(ordinary.json)).toBe(201);
  });

  it('a VirtualClusterInstanceKubeConfig whose spec holds __proto__ is refused, naming it', async () => {
    const admin = await env().user('admin-kubeconfig', { admin: true });
    const body = JSON.stringify({
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterInstanceKubeConfig',
    }).replace(/}$/, ',"spec":{"__proto__":{"clientCert":true}}}');
    expectRefused(
      await post(
        `/namespaces/${NAMESPACE}/virtualclusterinstances/dev/kubeconfig`,
        admin,
        body,
        'application/json',
      ),
      'VirtualClusterInstanceKubeConfig',
      ['spec.__proto__'],
    );
  });
});
