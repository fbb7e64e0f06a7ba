import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { testExchange } from '../../../test-support/gateway-exchange.ts';
import { StatusError, tooManyRequests } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import type { AuditOutcome } from '../audit/event.ts';
import { GatewayMetrics } from '../metrics.ts';
import { redactAccessKeys } from '../proxy/redact.ts';
import type { UpstreamResponse } from '../proxy/upstream.ts';
import {
  type EncodeDeps,
  NegotiationCache,
  negotiateExchange,
  objectAsListRefusal,
  sendAnswer,
  sendError,
  sendObject,
  sendRelay,
} from './encode.ts';

const keys = (verb: string): RequestAttributes => ({
  ...nonResourceRequest(verb, ''),
  resourceRequest: true,
  apiGroup: 'management.platform',
  resource: 'ownedaccesskeys',
  path: '/apis/management.platform/v1/ownedaccesskeys',
});

function world() {
  const registry = new Registry();
  const logged: unknown[] = [];
  const deps: EncodeDeps = {
    metrics: new GatewayMetrics(registry),
    logger: { error: (object: unknown) => logged.push(object) } as unknown as Logger,
  };
  const counted = async () =>
    (await deps.metrics.requests.get()).values.map((value) => [
      value.labels.verb,
      value.labels.code,
      value.value,
    ]);
  return { deps, logged, counted };
}

/** An exchange whose answer is audited (records what completes it) and that holds a slot. */
function exchangeFor(attributes: RequestAttributes | undefined, accept?: string) {
  const exchange = testExchange(accept ? { headers: { accept } } : {});
  exchange.attributes = attributes;
  if (accept) negotiateExchange(new NegotiationCache(), exchange);
  const completed: AuditOutcome[] = [];
  const started: AuditOutcome[] = [];
  exchange.audit = {
    level: 'Metadata',
    responseStarted: (outcome) => started.push(outcome),
    complete: (outcome) => completed.push(outcome),
  };
  let released = 0;
  exchange.release = () => {
    released++;
  };
  return { exchange, completed, started, released: () => released };
}

/** An apiserver answer of `chunks`. */
function upstream(
  code: number,
  headers: Record<string, string>,
  chunks: readonly string[],
): UpstreamResponse {
  const body = Object.assign(Readable.from(chunks.map((chunk) => Buffer.from(chunk))), {
    async text() {
      return Buffer.concat(await body.toArray()).toString('utf8');
    },
    async arrayBuffer() {
      const buffer = Buffer.concat(await body.toArray());
      return buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength) as ArrayBuffer;
    },
    async dump() {
      body.resume();
    },
  });
  return { statusCode: code, headers, body };
}

const SECRET = 'connector-data-never-leaves';
const key = (name: string) => ({
  metadata: { name },
  spec: { user: 'alice', identity: { connector: 'oidc', connectorData: SECRET } },
});

describe('content negotiation', () => {
  test('each Accept header is negotiated once; the cache starts over when full', () => {
    const cache = new NegotiationCache(2);
    const yaml = cache.negotiate('application/yaml');
    expect(yaml).toEqual({ format: 'yaml', upstreamAccept: 'application/json' });
    expect(cache.negotiate('application/yaml')).toBe(yaml);
    expect(cache.negotiate(undefined)).toBe(cache.negotiate(''));
    expect(cache.size).toBe(2);
    cache.negotiate('*/*');
    expect(cache.size).toBe(1);
    expect(cache.negotiate('application/yaml')).not.toBe(yaml);
  });

  test('refusals are not kept: each 406 is a fresh error', () => {
    const cache = new NegotiationCache();
    const first = cache.negotiate('text/html');
    expect(first).toBeInstanceOf(StatusError);
    expect((first as StatusError).code).toBe(406);
    expect(cache.negotiate('text/html')).not.toBe(first);
    expect(cache.size).toBe(0);
  });

  test("the exchange is answered in the negotiated format, or refused; a table request's JSON flavour goes upstream", () => {
    const cache = new NegotiationCache();
    const table = testExchange({ headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } });
    negotiateExchange(cache, table);
    expect(table.negotiated).toEqual({
      format: 'json',
      upstreamAccept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
    });
    expect(() => negotiateExchange(cache, testExchange({ headers: { accept: 'text/html' } }))).toThrow(
      expect.objectContaining({ code: 406 }),
    );
  });
});

