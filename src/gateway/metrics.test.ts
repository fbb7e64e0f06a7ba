import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { nonResourceRequest, type RequestAttributes } from '../authz/attributes.ts';
import { GatewayMetrics } from './metrics.ts';

/** Requests through the access proxy are counted apart, by target kind and verb only. */

const proxied = (
  verb: string,
  resource: string,
  extra: Partial<RequestAttributes> = {},
): RequestAttributes => ({
  ...nonResourceRequest(verb, `/api/v1/${resource}`),
  target: 'Cluster',
  cluster: 'edge',
  resourceRequest: true,
  resource,
  ...extra,
});

async function series(registry: Registry, name: string): Promise<Record<string, string>[]> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? []).map((value) => value.labels as Record<string, string>);
}

describe('gateway metrics of the access proxy', () => {
  test('the cluster name and the resources a caller names never become labels: one series per target kind, verb and code', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics(registry);
    for (let i = 0; i < 50; i++) {
      metrics.observe(proxied('get', `made-up-${i}`, { cluster: `cluster-${i}` }), 404, 0.01);
    }
    metrics.observe(proxied('bogus-verb', 'pods'), 200, 0.01);
    expect(await series(registry, 'gateway_proxy_request_total')).toEqual([
      { target: 'Cluster', verb: 'GET', code: '404' },
      { target: 'Cluster', verb: 'OTHER', code: '200' },
    ]);
    expect(await series(registry, 'gateway_request_total')).toEqual([]);
  });

  test('a long-running answer (an upgraded connection, a watch) is counted, its duration is not taken for latency', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics(registry);
    metrics.observe(proxied('create', 'pods', { subresource: 'exec' }), 101, 30, true);
    metrics.observe(proxied('watch', 'pods'), 200, 30);
    metrics.observe(proxied('get', 'pods'), 200, 0.02);
    const counts = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === 'gateway_proxy_request_duration_seconds',
    );
    const observed = (counts?.values ?? []).filter(
      (value) => (value as { metricName?: string }).metricName?.endsWith('_count') && value.value > 0,
    );
    expect(observed.map((value) => value.labels)).toEqual([{ target: 'Cluster', verb: 'GET' }]);
    expect(await series(registry, 'gateway_proxy_request_total')).toHaveLength(3);
  });
});
