import type https from 'node:https';
import type { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { errors, Pool } from 'undici';
import { StatusError, serviceUnavailable } from '../../api/status.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';

/**
 * The connection to kube-apiserver, with the gateway's TLS material and credentials (refreshed in
 * the background, so rotating service-account tokens are picked up): two undici connection pools,
 * one for ordinary requests and one for streams (watches). A watch holds its connection for as
 * long as it lasts, so watches never wait for, nor make others wait for, a connection of the
 * other pool; how many watches one identity may hold is the throttle stage's limit.
 */

export type HeaderMap = Record<string, string | string[]>;

export interface UpstreamRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute path on the apiserver, without query. */
  readonly path: string;
  /** The query string, with its leading `?`, or empty. */
  readonly search?: string;
  readonly headers?: HeaderMap;
  readonly body?: string | Buffer;
  readonly signal?: AbortSignal;
  /** A stream (watch): sent on the stream pool, without a body timeout. */
  readonly stream?: boolean;
}

export interface UpstreamResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Readable & {
    text(): Promise<string>;
    arrayBuffer(): Promise<ArrayBuffer>;
    dump(): Promise<void>;
  };
}

export interface UpstreamOptions {
  /** Sockets to the apiserver for ordinary requests. Default 64. */
  readonly connections?: number;
  /** Sockets to the apiserver for watches (one per watch). Default 2048. */
  readonly streamConnections?: number;
  /** Time to the response headers (and between body chunks) for ordinary requests. Default 60 s. */
  readonly timeoutMs?: number;
  /** How often credentials are re-read from the kubeconfig. Default 60 s. */
  readonly credentialRefreshMs?: number;
}

export class Upstream {
  private readonly pool: Pool;
  private readonly streams: Pool;
  private readonly prefix: string;
  private authorization: string | undefined;
  private refreshedAt = 0;
  private refreshing: Promise<void> | undefined;
  private readonly timeoutMs: number;
  private readonly refreshMs: number;

  private constructor(
    private readonly kubeConfig: KubeConfig,
    tls: https.RequestOptions,
    authorization: string | undefined,
    options: UpstreamOptions,
  ) {
    const server = new URL(kubeConfig.getCurrentCluster()?.server ?? '');
    this.prefix = server.pathname.replace(/\/$/, '');
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.refreshMs = options.credentialRefreshMs ?? 60_000;
    this.authorization = authorization;
    this.refreshedAt = Date.now();
    const pool = (connections: number) =>
      new Pool(server.origin, {
        connections,
        pipelining: 1,
        // HTTP/1.1 only. undici 8 offers HTTP/2 by default, and its HTTP/2 client joins the values
        // of a repeated header with ", ": kube-apiserver would read one group named
        // "platform:admins, platform:authenticated" instead of several `Impersonate-Group`s.
        allowH2: false,
        keepAliveTimeout: 30_000,
        connect: {
          ...(tls.ca ? { ca: tls.ca } : {}),
          ...(tls.cert ? { cert: tls.cert } : {}),
          ...(tls.key ? { key: tls.key } : {}),
          ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
          ...(tls.servername ? { servername: tls.servername } : {}),
        },
      });
    this.pool = pool(options.connections ?? 64);
    this.streams = pool(options.streamConnections ?? 2048);
  }

  static async create(kubeConfig: KubeConfig, options: UpstreamOptions = {}): Promise<Upstream> {
    if (!kubeConfig.getCurrentCluster()) throw new Error('the kubeconfig has no current cluster');
    const { tls, authorization } = await kubeConfigCredentials(kubeConfig);
    return new Upstream(kubeConfig, tls, authorization, options);
  }

  /** Sends a request as the operator (with impersonation headers when the caller adds them). */
  async request(request: UpstreamRequest): Promise<UpstreamResponse> {
    this.maybeRefresh();
    // A write that names no field manager is recorded under its User-Agent's name: the caller's
    // when the proxy relays it, else the gateway's (its own writes, a caller that sent none).
    const headers: HeaderMap = { 'user-agent': fieldManagers.gateway, ...request.headers };
    if (this.authorization) headers.authorization = this.authorization;
    const response = await (request.stream ? this.streams : this.pool).request({
      method: request.method,
      path: `${this.prefix}${request.path}${request.search ?? ''}`,
      headers,
      ...(request.body !== undefined ? { body: request.body } : {}),
      ...(request.signal ? { signal: request.signal } : {}),
      headersTimeout: this.timeoutMs,
      bodyTimeout: request.stream ? 0 : this.timeoutMs,
    });
    return response as unknown as UpstreamResponse;
  }

  /** A request whose whole answer is wanted as parsed JSON (errors keep their Status body). */
  async json<T = unknown>(
    request: UpstreamRequest,
  ): Promise<{ statusCode: number; body: T; text: string; warnings: string[] }> {
    const response = await this.request({
      ...request,
      headers: { accept: 'application/json', ...request.headers },
    });
    const text = await response.body.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    const warning = response.headers.warning;
    const warnings = warning === undefined ? [] : Array.isArray(warning) ? warning : [warning];
    return { statusCode: response.statusCode, body: body as T, text, warnings };
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.close(), this.streams.destroy()]);
  }

  private maybeRefresh(): void {
    if (this.refreshing || Date.now() - this.refreshedAt < this.refreshMs) return;
    this.refreshing = kubeConfigCredentials(this.kubeConfig)
      .then(({ authorization }) => {
        this.authorization = authorization;
      })
      .catch(() => {
        // Keep the previous credentials; the next refresh tries again.
      })
      .finally(() => {
        this.refreshedAt = Date.now();
        this.refreshing = undefined;
      });
  }
}

/**
 * The TLS material (`ca`, `cert`, `key`, `servername`, `rejectUnauthorized`) and the
 * `Authorization` header value (bearer or basic) a kubeconfig's current context holds, as
 * client-node applies them (a service account's token file is read again on each call). Never logged.
 */
export async function kubeConfigCredentials(
  kubeConfig: KubeConfig,
): Promise<{ tls: https.RequestOptions; authorization: string | undefined }> {
  const options: https.RequestOptions = {};
  await kubeConfig.applyToHTTPSOptions(options);
  (options.agent as https.Agent | undefined)?.destroy();
  const headers = (options.headers ?? {}) as Record<string, string | undefined>;
  const bearer = headers.Authorization ?? headers.authorization;
  const basic = options.auth ? `Basic ${Buffer.from(options.auth).toString('base64')}` : undefined;
  return { tls: options, authorization: bearer ?? basic };
}

/** A failed apiserver call as the answer to the client: 499 when the client left, 504 on a timeout, 503 otherwise. */
export function upstreamFailure(error: unknown, signal: AbortSignal | undefined): StatusError {
  if (error instanceof StatusError) return error;
  if (signal?.aborted) return new StatusError(499, 'ClientClosedRequest', 'the client closed the request');
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
    return new StatusError(504, 'Timeout', 'the cluster did not answer in time');
  }
  return serviceUnavailable('the cluster could not be reached');
}
