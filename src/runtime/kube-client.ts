import * as http from 'node:http';
import * as https from 'node:https';
import { ApiException, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { RequestTimeoutError } from './errors.ts';

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

export interface WatchEvent<T = KubernetesObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Query;
  body?: unknown;
  /** Defaults to application/json; patches name their strategy (see `PatchStrategy`). */
  contentType?: string;
  signal?: AbortSignal;
  /** Aborts the request (RequestTimeoutError) when no full answer arrived in this time. */
  timeoutMs?: number;
}

/** A live watch stream. `done` resolves when the server ends it cleanly, rejects on any error. */
export interface WatchStream {
  readonly done: Promise<void>;
  /** Ends the stream; `done` rejects with `reason`. */
  abort(reason: Error): void;
}

/**
 * The narrow client the runtime talks to the apiserver through. `KubeClient` is the real one;
 * it is an interface so the pure parts can be unit-tested without network.
 */
export interface KubeApi {
  request<T = unknown>(options: RequestOptions): Promise<T>;
  /** `signal` aborts the watch at any stage, including while it is being opened. */
  watch(
    path: string,
    query: Query,
    onEvent: (event: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<WatchStream>;
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

/**
 * Raw HTTP against the apiserver with the KubeConfig's TLS material and credentials applied per
 * request (so rotating tokens from exec/oidc providers are picked up). Errors are client-node's
 * `ApiException` with `.code` and the decoded `Status` as `.body`, as the generated APIs throw.
 */
export class KubeClient implements KubeApi {
  private agent: http.Agent | undefined;

  constructor(private readonly kubeConfig: KubeConfig) {}

  async request<T = unknown>(options: RequestOptions): Promise<T> {
    const { url, requestOptions } = await this.prepare(options.path, options.query);
    const payload =
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body);
    requestOptions.method = options.method;
    requestOptions.headers = {
      ...requestOptions.headers,
      Accept: 'application/json',
      ...(payload !== undefined
        ? {
            'Content-Type': options.contentType ?? 'application/json',
            'Content-Length': Buffer.byteLength(payload),
          }
        : {}),
    };
    const signal = options.signal;
    let onAbort: (() => void) | undefined;
    const response = new Promise<T>((resolve, reject) => {
      const req = transport(url).request(url, requestOptions, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timeout);
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            resolve((text === '' ? undefined : JSON.parse(text)) as T);
          } else {
            reject(apiException(status, text, res.headers));
          }
        });
      });
      const timeout =
        options.timeoutMs === undefined
          ? undefined
          : setTimeout(
              () => req.destroy(new RequestTimeoutError(`${options.method} ${options.path} timed out`)),
              options.timeoutMs,
            );
      req.on('error', (err) => {
        clearTimeout(timeout);
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
   * Events are delivered in order, one JSON document per line.
   */
  async watch(
    path: string,
    query: Query,
    onEvent: (event: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<WatchStream> {
    const { url, requestOptions } = await this.prepare(path, { ...query, watch: true });
    requestOptions.method = 'GET';
    requestOptions.headers = { ...requestOptions.headers, Accept: 'application/json' };
    // A connection of its own: a watch holds its socket for minutes, and destroying it must not
    // affect pooled request sockets.
    requestOptions.agent = this.watchAgent();
    return new Promise<WatchStream>((resolveOpen, rejectOpen) => {
      let settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
      let finished = false;
      const done = new Promise<void>((resolve, reject) => {
        settle = { resolve, reject };
      });
      // The stream may fail before anyone awaits `done`; the owner always awaits it eventually.
      done.catch(() => {});
      const finish = (err?: Error) => {
        if (finished) return;
        finished = true;
        if (err) settle!.reject(err);
        else settle!.resolve();
      };
      const req = transport(url).request(url, requestOptions, (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            rejectOpen(apiException(status, Buffer.concat(chunks).toString('utf8'), res.headers)),
          );
          res.on('error', rejectOpen);
          return;
        }
        resolveOpen({
          done,
          abort: (reason) => {
            finish(reason);
            req.destroy();
          },
        });
        let buffered = '';
        const deliver = (line: string) => {
          if (line === '' || finished) return;
          try {
            onEvent(JSON.parse(line) as WatchEvent);
          } catch (err) {
            finish(err instanceof Error ? err : new Error(String(err)));
            req.destroy();
          }
        };
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffered += chunk;
          let newline = buffered.indexOf('\n');
          while (newline >= 0 && !finished) {
            const line = buffered.slice(0, newline).trim();
            buffered = buffered.slice(newline + 1);
            newline = buffered.indexOf('\n');
            deliver(line);
          }
        });
        res.on('error', (err) => finish(err));
        res.on('aborted', () => finish(new Error('watch stream aborted by the peer')));
        res.on('end', () => {
          // A last event without a trailing newline still counts.
          deliver(buffered.trim());
          finish();
        });
        res.on('close', () => finish(res.complete ? undefined : new Error('watch connection closed')));
      });
      req.on('error', (err) => {
        finish(err);
        rejectOpen(err);
      });
      if (signal) {
        const onAbort = () => {
          const reason = abortReason(signal);
          finish(reason);
          rejectOpen(reason);
          req.destroy();
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        done.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => {});
      }
      req.end();
    });
  }

  private watchAgent(): http.Agent {
    // keepAlive off: one socket per watch, closed with it.
    return new (this.isHttps() ? https.Agent : http.Agent)({ keepAlive: false, ...this.tlsAgentOptions });
  }

  private tlsAgentOptions: https.AgentOptions = {};

  private isHttps(): boolean {
    return (this.kubeConfig.getCurrentCluster()?.server ?? '').startsWith('https:');
  }

  private async prepare(path: string, query: Query | undefined) {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const requestOptions: https.RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(requestOptions);
    // applyToHTTPSOptions builds a fresh agent per call; keep one pooled agent with the same TLS
    // material so ordinary requests reuse connections.
    const created = requestOptions.agent as https.Agent | undefined;
    if (!this.agent) {
      const tls = (created?.options ?? {}) as https.AgentOptions;
      this.tlsAgentOptions = {
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        pfx: tls.pfx,
        passphrase: tls.passphrase,
        servername: tls.servername,
        ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
      };
      this.agent = new (this.isHttps() ? https.Agent : http.Agent)({
        keepAlive: true,
        ...this.tlsAgentOptions,
      });
    }
    created?.destroy();
    requestOptions.agent = this.agent;
    return { url, requestOptions };
  }

  /** Closes pooled connections. */
  close(): void {
    this.agent?.destroy();
  }
}

function transport(url: URL): typeof https | typeof http {
  return url.protocol === 'https:' ? https : http;
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('request aborted');
}

function apiException(code: number, text: string, headers: http.IncomingHttpHeaders): ApiException<unknown> {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text
  }
  const flatHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flatHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return new ApiException(
    code,
    statusMessage(body) ?? (http.STATUS_CODES[code] || 'error'),
    body,
    flatHeaders,
  );
}

function statusMessage(body: unknown): string | undefined {
  return typeof body === 'object' &&
    body !== null &&
    typeof (body as { message?: unknown }).message === 'string'
    ? (body as { message: string }).message
    : undefined;
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
