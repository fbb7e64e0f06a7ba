import { createHash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, test } from 'vitest';
import {
  closeRelayWorlds,
  identity,
  listen,
  open,
  request,
  SECRET,
  TARGET,
  world,
} from '../../../test-support/access-proxy-relay.ts';
import { StatusError } from '../../api/status.ts';
import { openUpstream, relayAnswer } from './relay.ts';
import { agentPlan, createTargetAgent } from './target-agents.ts';

/**
 * The relay between a client and a target, both real HTTP over loopback (see
 * test-support/access-proxy-relay.ts): headers, bodies, streams, failures.
 */

afterEach(closeRelayWorlds);

describe('relay: headers', () => {
  test("the client's end-to-end headers cross, hop-by-hop ones and its authorization do not; the platform's credential and the caller's impersonation are added", async () => {
    let seen: IncomingMessage | undefined;
    const { proxyPort } = await world((req, res) => {
      seen = req;
      res.writeHead(200, {
        'content-type': 'text/plain',
        'x-answer': 'kept',
        'keep-alive': 'timeout=77',
        connection: 'x-target-hop',
        'x-target-hop': 'dropped',
      });
      res.end('ok');
    });
    const answer = await request(proxyPort, '/p/api/v1/pods?limit=1&continue=abc', {
      headers: {
        authorization: 'Bearer caller-key',
        accept: 'application/vnd.kubernetes.protobuf, application/json',
        'x-custom': 'kept',
        'proxy-authorization': 'Basic xyz',
        te: 'trailers',
        connection: 'keep-alive, x-client-hop',
        'x-client-hop': 'dropped',
      },
    });
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('ok');
    expect(answer.headers['x-answer']).toBe('kept');
    expect(answer.headers['x-target-hop']).toBeUndefined();
    expect(answer.headers['keep-alive']).not.toBe('timeout=77');
    const headers = seen?.headers ?? {};
    expect(seen?.url).toBe('/prefix/api/v1/pods?limit=1&continue=abc');
    expect(headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(headers['impersonate-user']).toBe('alice');
    expect(seen?.rawHeaders.filter((_, i, raw) => raw[i - 1]?.toLowerCase() === 'impersonate-group')).toEqual(
      identity.groups,
    );
    expect(headers.accept).toBe('application/vnd.kubernetes.protobuf, application/json');
    expect(headers['x-custom']).toBe('kept');
    for (const hop of ['proxy-authorization', 'te', 'x-client-hop']) expect(headers[hop]).toBeUndefined();
  });
});

describe('relay: credentials', () => {
  test("with a platform credential that is no header (a client certificate), neither the caller's key nor a front-proxy identity reaches the target", async () => {
    let seen: http.IncomingHttpHeaders | undefined;
    const { proxyPort } = await world(
      (req, res) => {
        seen = req.headers;
        res.end('ok');
      },
      { credentials: {} },
    );
    const answer = await request(proxyPort, '/p/version', {
      headers: {
        authorization: 'Bearer caller-key',
        'impersonate-user': 'admin',
        'X-Remote-User': 'admin',
        'X-Remote-Group': 'system:masters',
        'X-Remote-Extra-Scopes': 'all',
      },
    });
    expect(answer.status).toBe(200);
    expect(seen?.authorization).toBeUndefined();
    // The front-proxy identity a certificate credential could vouch for: never the caller's.
    for (const name of ['x-remote-user', 'x-remote-group', 'x-remote-extra-scopes'])
      expect(seen?.[name]).toBeUndefined();
    expect(seen?.['impersonate-user']).toBe(identity.username);
  });
});

describe('relay: bodies', () => {
  test('a binary request body and a binary answer cross byte for byte, undecoded', async () => {
    const sent = randomBytes(3 * 1024 * 1024 + 17);
    const answered = randomBytes(2 * 1024 * 1024 + 5);
    let received: Buffer | undefined;
    let contentType: string | undefined;
    const { proxyPort } = await world((req, res) => {
      const chunks: Buffer[] = [];
      contentType = req.headers['content-type'];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received = Buffer.concat(chunks);
        res.writeHead(201, { 'content-type': 'application/vnd.kubernetes.protobuf' });
        res.end(answered);
      });
    });
    const answer = await request(proxyPort, '/p/api/v1/namespaces/a/configmaps', {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.kubernetes.protobuf' },
      body: sent,
    });
    expect(answer.status).toBe(201);
    expect(answer.headers['content-type']).toBe('application/vnd.kubernetes.protobuf');
    expect(digest(answer.body)).toBe(digest(answered));
    expect(digest(received ?? Buffer.alloc(0))).toBe(digest(sent));
    expect(contentType).toBe('application/vnd.kubernetes.protobuf');
  });
});

