import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { inject } from 'vitest';

/**
 * A TCP proxy between a client and the apiserver, so tests can break connections the way
 * networks do: reset them (`breakAll`), refuse new ones (`refuse`), or keep them open while
 * silently dropping everything in both directions (`silenceAll`, a half-open connection).
 */
export class TcpProxy {
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket; silent: boolean }>();
  private refusing = false;
  private constructor(private readonly server: net.Server) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (client) => {
      if (proxy.refusing) {
        client.destroy();
        return;
      }
      const upstream = net.connect(target.port, target.host);
      const pair = { client, upstream, silent: false };
      proxy.pairs.add(pair);
      const forward = (from: net.Socket, to: net.Socket) => {
        from.on('data', (chunk) => {
          if (!pair.silent) to.write(chunk);
        });
        from.on('end', () => {
          if (!pair.silent) to.end();
        });
        from.on('error', () => to.destroy());
        from.on('close', () => {
          if (!pair.silent) to.destroy();
          proxy.pairs.delete(pair);
        });
      };
      forward(client, upstream);
      forward(upstream, client);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get connections(): number {
    return this.pairs.size;
  }

  /** Resets every open connection. */
  breakAll(): void {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** While true, new connections are closed at once. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  /** Keeps every open connection open but forwards nothing more on it, in either direction. */
  silenceAll(): number {
    for (const pair of this.pairs) pair.silent = true;
    return this.pairs.size;
  }

  async close(): Promise<void> {
    this.breakAll();
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A copy of `kc` whose current cluster is reached through `proxy`. */
export function throughProxy(kc: KubeConfig, proxy: TcpProxy): KubeConfig {
  const current = kc.getCurrentCluster();
  if (!current) throw new Error('no current cluster');
  const copy = Object.create(Object.getPrototypeOf(kc)) as KubeConfig;
  Object.assign(copy, kc);
  copy.clusters = kc.clusters.map((cluster) =>
    cluster.name === current.name ? { ...cluster, server: `https://127.0.0.1:${proxy.port}` } : cluster,
  );
  return copy;
}

export function apiserverAddress(kc: KubeConfig): { host: string; port: number } {
  const url = new URL(kc.getCurrentCluster()!.server);
  return { host: url.hostname, port: Number(url.port || 443) };
}

/** A silent-to-stdout pino logger whose records the test can inspect. */
export function captureLogger() {
  const records: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) records.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), records };
}

export { eventually } from '../support/wait.ts';

/**
 * Compacts the run's etcd up to its current revision (as kube-apiserver does every 5 minutes),
 * so that watches from older resourceVersions get 410 Gone. Uses etcd's JSON gRPC gateway.
 */
export async function compactEtcd(): Promise<void> {
  const url = inject('etcdUrl');
  const range = (await (
    await fetch(`${url}/v3/kv/range`, {
      method: 'POST',
      body: JSON.stringify({ key: Buffer.from('/').toString('base64') }),
    })
  ).json()) as { header: { revision: string } };
  const response = await fetch(`${url}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision: range.header.revision, physical: true }),
  });
  if (!response.ok) throw new Error(`etcd compaction failed: ${response.status} ${await response.text()}`);
}
