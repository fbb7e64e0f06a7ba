import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable, Writable } from 'node:stream';
import { nonResourceRequest, type RequestAttributes } from '../src/authz/attributes.ts';
import type { GatewayEndpoint, GatewayRequest } from '../src/gateway/endpoints/endpoint.ts';
import { type Exchange, JSON_ONLY } from '../src/gateway/pipeline/exchange.ts';
import { EndpointTable } from '../src/gateway/pipeline/route.ts';
import type { AuthenticatedIdentity } from '../src/identity/authenticate.ts';

/**
 * For the unit tests of the pipeline stages: an {@link Exchange} made of an in-memory request (a
 * stream of the body with its headers) and a response that records what was written, so a stage
 * can be run alone without an HTTP server; what earlier stages return is handed to it as the
 * pipeline would.
 */

/** A response that keeps its status, headers and body. */
export class RecordedResponse extends Writable {
  statusCode = 0;
  headers: OutgoingHttpHeaders = {};
  headersSent = false;
  private readonly chunks: Buffer[] = [];

  writeHead(code: number, headers: OutgoingHttpHeaders = {}): this {
    this.statusCode = code;
    for (const [name, value] of Object.entries(headers)) this.headers[name.toLowerCase()] = value;
    this.headersSent = true;
    return this;
  }

  flushHeaders(): void {}

  override _write(chunk: Buffer | string, _encoding: BufferEncoding, callback: () => void): void {
    this.chunks.push(Buffer.from(chunk));
    callback();
  }

  get text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  /** The body as JSON; undefined when it is none. */
  get json(): unknown {
    try {
      return JSON.parse(this.text) as unknown;
    } catch {
      return undefined;
    }
  }
}

export interface TestExchangeOptions {
  readonly method?: string;
  /** Path and query. */
  readonly url?: string;
  readonly headers?: IncomingHttpHeaders;
  /** Sent in chunks of this list (one chunk for a string or a buffer). */
  readonly body?: string | Buffer | readonly (string | Buffer)[];
  readonly source?: string;
}

export type TestExchange = Exchange & { readonly response: RecordedResponse & ServerResponse };

export function testExchange(options: TestExchangeOptions = {}): TestExchange {
  const url = options.url ?? '/';
  const method = options.method ?? 'GET';
  const chunks =
    options.body === undefined ? [] : Array.isArray(options.body) ? options.body : [options.body];
  const request = Object.assign(Readable.from(chunks.map((chunk) => Buffer.from(chunk as string | Buffer))), {
    method,
    url,
    headers: options.headers ?? {},
  }) as unknown as IncomingMessage;
  const queryStart = url.indexOf('?');
  return {
    request,
    response: new RecordedResponse() as RecordedResponse & ServerResponse,
    method,
    path: queryStart < 0 ? url : url.slice(0, queryStart),
    search: queryStart < 0 ? '' : url.slice(queryStart),
    source: options.source ?? '192.0.2.1',
    secure: true,
    started: performance.now(),
    receivedAt: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
    signal: new AbortController().signal,
    upgrade: undefined,
  };
}

/** An identity of user `name` with a key of its own, unscoped unless `scope` is given. */
export function testIdentity(
  name = 'alice',
  scope?: AuthenticatedIdentity['accessKey']['scope'],
): AuthenticatedIdentity {
  return {
    kind: 'User',
    name,
    username: name,
    groups: ['platform:authenticated', `platform:user:${name}`],
    uid: `uid-${name}`,
    accessKey: {
      name: `key-${name}`,
      id: 'aaaaaaaaaaaaaaaa',
      type: 'User',
      scope,
      expiresAt: null,
      ttlAfterLastActivity: false,
    },
  };
}

/**
 * A table of two endpoints that answer with their name and keep every request they are handed
 * in `seen`: `configs` (the management API resource: get, create) and `review` (the path prefix
 * `/kubernetes/tokenreview`: POST). Stored kinds route to the proxy.
 */
export function testEndpointTable(seen: GatewayRequest[] = []): EndpointTable {
  const endpoint = (name: string, route: GatewayEndpoint['route']): GatewayEndpoint => ({
    name,
    route,
    authentication: 'key',
    handle: (request) => {
      seen.push(request);
      return { code: 200, object: { name } };
    },
  });
  return new EndpointTable([
    endpoint('configs', { kind: 'resource', resource: 'configs', verbs: ['get', 'create'] }),
    endpoint('review', { kind: 'path', path: '/kubernetes/tokenreview', prefix: true, methods: ['POST'] }),
  ]);
}

/**
 * The exchange of a request by `alice` (her identity, as the authenticate stage returns it) and
 * where `table` routes it; throws when the table refuses it or leaves it unknown.
 */
export function routedTestExchange(
  table: EndpointTable,
  method: string,
  url: string,
  headers: IncomingHttpHeaders = {},
  body?: string | readonly string[],
) {
  const exchange = testExchange({ method, url, headers, ...(body !== undefined ? { body } : {}) });
  const query = new URLSearchParams(exchange.search);
  const route = table.route(method, exchange.path, exchange.search, NO_PROJECTS);
  if (route.kind === 'refused' || route.kind === 'unknown' || route.kind === 'cluster')
    throw new Error(`${url} is not served`);
  return { exchange, route, query, identity: testIdentity(), negotiated: JSON_ONLY };
}

/** A JSON body with the headers announcing it. */
export function jsonBody(value: unknown): { headers: IncomingHttpHeaders; text: string } {
  const text = JSON.stringify(value);
  return { headers: { 'content-type': 'application/json', 'content-length': String(text.length) }, text };
}

/** The attributes of a request for OwnedAccessKeys with `verb` (a resource request whose answers are redacted). */
export const keysRequest = (verb: string): RequestAttributes => ({
  ...nonResourceRequest(verb, ''),
  resourceRequest: true,
  apiGroup: 'management.platform',
  resource: 'ownedaccesskeys',
  path: '/apis/management.platform/v1/ownedaccesskeys',
});

/** A lookup that knows no project (for routing in tests). */
export const NO_PROJECTS = { projectOfNamespace: () => undefined, namespaceOfProject: () => undefined };
