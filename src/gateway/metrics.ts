import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { KUBERNETES_VERBS } from '../api/meta.ts';
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
  readonly proxied: Counter<'target' | 'verb' | 'code'>;
  readonly proxiedDuration: Histogram<'target' | 'verb'>;
  /** Long-lived connections (watches, upgraded streams, followed logs) held open now (`sessions.ts`). */
  readonly longLived: Gauge;
  /** Those cut because the key that opened them stopped being valid, by reason (never a key's name). */
  readonly longLivedCuts: Counter<'reason'>;

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
    this.proxied = new Counter({
      name: 'gateway_proxy_request_total',
      help: 'Counter of requests through the access proxy by target kind (Cluster, ProjectVirtualCluster, ProjectSpace), verb and HTTP response code.',
      labelNames: ['target', 'verb', 'code'],
      registers: [registry],
    });
    this.proxiedDuration = new Histogram({
      name: 'gateway_proxy_request_duration_seconds',
      help: "Time in seconds from a request's arrival to its answer's headers through the access proxy, by target kind and verb (long-running requests excluded).",
      labelNames: ['target', 'verb'],
      buckets: BUCKETS,
      registers: [registry],
    });
    this.longLived = new Gauge({
      name: 'gateway_long_lived_connections',
      help: 'Long-lived connections (watches, upgraded streams, followed logs) held open now, management API and access proxy.',
      registers: [registry],
    });
    this.longLivedCuts = new Counter({
      name: 'gateway_long_lived_connections_cut_total',
      help: 'Long-lived connections cut because the access key that opened them stopped being valid, by reason.',
      labelNames: ['reason'],
      registers: [registry],
    });
  }

  /**
   * One answer: its code, and its latency (to the end of the answer, or to its headers for one
   * streamed as it comes). A long-running answer's duration is not its latency: not observed.
   */
  observe(
    attributes: RequestAttributes | undefined,
    code: number,
    seconds: number,
    longRunning = false,
  ): void {
    if (attributes !== undefined && attributes.target !== 'Management') {
      this.observeProxied(attributes, code, seconds, longRunning);
      return;
    }
    const labels = labelsOf(attributes);
    this.requests.inc({ ...labels, code: String(code) });
    // Watches last as long as the client wants: their duration says nothing about latency.
    if (labels.verb !== 'WATCH' && !longRunning) this.duration.observe(labels, seconds);
  }

  /**
   * A request of the access proxy, by target kind and verb only: cluster names and the resources
   * of the targets are not bounded (any caller can name any resource), the label sets must be.
   */
  private observeProxied(
    attributes: RequestAttributes,
    code: number,
    seconds: number,
    longRunning: boolean,
  ): void {
    const labels = { target: attributes.target, verb: proxiedVerb(attributes) };
    this.proxied.inc({ ...labels, code: String(code) });
    if (!longRunning && attributes.verb !== 'watch') this.proxiedDuration.observe(labels, seconds);
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

/** Kubernetes verbs; anything else (a non-resource request's method) counted as one of HTTP's methods. */
const PROXIED_VERBS: ReadonlySet<string> = new Set([...KUBERNETES_VERBS, 'head', 'options', 'post', 'put']);

/** The verb label of a proxied request, from a bounded set, upper case as kube-apiserver's. */
function proxiedVerb(attributes: RequestAttributes): string {
  return (PROXIED_VERBS.has(attributes.verb) ? attributes.verb : 'other').toUpperCase();
}
