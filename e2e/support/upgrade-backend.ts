import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { WebSocket, WebSocketServer } from 'ws';
import type { KubeClient } from '../../src/runtime/kube-client.ts';

/**
 * An upgrade endpoint behind a real kube-apiserver, where no kubelet runs: kube-apiserver's pod
 * proxy (`/api/v1/namespaces/<ns>/pods/<pod>/proxy/...`) forwards an upgraded connection
 * to a Pod's IP as it forwards `exec` to a kubelet (the service proxy does too, but only to
 * endpoint addresses that are Pods' IPs, so a Pod is needed either way). The Pod never runs:
 * its status names the address of a backend the test process runs on this machine's
 * non-loopback address (the apiserver refuses loopback and link-local ones). The backend answers
 *
 * - a WebSocket upgrade (subprotocol `v5.channel.k8s.io`, as kubectl's exec): it first sends
 *   {@link GREETING}, then echoes every message;
 * - an `Upgrade: SPDY/3.1` request: `101 Switching Protocols`, then {@link GREETING} and an echo of
 *   every byte (SPDY framing is the endpoints' business; a relay only moves bytes).
 *
 * Both echoes keep Node's back-pressure (a paused reader stops the writer).
 */

export const CHANNEL_PROTOCOL = 'v5.channel.k8s.io';
export const GREETING = 'hello from the backend\n';
export const BACKEND_POD = 'upgrade-echo';

/** This machine's first non-internal IPv4 address (the service proxy does not forward to loopback). */
export function nonLoopbackAddress(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address;
    }
  }
  throw new Error('this machine has no non-loopback IPv4 address for an upgrade backend');
}

export interface UpgradeBackend {
  readonly address: string;
  readonly port: number;
  /** Open upgraded connections (WebSocket and SPDY) right now. */
  openConnections(): number;
  close(): Promise<void>;
}

export async function startUpgradeBackend(): Promise<UpgradeBackend> {
  const address = nonLoopbackAddress();
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain' }).end('plain\n');
  });
  const sockets = new Set<Socket>();
  const webSockets = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has(CHANNEL_PROTOCOL) ? CHANNEL_PROTOCOL : false),
  });
  webSockets.on('connection', (socket) => {
    socket.send(GREETING);
    socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
  });
  server.on('upgrade', (request, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    const upgrade = (request.headers.upgrade ?? '').toLowerCase();
    if (upgrade === 'websocket') {
      webSockets.handleUpgrade(request, socket, head, (ws) => webSockets.emit('connection', ws, request));
      return;
    }
    if (upgrade === 'spdy/3.1') {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      socket.write(GREETING);
      if (head.length > 0) socket.write(head);
      socket.pipe(socket);
      return;
    }
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address,
    port,
    openConnections: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      webSockets.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A Pod {@link BACKEND_POD} in `namespace` (never scheduled: its status is written here, as a
 * kubelet would) whose IP and port are the backend's, so that `pods/<BACKEND_POD>/proxy/`
 * reaches it. Its ServiceAccount is made too (no controller manager makes `default`).
 */
export async function exposeBackend(admin: KubeClient, namespace: string, backend: UpgradeBackend) {
  await admin.request({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts`,
    body: { metadata: { name: BACKEND_POD }, automountServiceAccountToken: false },
  });
  await admin.request({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/pods`,
    body: {
      metadata: { name: BACKEND_POD },
      spec: {
        serviceAccountName: BACKEND_POD,
        automountServiceAccountToken: false,
        containers: [{ name: 'echo', image: 'echo', ports: [{ containerPort: backend.port }] }],
      },
    },
  });
  await admin.request({
    method: 'PATCH',
    path: `/api/v1/namespaces/${namespace}/pods/${BACKEND_POD}/status`,
    contentType: 'application/merge-patch+json',
    body: { status: { phase: 'Running', podIP: backend.address, podIPs: [{ ip: backend.address }] } },
  });
}

/** The pod-proxy path of the backend in `namespace` (the Pod's one container port is the backend's). */
export function backendProxyPath(namespace: string, rest = ''): string {
  return `/api/v1/namespaces/${namespace}/pods/${BACKEND_POD}/proxy/${rest}`;
}

export const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/**
 * Opens a WebSocket (subprotocol {@link CHANNEL_PROTOCOL}) to `url` with `token` as the bearer,
 * trusting `caPem`; resolves once open, with every message received queued in `received`.
 */
export async function openChannelWebSocket(url: string, token: string, caPem: string | undefined) {
  const socket = new WebSocket(url.replace(/^http/, 'ws'), [CHANNEL_PROTOCOL], {
    headers: { authorization: `Bearer ${token}` },
    ...(caPem ? { ca: caPem } : {}),
  });
  const received: Buffer[] = [];
  socket.on('message', (data: Buffer) => received.push(Buffer.from(data)));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) =>
      reject(new Error(`the WebSocket upgrade was answered ${response.statusCode}`)),
    );
  });
  return { socket, received };
}

/**
 * Sends `GET url` with `Upgrade: SPDY/3.1` (as kubectl's SPDY executor) and resolves with the
 * upgraded socket and the bytes that came with the 101; rejects with the status of any other answer.
 */
export function openSpdyUpgrade(
  url: string,
  token: string,
  caPem: string | undefined,
): Promise<{ socket: Socket; head: Buffer; response: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const request = https.request(url, {
      method: 'GET',
      headers: {
        authorization: `Bearer ${token}`,
        connection: 'Upgrade',
        upgrade: 'SPDY/3.1',
        'x-stream-protocol-version': 'v4.channel.k8s.io',
      },
      ...(caPem ? { ca: caPem } : {}),
    });
    request.on('upgrade', (response, socket: Socket, head: Buffer) => resolve({ socket, head, response }));
    request.on('response', (response) => {
      response.resume();
      reject(new Error(`the SPDY upgrade was answered ${response.statusCode}`));
    });
    request.on('error', reject);
    request.end();
  });
}