describe('a single object asked for as a list of metadata', () => {
  const metadataList = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';
  const negotiated = (accept: string) => {
    const answer = new NegotiationCache().negotiate(accept);
    if (answer instanceof StatusError) throw answer;
    return answer;
  };

  test.each(['get', 'create', 'update', 'patch', 'delete'])(
    '%s: 406, as kube-apiserver answers for its own kinds',
    (verb) => {
      expect(objectAsListRefusal(negotiated(metadataList), verb)?.code).toBe(406);
      expect(objectAsListRefusal(negotiated(`${metadataList}, application/json`), verb)?.code).toBe(406);
    },
  );

  test('lists and watches may ask for it; objects may ask for other flavours, or for it after another', () => {
    expect(objectAsListRefusal(negotiated(metadataList), 'list')).toBeUndefined();
    expect(objectAsListRefusal(negotiated(metadataList), 'watch')).toBeUndefined();
    expect(
      objectAsListRefusal(negotiated('application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io'), 'get'),
    ).toBeUndefined();
    expect(
      objectAsListRefusal(negotiated(`application/json;as=Table;v=v1;g=meta.k8s.io, ${metadataList}`), 'get'),
    ).toBeUndefined();
    expect(objectAsListRefusal(negotiated(`application/yaml, ${metadataList}`), 'get')).toBeUndefined();
  });

  test('the stage refuses it for resource requests', () => {
    const exchange = testExchange({ headers: { accept: metadataList } });
    exchange.attributes = keys('get');
    expect(() => negotiateExchange(new NegotiationCache(), exchange)).toThrow(
      expect.objectContaining({ code: 406 }),
    );
  });
});

describe('objects and errors', () => {
  test('an object in YAML, with its length; counted, audited, the slot given back, once', async () => {
    const { deps, counted } = world();
    const { exchange, completed, released } = exchangeFor(keys('get'), 'application/yaml');
    sendObject(deps, exchange, 200, { a: 1 });
    sendObject(deps, exchange, 500, { b: 2 });
    expect(exchange.response.statusCode).toBe(200);
    expect(exchange.response.headers['content-type']).toBe('application/yaml');
    expect(exchange.response.headers['content-length']).toBe(Buffer.byteLength(exchange.response.text));
    expect(parseYaml(exchange.response.text)).toEqual({ a: 1 });
    expect(completed).toEqual([{ code: 200, responseObject: { a: 1 } }]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['GET', '200', 1]]);
  });

  test('answers of sensitive endpoints never reach the audit log; their refusals do', () => {
    const { deps } = world();
    const ok = exchangeFor(keys('create'));
    sendAnswer(deps, ok.exchange, { code: 201, object: { token: 'secret' } }, true);
    expect(ok.completed).toEqual([{ code: 201 }]);
    const refused = exchangeFor(keys('create'));
    sendAnswer(deps, refused.exchange, { code: 403, object: { message: 'no', reason: 'Forbidden' } }, true);
    expect(refused.completed[0]).toMatchObject({ code: 403, status: 'Failure', message: 'no' });
  });

  test('a raw answer as it is, with its content type', () => {
    const { deps } = world();
    const { exchange } = exchangeFor(nonResourceRequest('get', '/login'));
    sendAnswer(deps, exchange, { code: 200, body: '<p>hi</p>', contentType: 'text/html' }, false);
    expect(exchange.response.headers['content-type']).toBe('text/html');
    expect(exchange.response.text).toBe('<p>hi</p>');
  });

  test('a StatusError as its Status, with its headers', () => {
    const { deps } = world();
    const { exchange } = exchangeFor(keys('list'));
    sendError(deps, exchange, tooManyRequests(7));
    expect(exchange.response.statusCode).toBe(429);
    expect(exchange.response.headers['retry-after']).toBe('7');
    expect(exchange.response.json).toEqual(tooManyRequests(7).toStatus());
  });

  test('anything else: logged, and a 500 that tells nothing', () => {
    const { deps, logged } = world();
    const { exchange } = exchangeFor(keys('list'));
    sendError(deps, exchange, new Error('password=hunter2'));
    expect(exchange.response.statusCode).toBe(500);
    expect(exchange.response.json).toMatchObject({ kind: 'Status', code: 500, reason: 'InternalError' });
    expect(exchange.response.text).not.toContain('hunter2');
    expect(logged).toHaveLength(1);
  });

  test('a client that went away: 499 in the metrics and the audit, nothing logged', () => {
    const { deps, logged } = world();
    const { exchange, completed } = exchangeFor(keys('list'));
    const abort = new AbortController();
    abort.abort(new Error('client went away'));
    const gone = { ...exchange, signal: abort.signal };
    sendError(deps, gone, new Error('client went away'));
    expect(completed[0]).toMatchObject({ code: 499 });
    expect(logged).toEqual([]);
  });

  test('an error once the answer is under way cuts the connection', () => {
    const { deps } = world();
    const { exchange, completed } = exchangeFor(keys('list'));
    exchange.response.writeHead(200, {});
    sendError(deps, exchange, new StatusError(502, 'BadGateway', 'broken'));
    expect(exchange.response.destroyed).toBe(true);
    expect(completed[0]).toMatchObject({ code: 502 });
  });
});

