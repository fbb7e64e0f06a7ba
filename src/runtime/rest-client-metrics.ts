import { Counter, Histogram, type Registry } from 'prom-client';

/** client-go's request latency buckets (rest_client_request_duration_seconds). */
const durationBuckets = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/**
 * client-go's REST client metrics, under its names and labels: requests by method, code and
 * host; latency by verb and host; time spent waiting for the client-side rate limit. Never a
 * path or an object name. One instance per Registry, shared by every KubeClient on it.
 */
export class RestClientMetrics {
  private readonly requests: Counter<'code' | 'method' | 'host'>;
  private readonly duration: Histogram<'verb' | 'host'>;
  private readonly rateLimiterDuration: Histogram;

  private constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'rest_client_requests_total',
      help: 'Number of HTTP requests, partitioned by status code, method, and host.',
      labelNames: ['code', 'method', 'host'],
      registers,
    });
    this.duration = new Histogram({
      name: 'rest_client_request_duration_seconds',
      help: 'Request latency in seconds. Broken down by verb and host.',
      labelNames: ['verb', 'host'],
      buckets: durationBuckets,
      registers,
    });
    this.rateLimiterDuration = new Histogram({
      name: 'rest_client_rate_limiter_duration_seconds',
      help: 'Client side rate limiter latency in seconds.',
      buckets: durationBuckets,
      registers,
    });
  }

  private static readonly byRegistry = new WeakMap<Registry, RestClientMetrics>();

  static for(registry: Registry): RestClientMetrics {
    let metrics = RestClientMetrics.byRegistry.get(registry);
    if (!metrics) {
      metrics = new RestClientMetrics(registry);
      RestClientMetrics.byRegistry.set(registry, metrics);
    }
    return metrics;
  }

  /** Starts timing a request; call the result once with the status code (or `<error>`). */
  start(method: string, host: string): (code: string) => void {
    const stop = this.duration.startTimer({ verb: method, host });
    let done = false;
    return (code) => {
      if (done) return;
      done = true;
      stop();
      this.requests.inc({ code, method, host });
    };
  }

  rateLimited(seconds: number): void {
    this.rateLimiterDuration.observe(seconds);
  }
}
