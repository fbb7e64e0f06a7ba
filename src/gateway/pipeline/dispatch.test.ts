import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import type { GatewayEndpoint, GatewayRequest } from '../endpoints/endpoint.ts';
import type { ProxyDeps } from '../proxy/proxy.ts';
import { decodesBody, dispatch, hasBody, receiveBody } from './dispatch.ts';
import { BASE_PATH, EndpointTable, type Routed } from './route.ts';
import { testExchange, testIdentity } from './test-exchange.ts';
import { AuthFailureLimiter, Throttle } from './throttle.ts';

const api = `${BASE_PATH}/apis/management.platform/v1`;
const seen: GatewayRequest[] = [];
const endpoint = (name: string, route: GatewayEndpoint['route']): GatewayEndpoint => ({
  name,
  route,
  authentication: 'key',
  handle: (request) => {
    seen.push(request);
    return { code: 200, object: { name } };
  },
});
const table = new EndpointTable([
  endpoint('configs', { kind: 'resource', resource: 'configs', verbs: ['get', 'create'] }),
  endpoint('review', { kind: 'path', path: '/kubernetes/tokenreview', prefix: true, methods: ['POST'] }),
]);

type Served = Exclude<Routed, { kind: 'unknown' }>;

/** The exchange of a request and where the table routes it. */
function routed(method: string, url: string, headers: Record<string, string> = {}, body?: string | string[]) {
  const exchange = testExchange({
    method,
    url,
    headers,
    ...(body !== undefined ? { body } : {}),
    identity: testIdentity(),
  });
  const query = new URLSearchParams(exchange.search);
  const route = table.route(method, exchange.path, query, () => undefined);
  if (route instanceof StatusError || route.kind === 'unknown') throw new Error(`${url} is not served`);
  exchange.routed = route;
  exchange.attributes = route.attributes;
  return { exchange, route: route as Served, query };
}

const json = (value: unknown) => {
  const text = JSON.stringify(value);
  return { headers: { 'content-type': 'application/json', 'content-length': String(text.length) }, text };
};

describe('which bodies are read and decoded', () => {
  test('a body is announced by a length above 0 or by chunks', () => {
    expect(hasBody({})).toBe(false);
    expect(hasBody({ 'content-length': '0' })).toBe(false);
    expect(hasBody({ 'content-length': '2' })).toBe(true);
    expect(hasBody({ 'transfer-encoding': 'chunked' })).toBe(true);
  });

  test.each([
    ['create', 0, true],
    ['update', 0, true],
    ['patch', 0, true],
    ['delete', 0, false],
    ['delete', 2, true],
    ['deletecollection', 2, true],
    ['get', 2, false],
    ['list', 2, false],
    ['watch', 2, false],
  ])('%s with %i bytes: decoded %s', (verb, size, decoded) => {
    expect(decodesBody(verb, Buffer.alloc(size))).toBe(decoded);
  });
});

describe('receiveBody', () => {
  test('a resource write: decoded, and what the audit log records', async () => {
    const { headers, text } = json({ metadata: { name: 'c' } });
    const { exchange, route } = routed('POST', `${api}/configs`, headers, text);
    const { bytes, body } = await receiveBody(exchange, route);
    expect(bytes.toString()).toBe(text);
    expect(body).toEqual({ metadata: { name: 'c' } });
    expect(exchange.requestObject).toEqual({ metadata: { name: 'c' } });
  });

  test('a patch: the patch decoded by its type, its value audited', async () => {
    const { exchange, route } = routed(
      'PATCH',
      `${api}/namespaces/ns/sharedsecrets/s`,
      { 'content-type': 'application/merge-patch+json', 'transfer-encoding': 'chunked' },
      ['{"spec":', '{"description":"d"}}'],
    );
    const { body } = await receiveBody(exchange, route);
    expect(body).toEqual({ type: 'merge', value: { spec: { description: 'd' } } });
    expect(exchange.requestObject).toEqual({ spec: { description: 'd' } });
  });

  test('a delete: its options decoded only when sent (JSON when no type is given)', async () => {
    const bare = routed('DELETE', `${api}/namespaces/ns/sharedsecrets/s`);
    expect(await receiveBody(bare.exchange, bare.route)).toEqual({ bytes: Buffer.alloc(0), body: undefined });
    const text = '{"propagationPolicy":"Foreground"}';
    const options = routed(
      'DELETE',
      `${api}/namespaces/ns/sharedsecrets/s`,
      { 'content-length': String(text.length) },
      text,
    );
    expect((await receiveBody(options.exchange, options.route)).body).toEqual({
      propagationPolicy: 'Foreground',
    });
  });

  test('reads and paths outside the management API: read, never decoded', async () => {
    const get = routed('GET', `${api}/namespaces/ns/sharedsecrets`, { 'content-length': '3' }, 'odd');
    expect(await receiveBody(get.exchange, get.route)).toEqual({
      bytes: Buffer.from('odd'),
      body: undefined,
    });
    expect(get.exchange.requestObject).toBeUndefined();
    const review = routed('POST', '/kubernetes/tokenreview/cluster/c', { 'content-length': '4' }, 'not{');
    expect(review.route.resource).toBeUndefined();
    expect((await receiveBody(review.exchange, review.route)).body).toBeUndefined();
  });

  test.each([
    ['not JSON', { 'content-type': 'application/json', 'content-length': '4' }, 'not{', 400],
    ['an unknown type', { 'content-type': 'text/plain', 'content-length': '2' }, '{}', 415],
    ['a list', { 'content-type': 'application/json', 'content-length': '2' }, '[]', 400],
  ])('a write with %s is refused (%s)', async (_what, headers, text, code) => {
    const { exchange, route } = routed('POST', `${api}/configs`, headers, text);
    await expect(receiveBody(exchange, route)).rejects.toMatchObject({ code });
    expect(exchange.requestObject).toBeUndefined();
  });

  test('past the limit: 413, whatever the body', async () => {
    const { exchange, route } = routed('POST', `${api}/configs`, { 'transfer-encoding': 'chunked' }, [
      '0123456789',
      '0123456789',
    ]);
    await expect(receiveBody(exchange, route, 15)).rejects.toMatchObject({ code: 413 });
  });
});

