/**
 * The least a Node gateway can do per request, as the floor the gateway is measured against
 * (bench/gateway): Node's HTTP server, one request to kube-apiserver on an undici pool set up as
 * the gateway's (`src/gateway/proxy/upstream.ts`: HTTP/1.1, keep-alive, TLS with the cluster's
 * CA) carrying fixed credentials and impersonation headers, the answer read whole and written back
 * with its content type and length. No routing, authentication, authorization, audit or
 * metrics. Plain JavaScript, so that it runs as it is, like the compiled gateway.
 *
 *   BARE_UPSTREAM=https://127.0.0.1:6443 BARE_CA=<pem> BARE_HEADERS='{"authorization":...}' \
 *     node bench/gateway/bare-proxy.mjs     (prints the port it listens on, then serves)
 */
import http from 'node:http';
import { Pool } from 'undici';

const upstream = new Pool(process.env.BARE_UPSTREAM, {
  connections: 64,
  pipelining: 1,
  allowH2: false,
  keepAliveTimeout: 30_000,
  connect: { ca: process.env.BARE_CA },
});
const headers = JSON.parse(process.env.BARE_HEADERS ?? '{}');

const server = http.createServer(async (request, response) => {
  try {
    const answer = await upstream.request({
      method: 'GET',
      path: request.url ?? '/',
      headers: { ...headers, accept: 'application/json' },
    });
    const body = Buffer.from(await answer.body.arrayBuffer());
    response.writeHead(answer.statusCode, {
      'content-type': answer.headers['content-type'] ?? 'application/json',
      'content-length': body.length,
    });
    response.end(body);
  } catch {
    response.writeHead(502).end();
  }
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  upstream.destroy().finally(() => process.exit(0));
});
