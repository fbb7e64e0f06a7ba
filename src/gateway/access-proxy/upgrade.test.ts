import http, { type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { closeRelayWorlds, identity, SECRET, world } from '../../../test-support/access-proxy-relay.ts';

/**
 * Upgraded connections through the relay (test-support/access-proxy-relay.ts): the target answers
 * 101 as kube-apiserver does for exec over WebSocket, then echoes each message with a prefix; the
 * bytes must cross unchanged both ways, the first ones included (sent with the heads).
 */

afterEach(closeRelayWorlds);

interface Upgraded {
  readonly response: IncomingMessage;
  readonly socket: Socket;
  readonly head: Buffer;
}

/** An upgrade request to the proxy: the 101 and its socket (an ordinary answer fails). */
function upgrade(port: number, path: string): Promise<Upgraded> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request({
      port,
      path,
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
        'sec-websocket-protocol': 'v5.channel.k8s.io, v4.channel.k8s.io',
      },
    });
    outgoing.on('upgrade', (response, socket, head) => resolve({ response, socket, head }));
    outgoing.on('response', (response) => reject(new Error(`no upgrade: ${response.statusCode}`)));
    outgoing.on('error', reject);
    outgoing.end();
  });
}

const received = (socket: Socket, bytes: number) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= bytes) {
        socket.off('data', onData);
        resolve(Buffer.concat(chunks));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });

describe('relay: upgrades', () => {
  test('the 101 head as the target sent it, then bytes both ways unchanged; the target saw the upgrade headers and the platform credential', async () => {
    let seen: IncomingMessage | undefined;
    const { proxyPort } = await world((_req, res) => res.end(), {
      upgrade: (request, socket) => {
        seen = request;
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n',
        );
        // Bytes sent with the head: they reach the client as the first ones.
        socket.write(Buffer.from([0x82, 0x01, 0x00]));
        socket.on('data', (chunk: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), chunk])));
      },
    });
    const answer = await upgrade(proxyPort, '/p/api/v1/namespaces/a/pods/x/exec?command=sh&stdin=true');
    const { response, socket, head } = answer;
    expect(response.statusCode).toBe(101);
    expect(response.headers['sec-websocket-protocol']).toBe('v5.channel.k8s.io');
    expect(response.headers['sec-websocket-accept']).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    const first = head.length >= 3 ? head : Buffer.concat([head, await received(socket, 3 - head.length)]);
    expect([...first]).toEqual([0x82, 0x01, 0x00]);
    const binary = Buffer.from([0, 1, 2, 255, 254, 13, 10, 13, 10]);
    socket.write(binary);
    expect(await received(socket, 5 + binary.length)).toEqual(Buffer.concat([Buffer.from('echo:'), binary]));
    const headers = seen?.headers ?? {};
    expect(headers.connection).toBe('Upgrade');
    expect(headers.upgrade).toBe('websocket');
    expect(headers['sec-websocket-protocol']).toBe('v5.channel.k8s.io, v4.channel.k8s.io');
    expect(headers['sec-websocket-key']).toBe('dGhlIHNhbXBsZSBub25jZQ==');
    expect(headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(headers['impersonate-user']).toBe(identity.username);
    socket.destroy();
  });

  test("a target ending its side ends the client's; the client closing closes the target's", async () => {
    const targetClosed: Promise<void>[] = [];
    const { proxyPort } = await world((_req, res) => res.end(), {
      upgrade: (_request, socket) => {
        targetClosed.push(new Promise((resolve) => socket.once('close', () => resolve())));
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\nConnection: Upgrade\r\n\r\n');
        socket.on('data', (chunk: Buffer) => {
          if (chunk.toString() === 'bye') socket.end('done');
        });
        // As an API server does: the client's end of the stream ends the session.
        socket.once('end', () => socket.end());
      },
    });
    const first = await upgrade(proxyPort, '/p/exec');
    const ended = new Promise<string>((resolve) => {
      let text = first.head.toString();
      first.socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      first.socket.once('end', () => resolve(text));
    });
    first.socket.write('bye');
    expect(await ended).toBe('done');
    first.socket.destroy();

    const second = await upgrade(proxyPort, '/p/exec');
    second.socket.destroy();
    await targetClosed[1];
  });

  test("a target's connection reset closes the client's (a broken session is never left hanging)", async () => {
    const { proxyPort } = await world((_req, res) => res.end(), {
      upgrade: (_request, socket) => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\nConnection: Upgrade\r\n\r\n');
        socket.once('data', () => (socket as Socket).resetAndDestroy());
      },
    });
    const { socket } = await upgrade(proxyPort, '/p/exec');
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.write('go');
    await closed;
  });

  test("a target's refusal of an upgrade (not 101) reaches the client as an ordinary answer", async () => {
    const { proxyPort } = await world((_req, res) => res.end(), {
      upgrade: (_request, socket) => {
        const body = '{"kind":"Status","code":403,"reason":"Forbidden"}';
        socket.end(
          `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        );
      },
    });
    // Raw bytes: node's client takes any answer to an upgrade request for one.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(proxyPort, '127.0.0.1', () =>
        socket.write(
          'GET /p/exec HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
        ),
      );
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.once('close', () => resolve(text));
      socket.once('error', reject);
    });
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(head.toLowerCase()).not.toContain('upgrade');
    expect(JSON.parse(body)).toMatchObject({ code: 403, reason: 'Forbidden' });
  });
});
