import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { StatusError } from '../src/api/status.ts';
import { type AccessProxyDeps, forward, type TargetResolver } from '../src/gateway/access-proxy/index.ts';
import type { ProxyRoute, ProxyTarget, TargetConnection } from '../src/gateway/access-proxy/target.ts';
import { upgradeResponse } from '../src/gateway/access-proxy/upgrade.ts';
import { testIdentity } from './gateway-exchange.ts';

/**
 * The access proxy's relay between real HTTP peers over loopback, for its unit tests: a node
 * server stands for the target's API server (a byte relay: nothing here is Kubernetes), another
 * one is the proxy, calling `forward` as the gateway's pipeline does for `/p/<rest>`.
 * `closeRelayWorlds()` (in `afterEach`) closes what was started.
 */

export const SECRET = 'platform-credential-s3cret';
export const TARGET: ProxyTarget = { kind: 'Cluster', cluster: 'edge' };
export const identity = testIdentity('alice');

const closers: (() => Promise<void>)[] = [];

export async function closeRelayWorlds(): Promise<void> {
  for (const close of closers.splice(0).reverse()) await close();
}

export function listen(server: http.Server): Promise<number> {
  // Upgraded connections are no longer the server's to close: every socket is tracked.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  closers.push(
    () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

export type TargetHandler = (request: IncomingMessage, response: ServerResponse) => void;

export interface World {
  readonly proxyPort: number;
  readonly invalidated: ProxyTarget[];
}

/** The target (at `/prefix`), and the proxy in front of it relaying `/p/<rest>` to `<rest>`. */
export async function world(
  handler: TargetHandler,
  options: {
    upgrade?: (request: IncomingMessage, socket: Duplex, head: Buffer) => void;
    headersTimeoutMs?: number;
    /** The platform's credential headers; default a bearer token ({@link SECRET}). */
    credentials?: Record<string, string>;
    port?: number;
  } = {},
): Promise<World> {
  const target = http.createServer(handler);
  if (options.upgrade) target.on('upgrade', options.upgrade);
  const targetPort = options.port ?? (await listen(target));
  const agent = new http.Agent({ keepAlive: true });
  closers.push(async () => agent.destroy());
  const connection: TargetConnection = {
    description: 'cluster "edge"',
    server: new URL(`http://127.0.0.1:${targetPort}/prefix`),
    agent,
    credentials: () => options.credentials ?? { authorization: `Bearer ${SECRET}` },
  };
  const invalidated: ProxyTarget[] = [];
  const targets: TargetResolver = {
    resolve: async () => connection,
    invalidate: (which) => invalidated.push(which),
  };
  const deps: AccessProxyDeps = {
    targets,
    ...(options.headersTimeoutMs ? { relay: { headersTimeoutMs: options.headersTimeoutMs } } : {}),
  };
  const serve = (
    request: IncomingMessage,
    response: ServerResponse,
    upgrade?: { socket: Duplex; head: Buffer },
  ) => {
    const url = new URL(request.url ?? '/', 'http://proxy');
    const abort = new AbortController();
    response.once('close', () => {
      if (!response.writableFinished) abort.abort();
    });
    const route: ProxyRoute = {
      target: TARGET,
      upstreamPath: url.pathname.replace(/^\/p/, ''),
      attributes: {
        target: 'Cluster',
        verb: 'get',
        resourceRequest: false,
        apiGroup: '',
        resource: '',
        subresource: '',
        name: '',
        namespace: '',
        path: '/',
      },
    };
    forward(deps, {
      route,
      identity,
      request,
      response,
      search: url.search,
      signal: abort.signal,
      longLived: url.searchParams.has('watch') || upgrade !== undefined,
      ...(upgrade ? { upgrade } : {}),
    }).catch((error: unknown) => {
      const status =
        error instanceof StatusError ? error : new StatusError(500, 'InternalError', String(error));
      const body = JSON.stringify(status.toStatus());
      if (!response.headersSent) response.writeHead(status.code, { 'content-type': 'application/json' });
      response.end(body);
    });
  };
  const proxy = http.createServer((request, response) => serve(request, response));
  proxy.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) =>
    serve(request, upgradeResponse(request, socket), { socket, head }),
  );
  return { proxyPort: await listen(proxy), invalidated };
}

/** A request to the proxy; the answer with its body read whole. */
export function request(
  port: number,
  path: string,
  init: { method?: string; headers?: http.OutgoingHttpHeaders; body?: Buffer } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request({
      port,
      path,
      method: init.method ?? 'GET',
      headers: init.headers ?? {},
      agent: false,
    });
    outgoing.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }),
      );
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(init.body);
  });
}

/** A streaming request to the proxy: the answer as it comes. */
export function open(
  port: number,
  path: string,
): Promise<{ response: IncomingMessage; outgoing: http.ClientRequest }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request({ port, path, agent: false });
    outgoing.on('response', (response) => resolve({ response, outgoing }));
    outgoing.on('error', reject);
    outgoing.end();
  });
}
