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
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { GatewayRequest } from '../endpoints/endpoint.ts';
import { BASE_PATH } from '../paths.ts';
import type { ProxyDeps } from '../proxy/proxy.ts';
import { dispatch } from './dispatch.ts';
import { JSON_ONLY } from './exchange.ts';
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
    const { exchange, route, query, identity, negotiated } = routed(
      'POST',
      `${api}/configs?dryRun=All`,
      headers,
      text,
    );
    const received = await receiveBody(exchange, route);
    const input = { exchange, routed: route, query, identity, negotiated, ...received };
    expect(await dispatch(deps, input)).toEqual({
      code: 200,
      object: { name: 'configs' },
    });
    const request = seen[0] as GatewayRequest;
    expect(request.identity).toBe(identity);
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
    const { exchange, route, query, identity, negotiated } = routed(
      'POST',
      '/kubernetes/tokenreview/cluster/c',
      { 'content-length': '4' },
      'not{',
    );
    const received = await receiveBody(exchange, route);
    await dispatch(deps, { exchange, routed: route, query, identity, negotiated, ...received });
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
    const { route, ...request } = routedTestExchange(checking, 'POST', '/oidc/token');
    await dispatch(
      { ...deps, throttle },
      { ...request, routed: route, bytes: Buffer.alloc(0), body: undefined },
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
    const input = (identity: AuthenticatedIdentity | undefined) => ({
      exchange: testExchange(),
      routed: proxied,
      query: new URLSearchParams(),
      bytes: Buffer.alloc(0),
      body: undefined,
      identity,
      negotiated: JSON_ONLY,
    });
    expect(() => dispatch(deps, input(undefined))).toThrow(expect.objectContaining({ code: 500 }));
    const unspeakable = { ...testIdentity(), username: 'alice\nbob' };
    expect(() => dispatch(deps, input(unspeakable))).toThrow(expect.objectContaining({ code: 403 }));
  });
});
