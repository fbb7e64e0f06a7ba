import { Counter, Histogram, type Registry } from 'prom-client';
import type { RequestAttributes } from '../authz/attributes.ts';

/**
 * Request metrics of the gateway, in the shape of kube-apiserver's `apiserver_request_total` and
 * `apiserver_request_duration_seconds`: by verb (upper case for non-resource requests, as
 * kube-apiserver reports them), group, resource, subresource, scope and code.
 */

type Labels = 'verb' | 'group' | 'resource' | 'subresource' | 'scope' | 'component';

/** kube-apiserver's request duration buckets. */
const BUCKETS = [
  0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60,
];

export class GatewayMetrics {
  readonly requests: Counter<Labels | 'code'>;
  readonly duration: Histogram<Labels>;

  constructor(readonly registry: Registry) {
    this.requests = new Counter({
      name: 'gateway_request_total',
      help: 'Counter of management API requests broken out for each verb, group, resource, scope, component and HTTP response code (as apiserver_request_total).',
      labelNames: ['verb', 'group', 'resource', 'subresource', 'scope', 'component', 'code'],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'gateway_request_duration_seconds',
      help: 'Response latency distribution in seconds for each verb, group, resource, subresource, scope and component (as apiserver_request_duration_seconds).',
      labelNames: ['verb', 'group', 'resource', 'subresource', 'scope', 'component'],
      buckets: BUCKETS,
      registers: [registry],
    });
  }

  observe(attributes: RequestAttributes | undefined, code: number, seconds: number): void {
    const labels = labelsOf(attributes);
    this.requests.inc({ ...labels, code: String(code) });
    // Watches last as long as the client wants: their duration says nothing about latency.
    if (labels.verb !== 'WATCH') this.duration.observe(labels, seconds);
  }
}

export function labelsOf(attributes: RequestAttributes | undefined): Record<Labels, string> {
  if (!attributes)
    return { verb: '', group: '', resource: '', subresource: '', scope: '', component: 'gateway' };
  if (!attributes.resourceRequest) {
    return {
      verb: attributes.verb.toUpperCase(),
      group: '',
      resource: '',
      subresource: '',
      scope: '',
      component: 'gateway',
    };
  }
  const scope = attributes.name ? 'resource' : attributes.namespace ? 'namespace' : 'cluster';
  return {
    verb: attributes.verb.toUpperCase(),
    group: attributes.apiGroup,
    resource: attributes.resource,
    subresource: attributes.subresource,
    scope,
    component: 'gateway',
  };
}
