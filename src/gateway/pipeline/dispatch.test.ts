import { describe, expect, test } from 'vitest';
import {
  jsonBody,
  NO_PROJECTS,
  routedTestExchange,
  testEndpointTable,
  testExchange,
  testIdentity,
} from '../../../test-support/gateway-exchange.ts';
import { AuthFailureLimiter } from '../../http/failure-limiter.ts';
import type { GatewayRequest } from '../endpoints/endpoint.ts';
import { BASE_PATH } from '../paths.ts';
import type { ProxyDeps } from '../proxy/proxy.ts';
import { dispatch } from './dispatch.ts';
import { receiveBody } from './receive.ts';
import { EndpointTable } from './route.ts';
import { Throttle } from './throttle.ts';

const api = `${BASE_PATH}/apis/management.platform/v1`;
const seen: GatewayRequest[] = [];
const table = testEndpointTable(seen);

const routed = (
  ...args: Parameters<typeof routedTestExchange> extends [unknown, ...infer Rest] ? Rest : never
) => routedTestExchange(table, ...args);

describe('dispatch', () => {
  const deps = { proxy: {} as ProxyDeps, throttle: new Throttle(new AuthFailureLimiter()) };

  test("to the routed endpoint, with the request as the endpoint sees it; the body's object decoded once", async () => {
    seen.length = 0;
    const { headers, text } = jsonBody({ metadata: { name: 'c' } });
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

  test("an endpoint's own failed credential checks count against the source and the user, for endpoints that declare them", async () => {
    const checked: GatewayRequest[] = [];
    const checking = new EndpointTable([
      {
        name: 'checks',
        route: { kind: 'path', path: '/oidc', prefix: true, methods: ['POST'] },
        authentication: 'none',
        checksCredentials: true,
        handle: (request) => {
          checked.push(request);
          return { code: 200, object: {} };
        },
      },
    ]);
    const throttle = new Throttle(
      new AuthFailureLimiter({
        perSource: { failures: 100, windowSeconds: 60, blockSeconds: 30 },
        perKey: { failures: 1, windowSeconds: 60, blockSeconds: 90 },
      }),
    );
    const { exchange, route, query } = routedTestExchange(checking, 'POST', '/oidc/token');
    await dispatch(
      { ...deps, throttle },
      { exchange, routed: route, query, bytes: Buffer.alloc(0), body: undefined },
    );
    const failures = checked[0]?.credentialFailures;
    if (!failures) throw new Error('no credential failures for an endpoint that checks credentials');
    expect(await failures.blockedFor('bob')).toBeUndefined();
    expect(await failures.failed('bob')).toBeUndefined();
    expect(await failures.failed('bob')).toBe(90);
    expect(await failures.blockedFor('bob')).toBe(90);
    expect(await failures.blockedFor('carol')).toBeUndefined();
    // Every other endpoint's request carries none.
    seen.length = 0;
    const other = routed('POST', '/kubernetes/tokenreview/x');
    await dispatch(deps, { ...other, routed: other.route, bytes: Buffer.alloc(0), body: undefined });
    expect(seen[0]?.credentialFailures).toBeUndefined();
  });

  test('to the proxy only as someone the apiserver can be told about', () => {
    const proxied = table.route('GET', `${api}/namespaces/ns/sharedsecrets`, '', NO_PROJECTS);
    if (proxied.kind !== 'proxy') throw new Error('not proxied');
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