describe('apiserver answers relayed', () => {
  test('small JSON without redaction: passed on as it came, with its warnings', async () => {
    const { deps } = world();
    const { exchange, completed } = exchangeFor(nonResourceRequest('get', '/x'));
    const text = '{"kind":"SharedSecretList","items":[]}';
    await sendRelay(deps, exchange, {
      relay: upstream(
        200,
        { 'content-type': 'application/json', 'content-length': String(text.length), warning: '299 - "w"' },
        [text],
      ),
      redaction: undefined,
    });
    expect(exchange.response.text).toBe(text);
    expect(exchange.response.headers.warning).toBe('299 - "w"');
    expect(completed).toEqual([{ code: 200 }]);
  });

  test.each([
    ['an object', key('k1'), 'application/json'],
    ['a list', { kind: 'List', items: [key('k1'), key('k2')] }, 'application/json'],
    ['an object as YAML', key('k1'), 'application/yaml'],
    [
      'a table with objects',
      { kind: 'Table', rows: [{ cells: ['k1'], object: key('k1') }] },
      'application/json;as=Table;v=v1;g=meta.k8s.io',
    ],
  ])('%s: redacted', async (_shape, value, accept) => {
    const { deps } = world();
    const { exchange } = exchangeFor(keys('get'), accept);
    await sendRelay(deps, exchange, {
      relay: upstream(200, { 'content-type': 'application/json' }, [JSON.stringify(value, null, 2)]),
      redaction: redactAccessKeys,
    });
    expect(exchange.response.statusCode).toBe(200);
    expect(exchange.response.text).toContain('k1');
    expect(exchange.response.text).not.toContain(SECRET);
  });

  test('a watch: streamed event by event, each redacted; the slot given back when it ends', async () => {
    const { deps, counted } = world();
    const { exchange, started, completed, released } = exchangeFor(keys('watch'));
    const event = (name: string) => JSON.stringify({ type: 'ADDED', object: key(name) });
    const both = `${event('k1')}\n${event('k2')}\n`;
    // Split inside a document: the stream reassembles it before redacting.
    await sendRelay(deps, exchange, {
      relay: upstream(200, { 'content-type': 'application/json' }, [both.slice(0, 50), both.slice(50)]),
      redaction: redactAccessKeys,
    });
    expect(exchange.response.headers['cache-control']).toBe('no-cache, private');
    const lines = exchange.response.text.trim().split('\n');
    expect(lines.map((line) => JSON.parse(line).object.metadata.name)).toEqual(['k1', 'k2']);
    expect(exchange.response.text).not.toContain(SECRET);
    expect(started).toEqual([{ code: 200 }]);
    expect(completed).toEqual([{ code: 200 }]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['WATCH', '200', 1]]);
  });

  test('a watch stream that cannot be read as events is cut, never passed on unredacted', async () => {
    const { deps } = world();
    const { exchange, released } = exchangeFor(keys('watch'));
    await sendRelay(deps, exchange, {
      relay: upstream(200, { 'content-type': 'application/json' }, [
        `${JSON.stringify({ type: 'ADDED', object: key('k1') })}\n`,
        `not json ${SECRET}`,
      ]),
      redaction: redactAccessKeys,
    });
    expect(exchange.response.text).not.toContain(SECRET);
    expect(released()).toBe(1);
  });

  test('events read whole (a watch spelled as a list) are redacted one by one', async () => {
    const { deps } = world();
    const { exchange } = exchangeFor(keys('list'));
    const events = [key('k1'), key('k2')].map((object) => JSON.stringify({ type: 'ADDED', object }));
    await sendRelay(deps, exchange, {
      relay: upstream(200, { 'content-type': 'application/json' }, [events.join('\n')]),
      redaction: redactAccessKeys,
    });
    expect(exchange.response.text.trim().split('\n')).toHaveLength(2);
    expect(exchange.response.text).not.toContain(SECRET);
  });

  test('an answer that must be redacted but is no JSON: 502', async () => {
    const { deps } = world();
    const { exchange } = exchangeFor(keys('get'));
    await expect(
      sendRelay(deps, exchange, {
        relay: upstream(200, { 'content-type': 'text/plain' }, [SECRET]),
        redaction: redactAccessKeys,
      }),
    ).rejects.toMatchObject({ code: 502 });
    expect(exchange.response.text).toBe('');
  });
});
