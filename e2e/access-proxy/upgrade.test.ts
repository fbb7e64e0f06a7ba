import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { WebSocket } from 'ws';
import { PROXY_PATHS, type ProxyPath, useAccessProxyEnv } from '../support/access-proxy.ts';
import {
  backendProxyPath,
  CHANNEL_PROTOCOL,
  exposeBackend,
  GREETING,
  openChannelWebSocket,
  openSpdyUpgrade,
  sha256,
  startUpgradeBackend,
  type UpgradeBackend,
} from '../support/upgrade-backend.ts';
import { eventually } from '../support/wait.ts';

/**
 * Upgraded connections through the access proxy, end to end: kube-apiserver's pod proxy
 * forwards them to an echo backend this test runs (see e2e/support/upgrade-backend.ts), as it
 * forwards `exec`, `attach` and `port-forward` to a kubelet. Each path's target is a real
 * apiserver; the same connection made directly to it is the baseline.
 */
describe('access proxy: upgraded connections (WebSocket v5.channel.k8s.io, SPDY/3.1)', () => {
  const env = useAccessProxyEnv();
  let backend: UpgradeBackend;
  let token: string;
  beforeAll(async () => {
    backend = await startUpgradeBackend();
    token = await env().keyFor('ursula');
    for (const path of PROXY_PATHS) {
      await exposeBackend(env().admin(path), env().target(path).namespace, backend);
      await env().grant(path, 'ursula');
    }
  });
  afterAll(async () => {
    await backend?.close();
  });

  const proxied = (path: ProxyPath, rest: string) =>
    `${env().target(path).prefix}${backendProxyPath(env().target(path).namespace, rest)}`;

  test('baseline: each target forwards both upgrades to the backend directly', async () => {
    for (const path of PROXY_PATHS) {
      const { cluster, namespace } = env().target(path);
      const url = `${cluster.server}${backendProxyPath(namespace, 'exec')}`;
      const ws = await openChannelWebSocket(url, cluster.adminToken, cluster.caPem);
      await eventually(() => ws.received.length > 0, 30_000, `${path}: the greeting over WebSocket`);
      expect(ws.received[0]!.toString()).toBe(GREETING);
      ws.socket.close();
      const spdy = await openSpdyUpgrade(url, cluster.adminToken, cluster.caPem);
      expect(spdy.response.headers.upgrade?.toLowerCase()).toBe('spdy/3.1');
      spdy.socket.destroy();
    }
  });

  describe.each(PROXY_PATHS)('through the %s path', (path) => {
    test('WebSocket: the subprotocol is agreed, messages cross both ways in order, a large one intact', async () => {
      const { socket, received } = await openChannelWebSocket(
        proxied(path, 'exec'),
        token,
        env().gateway.caPem,
      );
      expect(socket.protocol).toBe(CHANNEL_PROTOCOL);
      await eventually(() => received.length > 0, 30_000, 'the greeting');
      expect(received[0]!.toString()).toBe(GREETING);

      // Many binary messages in flight at once, then one of 8 MiB: every byte back, in order.
      const small = Array.from({ length: 64 }, (_, i) =>
        Buffer.concat([Buffer.from([1, i]), randomBytes(4096)]),
      );
      const large = randomBytes(8 * 1024 * 1024);
      for (const message of [...small, large]) socket.send(message, { binary: true });
      await eventually(() => received.length === 1 + small.length + 1, 60_000, 'every echo');
      expect(received.slice(1, -1).map(sha256)).toEqual(small.map(sha256));
      expect(received.at(-1)!.length).toBe(large.length);
      expect(sha256(received.at(-1)!)).toBe(sha256(large));
      await closeWebSocket(socket);
      await eventually(() => backend.openConnections() === 0, 30_000, 'the backend side closed');
    });

    test('SPDY/3.1: 101 with the upgrade, then 16 MiB echoed byte for byte through a paused reader', async () => {
      const { socket, head, response } = await openSpdyUpgrade(
        proxied(path, 'exec'),
        token,
        env().gateway.caPem,
      );
      expect(response.statusCode).toBe(101);
      expect(response.headers.upgrade?.toLowerCase()).toBe('spdy/3.1');
      const payload = randomBytes(16 * 1024 * 1024);
      const chunks: Buffer[] = head.length > 0 ? [head] : [];
      let receivedBytes = head.length;
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        receivedBytes += chunk.length;
      });
      // The reader stops after the first echoes and resumes once the writer has to wait for a
      // drain (or is waiting already): the bytes in flight are held back along the way, not lost
      // or reordered.
      const expected = GREETING.length + payload.length;
      let paused = false;
      socket.on('data', () => {
        if (!paused && receivedBytes > GREETING.length + 1024 * 1024) {
          paused = true;
          socket.pause();
        }
      });
      await writeAll(socket, payload, () => {
        if (paused) socket.resume();
      });
      socket.resume();
      await eventually(() => receivedBytes >= expected, 120_000, 'every echoed byte');
      const echoed = Buffer.concat(chunks);
      expect(echoed.length).toBe(expected);
      expect(echoed.subarray(0, GREETING.length).toString()).toBe(GREETING);
      expect(sha256(echoed.subarray(GREETING.length))).toBe(sha256(payload));
      socket.end();
      await eventually(() => backend.openConnections() === 0, 30_000, 'the backend side closed');
    });
  });
});

/**
 * Writes `data` in 64 KiB chunks, waiting for each drain; `onWait` runs whenever the writer waits,
 * and again every 50 ms while it still waits: the reader may pause after the writer began waiting,
 * and a drain that needs the reader resumed would otherwise never come (the echo path is full).
 */
async function writeAll(socket: Socket, data: Buffer, onWait: () => void): Promise<void> {
  for (let offset = 0; offset < data.length; offset += 64 * 1024) {
    if (socket.write(data.subarray(offset, offset + 64 * 1024))) continue;
    let drained = false;
    const drain = new Promise<void>((resolve) => socket.once('drain', resolve)).then(() => {
      drained = true;
    });
    while (!drained) {
      onWait();
      await Promise.race([drain, new Promise((resolve) => setTimeout(resolve, 50))]);
    }
  }
}

function closeWebSocket(socket: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    socket.once('close', () => resolve());
    socket.close();
  });
}