const digest = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const nextChunk = (stream: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    stream.once('data', (chunk: Buffer) => resolve(chunk.toString()));
    stream.once('error', reject);
  });

/** Resolves with how a response stream ended: cleanly (`end`), or cut (`aborted`: an error or close first). */
const ending = (stream: IncomingMessage) =>
  new Promise<'end' | 'aborted'>((resolve) => {
    stream.once('end', () => resolve('end'));
    stream.once('error', () => resolve('aborted'));
    stream.once('close', () => resolve(stream.complete ? 'end' : 'aborted'));
    stream.resume();
  });

describe('relay: streams', () => {
  test('a chunked answer (a watch) reaches the client event by event, each before the next is sent', async () => {
    const next: (() => void)[] = [];
    const { proxyPort } = await world((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      let event = 0;
      const send = () => {
        event += 1;
        if (event > 3) {
          res.end();
          return;
        }
        res.write(`{"type":"ADDED","n":${event}}\n`);
        next.push(send);
      };
      send();
    });
    const { response } = await open(proxyPort, '/p/api/v1/pods?watch=true');
    // The target sends the next event only once the client has the previous one: an answer held
    // back by the proxy until it ends (or until some size) never gets here.
    for (const n of [1, 2, 3]) {
      expect(await nextChunk(response)).toBe(`{"type":"ADDED","n":${n}}\n`);
      next.shift()?.();
    }
    expect(await ending(response)).toBe('end');
  });

  test("a watch's headers reach its client at once, before any event (the watch started)", async () => {
    let firstEvent: () => void = () => undefined;
    const { proxyPort } = await world((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      firstEvent = () => res.end('{"type":"ADDED"}\n');
    });
    const { response } = await open(proxyPort, '/p/api/v1/pods?watch=true');
    expect(response.statusCode).toBe(200);
    firstEvent();
    expect(await nextChunk(response)).toBe('{"type":"ADDED"}\n');
  });

  test("any other answer leaves in one write, its headers with its body's first bytes", async () => {
    const body = JSON.stringify({ kind: 'ConfigMap', data: { value: 'x'.repeat(900) } });
    const target = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    const targetPort = await listen(target);
    const writes: string[] = [];
    const proxy = http.createServer((request, response) => {
      http.get({ port: targetPort, path: request.url, agent: false }, (answer) => {
        void relayAnswer(answer, response, false);
      });
    });
    proxy.on('connection', (socket: net.Socket) => {
      // What the client's socket hands to the kernel, one entry per write.
      const handle = socket as unknown as {
        _write(chunk: Buffer, encoding: string, callback: () => void): void;
        _writev(chunks: { chunk: Buffer | string }[], callback: () => void): void;
      };
      const write = handle._write.bind(handle);
      const writev = handle._writev.bind(handle);
      handle._write = (chunk, encoding, callback) => {
        writes.push(chunk.toString());
        write(chunk, encoding, callback);
      };
      handle._writev = (chunks, callback) => {
        writes.push(chunks.map(({ chunk }) => chunk.toString()).join(''));
        writev(chunks, callback);
      };
    });
    const answer = await request(await listen(proxy), '/api/v1/namespaces/a/configmaps/b');
    expect(answer.body.toString()).toBe(body);
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"kind":"ConfigMap"/);
  });

  test('a client that reads nothing slows the target: what it could send stays bounded (half of 64 MiB), and all of it arrives once read', async () => {
    const chunk = Buffer.alloc(64 * 1024, 7);
    const total = 64 * 1024 * 1024;
    let written = 0;
    const { proxyPort } = await world((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const pump = () => {
        while (written < total) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const { response } = await open(proxyPort, '/p/logs?follow=true');
    response.pause();
    // Until the target is stalled: no progress over several looks.
    let last = -1;
    let still = 0;
    while (still < 5) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      still = written === last ? still + 1 : 0;
      last = written;
    }
    // Socket buffers and stream high-water marks, a few MiB (8 on this machine): not all offered.
    expect(written).toBeLessThan(total / 2);
    let read = 0;
    response.on('data', (data: Buffer) => {
      read += data.length;
    });
    expect(await ending(response)).toBe('end');
    expect(read).toBe(total);
  });

  test('a target gone mid-stream ends a chunked answer cleanly (a watch client resumes or relists)', async () => {
    const { proxyPort } = await world((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED"}\n', () => setTimeout(() => req.socket.destroy(), 20));
    });
    const { response } = await open(proxyPort, '/p/api/v1/pods?watch=true');
    expect(await nextChunk(response)).toBe('{"type":"ADDED"}\n');
    expect(await ending(response)).toBe('end');
  });

  test('a target gone mid-answer of announced length cuts the answer: never passed off as complete', async () => {
    const { proxyPort } = await world((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"kind":"List"', () => setTimeout(() => req.socket.destroy(), 20));
    });
    const { response } = await open(proxyPort, '/p/api/v1/pods');
    expect(await ending(response)).toBe('aborted');
  });

  test("a client gone mid-stream cuts the target's request", async () => {
    let targetClosed: Promise<boolean> | undefined;
    const { proxyPort } = await world((_req, res) => {
      targetClosed = new Promise((resolve) => res.once('close', () => resolve(res.writableFinished)));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED"}\n');
    });
    const { response, outgoing } = await open(proxyPort, '/p/api/v1/pods?watch=true');
    expect(await nextChunk(response)).toBe('{"type":"ADDED"}\n');
    outgoing.destroy();
    expect(await targetClosed).toBe(false);
  });
});

describe('relay: failures before the answer', () => {
  test('an unreachable target: 503 naming it and the reason', async () => {
    const closed = http.createServer();
    const port = await listen(closed);
    await new Promise((resolve) => closed.close(resolve));
    const { proxyPort } = await world(() => undefined, { port });
    const answer = await request(proxyPort, '/p/version');
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body.toString()).message).toBe(
      'cluster "edge" could not be reached (ECONNREFUSED)',
    );
  });

  test('a target silent past the headers timeout: 504 naming it', async () => {
    const { proxyPort } = await world(() => undefined, { headersTimeoutMs: 50 });
    const answer = await request(proxyPort, '/p/version');
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.body.toString()).message).toBe('cluster "edge" did not answer in time');
  });

  test('a request body still on its way is no silence of the target: the headers timeout starts when it was sent', async () => {
    let firstChunk: () => void = () => undefined;
    const received = new Promise<void>((resolve) => {
      firstChunk = resolve;
    });
    const { proxyPort } = await world(
      (req, res) => {
        let size = 0;
        req.on('data', (chunk: Buffer) => {
          size += chunk.length;
          firstChunk();
        });
        req.on('end', () => res.end(String(size)));
      },
      { headersTimeoutMs: 50 },
    );
    const answer = new Promise<string>((resolve, reject) => {
      const outgoing = http.request({ port: proxyPort, path: '/p/upload', method: 'POST', agent: false });
      outgoing.on('response', (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        response.on('end', () => resolve(`${response.statusCode} ${text}`));
      });
      outgoing.on('error', reject);
      outgoing.write('first part;');
      // The rest comes well after the timeout, once the target has the first part.
      void received
        .then(() => new Promise((resolve) => setTimeout(resolve, 300)))
        .then(() => outgoing.end('second part'));
    });
    expect(await answer).toBe('200 22');
  });

  test("a target refusing the platform's credential: 503 naming it, the connection read again, the credential nowhere in the answer", async () => {
    const { proxyPort, invalidated } = await world((req, res) => {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end(
        JSON.stringify({ kind: 'Status', code: 401, message: `token ${req.headers.authorization} rejected` }),
      );
    });
    const answer = await request(proxyPort, '/p/api/v1/pods');
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body.toString()).message).toBe(
      `cluster "edge" refused the platform's credentials`,
    );
    expect(invalidated).toEqual([TARGET]);
    expect(JSON.stringify(answer)).not.toContain(SECRET);
  });
});

describe('relay: a target that does not connect', () => {
  test('a socket not connected within the connect timeout (TCP accepted, TLS never answered): 503 naming the cluster as unreachable', async () => {
    const accepted: net.Socket[] = [];
    const silent = net.createServer((socket) => accepted.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const server = new URL(`https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`);
    const agent = createTargetAgent(agentPlan({ server: server.href }), 100);
    try {
      const failure = await openUpstream(
        { description: 'cluster "edge"', server, agent, credentials: () => ({}) },
        {
          request: Object.assign(Readable.from([]), { method: 'GET', rawHeaders: [] }) as never,
          upstreamPath: '/version',
          search: '',
          impersonation: {},
          signal: new AbortController().signal,
          longLived: false,
        },
      ).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(StatusError);
      expect((failure as StatusError).toStatus()).toMatchObject({
        code: 503,
        message: 'cluster "edge" could not be reached (connection timed out)',
      });
    } finally {
      agent.destroy();
      for (const socket of accepted) socket.destroy();
      silent.close();
    }
  });
});
