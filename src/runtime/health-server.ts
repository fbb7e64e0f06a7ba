import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface ReadinessReport {
  ready: boolean;
  /** Names of the checks that are not ready (e.g. informers not yet synced). */
  notReady: string[];
}

export interface HealthServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port: number;
  registry: Registry;
  readiness: () => ReadinessReport;
  /** Liveness; defaults to always alive. */
  liveness?: () => boolean;
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `/metrics` (Prometheus text), `/healthz` and `/readyz` (503 listing what is not ready). */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/metrics') {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': options.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    if (path === '/healthz' || path === '/livez') {
      const alive = options.liveness?.() ?? true;
      res.writeHead(alive ? 200 : 503, { 'Content-Type': 'text/plain' }).end(alive ? 'ok' : 'not alive');
      return;
    }
    if (path === '/readyz') {
      const report = options.readiness();
      const body = report.ready
        ? 'ok'
        : `not ready:\n${report.notReady.map((name) => `- ${name}`).join('\n')}\n`;
      res.writeHead(report.ready ? 200 : 503, { 'Content-Type': 'text/plain' }).end(body);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
