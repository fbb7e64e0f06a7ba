import type { IncomingMessage, ServerResponse } from 'node:http';
import * as https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { MUTATING_METHODS } from '../../../src/runtime/fencing.ts';

/** One HTTP request an operator sent through the proxy, with what became of it. */
export interface ProxyRecord {
  id: number;
  method: string;
  /** Path without the query. */
  path: string;
  query: string;
  /** When the request reached the proxy: when the operator sent it (ms, this machine's clock). */
  receivedAt: number;
  /** When it went on to the apiserver; absent if it never did. */
  forwardedAt?: number;
  /** Sent on only when a partition healed (it waited, like packets buffered in the network). */
  deliveredLate?: boolean;
  /** The apiserver's status code and when its answer came back. */
  status?: number;
  answeredAt?: number;
  /**
   * `forwarded` (waiting for the answer), `answered`, `held` (waiting behind a partition),
   * `dropped` (the operator gave up while it was held: never reached the apiserver),
   * `cut` (in flight when the partition began: the answer never came back), `failed`.
   */
  outcome: 'forwarded' | 'answered' | 'held' | 'dropped' | 'cut' | 'failed';
}

export interface RecordingProxyOptions {
  /** The apiserver. */
  upstream: { host: string; port: number; caPem: string };
  /** The identity the proxy presents upstream: the operator's own client certificate. */
  clientCertificate: { certPem: string; keyPem: string };
  /** The proxy's serving certificate (for 127.0.0.1), signed by a CA the operator's kubeconfig trusts. */
  serving: { certPem: string; keyPem: string };
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  record: ProxyRecord;
  upstream?: ReturnType<typeof https.request>;
  cut?: boolean;
}

export const isWrite = (record: ProxyRecord): boolean => MUTATING_METHODS.has(record.method);
export const isLeaseRequest = (record: ProxyRecord): boolean =>
  record.path.startsWith('/apis/coordination.k8s.io/');
export const succeeded = (record: ProxyRecord): boolean =>
  record.status !== undefined && record.status >= 200 && record.status < 300;

/**
 * An HTTPS proxy between one operator process and the apiserver that records every request, so
 * each write can be attributed to its process and timed: it terminates the operator's TLS (its
 * own certificate for 127.0.0.1) and opens TLS upstream with the operator's client certificate,
 * so the apiserver sees the operator's own identity too (and its audit log attributes writes).
 *
 * `partition()` cuts the operator off the way a network does: answers in flight never come back
 * (their upstream requests are destroyed, the operator's connections stay open and silent), and
 * new requests are accepted but held, never forwarded. `heal()` ends it: connections the partition
 * broke are reset, and held requests whose sender is still waiting are delivered late, as buffered
 * packets would be.
 */
export class RecordingProxy {
  readonly records: ProxyRecord[] = [];
  partitionedAt: number | undefined;
  healedAt: number | undefined;
  private partitioned: ((record: ProxyRecord) => boolean) | undefined;
  private readonly exchanges = new Set<Exchange>();
  private held: Exchange[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly agent: https.Agent;
  private nextId = 0;

  private constructor(
    private readonly server: https.Server,
    private readonly options: RecordingProxyOptions,
  ) {
    this.agent = new https.Agent({
      keepAlive: true,
      ca: options.upstream.caPem,
      cert: options.clientCertificate.certPem,
      key: options.clientCertificate.keyPem,
    });
  }

  static async start(options: RecordingProxyOptions): Promise<RecordingProxy> {
    const server = https.createServer({ cert: options.serving.certPem, key: options.serving.keyPem });
    const proxy = new RecordingProxy(server, options);
    server.on('request', (req, res) => proxy.onRequest(req, res));
    server.on('connection', (socket: Socket) => {
      proxy.sockets.add(socket);
      socket.on('close', () => proxy.sockets.delete(socket));
    });
    server.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Every write (POST, PUT, PATCH, DELETE) the operator sent, in the order it sent them. */
  writes(): ProxyRecord[] {
    return this.records.filter(isWrite);
  }

  /**
   * Cuts off every request, or only those `affects` selects (say, only the lease: a leader that
   * cannot renew but still reaches the apiserver otherwise).
   */
  partition(affects: (record: ProxyRecord) => boolean = () => true): void {
    this.partitioned = affects;
    this.partitionedAt = Date.now();
    for (const exchange of this.exchanges) {
      if (!exchange.upstream || !affects(exchange.record)) continue;
      exchange.cut = true;
      if (exchange.record.outcome === 'forwarded') exchange.record.outcome = 'cut';
      exchange.upstream.destroy();
    }
  }

  heal(): void {
    this.partitioned = undefined;
    this.healedAt = Date.now();
    for (const exchange of this.exchanges) if (exchange.cut) exchange.res.destroy();
    for (const exchange of this.held.splice(0)) {
      if (exchange.res.destroyed || exchange.req.destroyed || exchange.record.outcome !== 'held') continue;
      exchange.record.deliveredLate = true;
      this.forward(exchange);
    }
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    for (const exchange of this.exchanges) exchange.upstream?.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const record: ProxyRecord = {
      id: this.nextId++,
      method: req.method ?? 'GET',
      path: q < 0 ? url : url.slice(0, q),
      query: q < 0 ? '' : url.slice(q + 1),
      receivedAt: Date.now(),
      outcome: 'held',
    };
    this.records.push(record);
    const exchange: Exchange = { req, res, record };
    this.exchanges.add(exchange);
    res.on('close', () => {
      this.exchanges.delete(exchange);
      if (record.outcome === 'held') record.outcome = 'dropped';
      if (!exchange.cut) exchange.upstream?.destroy();
    });
    if (this.partitioned?.(record)) {
      this.held.push(exchange);
      return;
    }
    this.forward(exchange);
  }

  private forward(exchange: Exchange): void {
    const { req, res, record } = exchange;
    const { host, port } = this.options.upstream;
    const headers: Record<string, string | string[] | undefined> = {
      ...req.headers,
      host: `${host}:${port}`,
    };
    delete headers.connection;
    delete headers['keep-alive'];
    record.forwardedAt = Date.now();
    record.outcome = 'forwarded';
    const upstream = https.request(
      { host, port, method: record.method, path: req.url, headers, agent: this.agent },
      (answer) => {
        if (exchange.cut) {
          answer.destroy();
          return;
        }
        record.status = answer.statusCode;
        record.answeredAt = Date.now();
        record.outcome = 'answered';
        const answerHeaders = { ...answer.headers };
        delete answerHeaders.connection;
        delete answerHeaders['keep-alive'];
        res.writeHead(answer.statusCode ?? 502, answerHeaders);
        answer.on('error', () => {
          if (!exchange.cut) res.destroy();
        });
        answer.pipe(res);
      },
    );
    exchange.upstream = upstream;
    upstream.on('error', () => {
      if (exchange.cut) return; // the partition: the operator hears nothing
      if (record.outcome === 'forwarded') record.outcome = 'failed';
      res.destroy();
    });
    req.pipe(upstream);
  }
}