describe('dispatch', () => {
  const deps = { proxy: {} as ProxyDeps, throttle: new Throttle(new AuthFailureLimiter()) };

  test("to the routed endpoint, with the request as the endpoint sees it; the body's object decoded once", async () => {
    seen.length = 0;
    const { headers, text } = json({ metadata: { name: 'c' } });
    const { exchange, route, query } = routed('POST', `${api}/configs?dryRun=All`, headers, text);
    const received = await receiveBody(exchange, route);
    expect(await dispatch(deps, { exchange, routed: route, query, ...received })).toEqual({
      code: 200,
      object: { name: 'configs' },
    });
    const request = seen[0] as GatewayRequest;
    expect(request.identity).toBe(exchange.identity);
    expect(request.attributes.verb).toBe('create');
    expect(request.query.get('dryRun')).toBe('All');
    expect(request.source).toBe('192.0.2.1');
    expect(request.object()).toBe(received.body);
    expect(request.decoded).toBe(received.body);
    // What goes upstream is the negotiated JSON flavour, never the client's header as it came.
    expect(request.upstreamAccept).toBe('application/json');
  });

  test("a path endpoint's body is parsed when it asks, 400 when it is not an object", async () => {
    seen.length = 0;
    const { exchange, route, query } = routed(
      'POST',
      '/kubernetes/tokenreview/cluster/c',
      { 'content-length': '4' },
      'not{',
    );
    await dispatch(deps, { exchange, routed: route, query, ...(await receiveBody(exchange, route)) });
    const request = seen[0] as GatewayRequest;
    expect(Buffer.from(request.body).toString()).toBe('not{');
    expect(() => request.object()).toThrow(expect.objectContaining({ code: 400 }));
  });

  test("an endpoint's own failed credential checks count against the source and the user", async () => {
    seen.length = 0;
    const throttle = new Throttle(
      new AuthFailureLimiter({
        perSource: { failures: 100, windowSeconds: 60, blockSeconds: 30 },
        perKey: { failures: 1, windowSeconds: 60, blockSeconds: 90 },
      }),
    );
    const { exchange, route, query } = routed('POST', '/kubernetes/tokenreview/x');
    await dispatch(
      { ...deps, throttle },
      { exchange, routed: route, query, bytes: Buffer.alloc(0), body: undefined },
    );
    const request = seen[0] as GatewayRequest;
    expect(await request.blockedFor('bob')).toBeUndefined();
    expect(await request.failedAttempt('bob')).toBeUndefined();
    expect(await request.failedAttempt('bob')).toBe(90);
    expect(await request.blockedFor('bob')).toBe(90);
    expect(await request.blockedFor('carol')).toBeUndefined();
  });

  test('to the proxy only as someone the apiserver can be told about', () => {
    const proxied = table.route(
      'GET',
      `${api}/namespaces/ns/sharedsecrets`,
      new URLSearchParams(),
      () => undefined,
    );
    if (proxied instanceof StatusError || proxied.kind !== 'proxy') throw new Error('not proxied');
    const input = (exchange: ReturnType<typeof testExchange>) => ({
      exchange,
      routed: proxied,
      query: new URLSearchParams(),
      bytes: Buffer.alloc(0),
      body: undefined,
    });
    expect(() => dispatch(deps, input(testExchange()))).toThrow(expect.objectContaining({ code: 500 }));
    const unspeakable = testExchange({ identity: { ...testIdentity(), username: 'alice\nbob' } });
    expect(() => dispatch(deps, input(unspeakable))).toThrow(expect.objectContaining({ code: 403 }));
  });
});
