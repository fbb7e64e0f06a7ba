import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callProvider, ProviderApiError, providerFetch } from './provider-http.ts';

/**
 * docs/login.md: every connector's provider calls have a time limit and a size cap, and failures show a short
 * reason, never a token (nor the provider's body, which may echo one). Against a local HTTP
 * server answering as a misbehaving provider would.
 */

const TOKEN = 'gho_the-person-s-token-0123456789';
const FIVE_MIB = 5 * 1024 * 1024;
let server: Server;
let base = '';

beforeAll(async () => {
  server = createServer((request, response) => {
    switch (request.url) {
      case '/huge-declared':
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(FIVE_MIB) });
        response.end();
        return;
      case '/huge-streamed': {
        // No length declared: the answer is cut off once past the cap, however long it goes on.
        response.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        let sent = 0;
        const more = () => {
          while (sent < FIVE_MIB) {
            sent += chunk.byteLength;
            if (!response.write(chunk)) return void response.once('drain', more);
          }
          response.end();
        };
        response.on('error', () => {});
        more();
        return;
      }
      case '/silent':
        // Never answers: the call's time limit ends it.
        return;
      case '/echo':
        response.writeHead(401, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ message: `bad credentials: ${request.headers.authorization}` }));
        return;
      default:
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"login":"alice"}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const call = (path: string) =>
  callProvider(providerFetch({}), `${base}${path}`, { authorization: `Bearer ${TOKEN}`, what: 'the user' });

describe('provider calls', () => {
  it('read an answer within the cap', async () => {
    expect((await call('/small')).body).toEqual({ login: 'alice' });
  });

  it.each(['/huge-declared', '/huge-streamed'])('refuse an answer over 4 MiB (%s)', async (path) => {
    const refusal = await call(path).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(ProviderApiError);
    expect((refusal as Error).message).toBe('the answer is too large: the provider answered 502');
  });

  it('give up on a provider that never answers (the time limit)', async () => {
    // The limit is 15 s in production; a shorter one keeps the unit suite fast, the path is the same.
    const refusal = await callProvider(providerFetch({}, 300), `${base}/silent`, {
      authorization: `Bearer ${TOKEN}`,
      what: 'the user',
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(ProviderApiError);
    expect((refusal as ProviderApiError).status).toBe(0);
    expect((refusal as Error).message).toBe('the user: the provider could not be reached');
  });

  it('fail with the status only: never the token, never the body that echoes it', async () => {
    const refusal = await call('/echo').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(ProviderApiError);
    expect((refusal as Error).message).toBe('the user: the provider answered 401');
    expect(JSON.stringify(refusal)).not.toContain(TOKEN);
  });
});
