import { createHash } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import { ApiException, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { type Clock, sleep, systemClock } from './clock.ts';
import { RequestTimeoutError } from './errors.ts';
import { type FieldManager, withDefaultFieldManager } from './field-managers.ts';
import type { KubeApi, Query, RequestOptions } from './kube-api.ts';
import { abortReason, apiException, transport } from './kube-http.ts';
import { openWatchStream, type WatchEvent, type WatchStream } from './kube-watch.ts';
import { BucketRateLimiter } from './rate-limiter.ts';
import type { RestClientMetrics } from './rest-client-metrics.ts';

/** Names a resource type on the apiserver; `group` is '' for the core group. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

export interface ObjectList<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

export function groupVersion(resource: Pick<ResourceRef, 'group' | 'version'>): string {
  return resource.group === '' ? resource.version : `${resource.group}/${resource.version}`;
}

/** The collection path, e.g. /apis/apps/v1/namespaces/ns/deployments or /api/v1/nodes. */
export function collectionPath(resource: ResourceRef, namespace?: string): string {
  const root =
    resource.group === '' ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  const ns = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${root}${ns}/${resource.plural}`;
}

export function objectPath(resource: ResourceRef, namespace: string | undefined, name: string): string {
  return `${collectionPath(resource, namespace)}/${encodeURIComponent(name)}`;
}

export interface KubeClientOptions {
  /**
   * The component this client writes for: the field manager of every write that names none, and
   * the User-Agent of every request (what kube-apiserver records as the manager of a write
   * without one, and shows in its audit log). Components also wrap the client they are handed
   * in `asFieldManager`; without either, a write is recorded as `unknown`.
   */
  fieldManager?: FieldManager;
  /**
   * Every request but a watch is aborted (RequestTimeoutError) after this long without a full
   * answer, unless it names its own `timeoutMs` (default 30 s): a hung list or write never pins a
   * worker.
   */
  timeoutMs?: number;
  /**
   * Client-side rate limit, a token bucket as client-go's: `qps` tokens a second, up to `burst`
   * at once; every request (watches included) takes one, waiting when none is left. `qps` <= 0:
   * no limit. Defaults: {@link DEFAULT_QPS}, {@link DEFAULT_BURST}.
   */
  qps?: number;
  burst?: number;
  /** `rest_client_requests_total` and `rest_client_request_duration_seconds` go here. */
  metrics?: RestClientMetrics;
  /**
   * Reads the kubeconfig again (its file and the files it names): credentials that rotate
   * (a projected ServiceAccount token, a client certificate, a kubeconfig Secret) are picked up
   * every `credentialsRefreshMs` and after a 401. Without it, the files the KubeConfig names
   * (token file, certificates) are still read again, the KubeConfig itself is not.
   */
  reload?: () => KubeConfig;
  /** How often credentials are read again (default 60 s, as client-go reads a token file). */
  credentialsRefreshMs?: number;
  /** Told when reading the credentials again failed (the previous ones stay in use). */
  onCredentialsError?: (err: unknown) => void;
  clock?: Clock;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
/**
 * Defaults of the client-side rate limit. client-go's own (5 qps, burst 10) would hold the
 * operator far below the write rate an apiserver sustains (docs/adr/0015-kube-client-timeouts-rate-limit-credentials.md); these
 * bound a runaway loop at a rate one apiserver replica absorbs, while APF protects the server.
 */
export const DEFAULT_QPS = 500;
export const DEFAULT_BURST = 1000;
const DEFAULT_CREDENTIALS_REFRESH_MS = 60_000;

/** What requests are sent with: TLS material (in a pooled agent) and headers, read at one time. */
interface Credentials {
  server: string;
  https: boolean;
  tls: https.AgentOptions;
  agent: http.Agent;
  headers: Record<string, string>;
  /** `user:password` for basic authentication. */
  auth: string | undefined;
  /** A digest of the TLS material: a new agent only when it changed. */
  tlsDigest: string;
}

/**
 * Raw HTTP against the apiserver with the KubeConfig's TLS material and credentials. Errors are
 * client-node's `ApiException` with `.code` and the decoded `Status` as `.body`, as the generated
 * APIs throw. Every request but a watch has a timeout; every request goes through the client-side
 * rate limit and is counted in `rest_client_*` metrics (labels: method, code, host; never a path).
 * Credentials are read once and again every `credentialsRefreshMs` and after a 401 (then the
 * request is sent once more: authentication comes first, so a refused request did nothing).
 */
export class KubeClient implements KubeApi {
  private credentials: Credentials | undefined;
  private refreshedAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<Credentials> | undefined;
  private readonly limiter: BucketRateLimiter | undefined;
  private readonly clock: Clock;

  constructor(
    private kubeConfig: KubeConfig,
    private readonly options: KubeClientOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    const qps = options.qps ?? DEFAULT_QPS;
    this.limiter =
      qps > 0 ? new BucketRateLimiter(this.clock, qps, options.burst ?? DEFAULT_BURST) : undefined;
  }

  async request<T = unknown>(request: RequestOptions): Promise<T> {
    const manager = this.options.fieldManager;
    const options = manager ? withDefaultFieldManager(request, manager) : request;
    await this.throttle(options.signal);
    const first = await this.credentialsNow(false);
    try {
      return await this.send<T>(options, first);
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 401)) throw err;
      // Rotated credentials: read them again and try once more.
      const renewed = await this.credentialsNow(true);
      return this.send<T>(options, renewed);
    }
  }

  /** The body to send and the options of the HTTP request carrying it. */
  private outgoing(
    options: RequestOptions,
    credentials: Credentials,
  ): { payload: string | undefined; requestOptions: https.RequestOptions } {
    const payload =
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body);
    const requestOptions: https.RequestOptions = {
      method: options.method,
      agent: credentials.agent,
      ...(credentials.auth ? { auth: credentials.auth } : {}),
      headers: {
        ...credentials.headers,
        ...this.userAgent(),
        Accept: 'application/json',
        ...(payload !== undefined
          ? {
              'Content-Type': options.contentType ?? 'application/json',
              'Content-Length': Buffer.byteLength(payload),
            }
          : {}),
      },
    };
    return { payload, requestOptions };
  }

  private send<T>(options: RequestOptions, credentials: Credentials): Promise<T> {
    const url = requestUrl(credentials.server, options.path, options.query);
    const { payload, requestOptions } = this.outgoing(options, credentials);
    const signal = options.signal;
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const observe = this.options.metrics?.start(options.method, url.host);
    let onAbort: (() => void) | undefined;
    const response = new Promise<T>((resolvePromise, rejectPromise) => {
      // A kept-alive socket keeps its last request and response, with the listeners below, until
      // its next request: they reach the promise, and so the parsed answer (a list page is
      // megabytes, per informer), and the body's chunks only until the promise settles.
      let settle: [typeof resolvePromise, typeof rejectPromise] | undefined = [resolvePromise, rejectPromise];
      const resolve = (value: T) => {
        settle?.[0](value);
        settle = undefined;
      };
      const reject = (err: unknown) => {
        settle?.[1](err);
        settle = undefined;
      };
      const req = transport(url).request(url, requestOptions, (res) => {
        // Decoded as it arrives, into the JS heap: a native buffer of the whole body (a list page is
        // megabytes) stayed resident once freed, as the C allocator keeps its heap.
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timeout);
          const status = res.statusCode ?? 0;
          observe?.(String(status));
          // The listener, with the socket, outlives the request: it must not keep the body.
          const body = text;
          text = '';
          if (status >= 200 && status < 300) {
            resolve((body === '' ? undefined : JSON.parse(body)) as T);
          } else {
            reject(apiException(status, body, res.headers));
          }
        });
      });
      const timeout =
        timeoutMs > 0
          ? setTimeout(
              () => req.destroy(new RequestTimeoutError(`${options.method} ${options.path} timed out`)),
              timeoutMs,
            )
          : undefined;
      req.on('error', (err) => {
        clearTimeout(timeout);
        observe?.('<error>');
        reject(err);
      });
      if (signal) {
        onAbort = () => req.destroy(abortReason(signal));
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
      req.end(payload);
    });
    // A long-lived signal (an informer's) sees many requests: never leave a listener behind.
    if (!signal) return response;
    return response.finally(() => {
      if (onAbort) signal.removeEventListener('abort', onAbort);
    });
  }

  /**
   * Opens a watch (`watch=true` is added). Resolves once the response headers arrived with 200;
   * rejects with `ApiException` otherwise (e.g. 410 when the resourceVersion is too old).
   * Events are delivered in order, one JSON document per line. No timeout (the server ends a
   * watch at its `timeoutSeconds`; the informer's watchdog catches a silent one).
   */
  async watch(
    path: string,
    query: Query,
    onEvent: (event: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<WatchStream> {
    await this.throttle(signal);
    const credentials = await this.credentialsNow(false);
    const url = requestUrl(credentials.server, path, { ...query, watch: true });
    const requestOptions: https.RequestOptions = {
      method: 'GET',
      // A connection of its own: a watch holds its socket for minutes, and destroying it must
      // not affect pooled request sockets. keepAlive off: one socket per watch, closed with it.
      agent: new (credentials.https ? https.Agent : http.Agent)({ keepAlive: false, ...credentials.tls }),
      ...(credentials.auth ? { auth: credentials.auth } : {}),
      headers: { ...credentials.headers, ...this.userAgent(), Accept: 'application/json' },
    };
    const observe = this.options.metrics?.start('WATCH', url.host);
    return openWatchStream({
      url,
      requestOptions,
      onEvent,
      ...(signal ? { signal } : {}),
      ...(observe ? { observe } : {}),
    });
  }

  private userAgent(): Record<string, string> {
    const manager = this.options.fieldManager;
    return manager ? { 'User-Agent': manager } : {};
  }

  /** Waits for a token of the client-side rate limit. */
  private async throttle(signal: AbortSignal | undefined): Promise<void> {
    const delay = this.limiter?.when('') ?? 0;
    if (delay <= 0) return;
    const started = this.clock.now();
    await sleep(this.clock, delay, signal);
    this.options.metrics?.rateLimited((this.clock.now() - started) / 1000);
  }

  /** The current credentials, read again when due (or `force`d after a 401); one read at a time. */
  private async credentialsNow(force: boolean): Promise<Credentials> {
    const due =
      this.clock.now() - this.refreshedAt >=
      (this.options.credentialsRefreshMs ?? DEFAULT_CREDENTIALS_REFRESH_MS);
    if (this.credentials && !due && !force) return this.credentials;
    this.refreshing ??= this.readCredentials().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async readCredentials(): Promise<Credentials> {
    this.refreshedAt = this.clock.now();
    if (this.options.reload && this.credentials) {
      try {
        this.kubeConfig = this.options.reload();
      } catch (err) {
        // Keep what works; a file may be mid-rotation.
        this.options.onCredentialsError?.(err);
      }
    }
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const opts: https.RequestOptions & { headers: Record<string, string> } = { headers: {} };
    // Reads the token (file, exec, OIDC) and the certificate files the KubeConfig names.
    await this.kubeConfig.applyToHTTPSOptions(opts);
    (opts.agent as http.Agent | undefined)?.destroy();
    const tls: https.AgentOptions = {
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      pfx: opts.pfx,
      passphrase: opts.passphrase,
      servername: opts.servername,
      ...(opts.rejectUnauthorized !== undefined ? { rejectUnauthorized: opts.rejectUnauthorized } : {}),
    };
    const tlsDigest = digestOf(tls);
    const server = cluster.server.replace(/\/$/, '');
    const isHttps = server.startsWith('https:');
    const previous = this.credentials;
    let agent = previous?.agent;
    if (!agent || previous?.tlsDigest !== tlsDigest || previous.server !== server) {
      agent = new (isHttps ? https.Agent : http.Agent)({ keepAlive: true, ...tls });
      if (previous) this.retire(previous.agent);
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(opts.headers))
      if (typeof value === 'string') headers[name] = value;
    this.credentials = {
      server,
      https: isHttps,
      tls,
      agent,
      headers,
      auth: opts.auth ?? undefined,
      tlsDigest,
    };
    return this.credentials;
  }

  /** An agent with outdated TLS material closes once its requests (bounded by the timeout) are done. */
  private retire(agent: http.Agent): void {
    const timer = setTimeout(() => agent.destroy(), (this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS) + 1000);
    timer.unref();
  }

  /** Closes pooled connections. */
  close(): void {
    this.credentials?.agent.destroy();
  }
}

function requestUrl(server: string, path: string, query: Query | undefined): URL {
  const url = new URL(server + path);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return url;
}

function digestOf(tls: https.AgentOptions): string {
  const hash = createHash('sha256');
  for (const value of [
    tls.ca,
    tls.cert,
    tls.key,
    tls.pfx,
    tls.passphrase,
    tls.servername,
    tls.rejectUnauthorized,
  ])
    hash.update(
      `${value === undefined ? '' : Array.isArray(value) ? value.join('\n') : String(value)}\u0000`,
    );
  return hash.digest('hex');
}

/** Reads `metadata.namespace`/`name` into the `ns/name` key (just `name` when cluster-scoped). */
export function objectKey(obj: KubernetesObject): string {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

export function splitKey(key: string): { namespace: string | undefined; name: string } {
  const slash = key.indexOf('/');
  return slash < 0
    ? { namespace: undefined, name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
