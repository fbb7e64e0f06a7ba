import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { keysRequest, testExchange } from '../../../test-support/gateway-exchange.ts';
import { StatusError, tooManyRequests } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import type { EndpointAnswer } from '../../http/endpoint.ts';
import type { AuditOutcome } from '../audit/event.ts';
import type { Relay } from '../endpoints/endpoint.ts';
import { GatewayMetrics } from '../metrics.ts';
import { redactAccessKeys } from '../proxy/redact.ts';
import type { UpstreamResponse } from '../proxy/upstream.ts';
import { type EncodeDeps, type Outcome, respond } from './encode.ts';
import { type Answering, JSON_ONLY } from './exchange.ts';
import { NegotiationCache } from './negotiate.ts';

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

/** A request whose answer is audited (records what completes it) and that holds a slot. */
function exchangeFor(attributes: RequestAttributes | undefined, accept?: string) {
  const exchange = testExchange(accept ? { headers: { accept } } : {});
  const negotiated = accept ? new NegotiationCache().negotiate(accept) : JSON_ONLY;
  if (negotiated instanceof StatusError) throw negotiated;
  const completed: AuditOutcome[] = [];
  const started: AuditOutcome[] = [];
  let released = 0;
  const answering: Answering = {
    exchange,
    attributes,
    negotiated,
    audit: {
      level: 'Metadata',
      responseStarted: (outcome) => started.push(outcome),
      complete: (outcome) => completed.push(outcome),
    },
    release: () => {
      released++;
    },
  };
  return { exchange, answering, completed, started, released: () => released };
}

const answer = (value: EndpointAnswer, sensitive = false): Outcome => ({
  kind: 'answer',
  answer: value,
  sensitive,
});
const relayed = (relay: Relay): Outcome => ({ kind: 'relay', relay });

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

describe('objects and errors', () => {
  test('an object in YAML, with its length; counted, audited, the slot given back', async () => {
    const { deps, counted } = world();
    const { exchange, answering, completed, released } = exchangeFor(keysRequest('get'), 'application/yaml');
    await respond(deps, answering, {
      kind: 'answer',
      answer: { code: 200, object: { a: 1 } },
      sensitive: false,
    });
    expect(exchange.response.statusCode).toBe(200);
    expect(exchange.response.headers['content-type']).toBe('application/yaml');
    expect(exchange.response.headers['content-length']).toBe(Buffer.byteLength(exchange.response.text));
    expect(parseYaml(exchange.response.text)).toEqual({ a: 1 });
    expect(completed).toEqual([{ code: 200, responseObject: { a: 1 } }]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['GET', '200', 1]]);
  });

  test('answers of sensitive endpoints never reach the audit log; their refusals do', async () => {
    const { deps } = world();
    const ok = exchangeFor(keysRequest('create'));
    await respond(deps, ok.answering, answer({ code: 201, object: { token: 'secret' } }, true));
    expect(ok.completed).toEqual([{ code: 201 }]);
    const refused = exchangeFor(keysRequest('create'));
    const forbidden = { code: 403, object: { message: 'no', reason: 'Forbidden' } };
    await respond(deps, refused.answering, answer(forbidden, true));
    expect(refused.completed[0]).toMatchObject({ code: 403, status: 'Failure', message: 'no' });
  });

  test('a raw answer as it is, with its content type', async () => {
    const { deps } = world();
    const { exchange, answering } = exchangeFor(nonResourceRequest('get', '/login'));
    await respond(deps, answering, answer({ code: 200, body: '<p>hi</p>', contentType: 'text/html' }));
    expect(exchange.response.headers['content-type']).toBe('text/html');
    expect(exchange.response.text).toBe('<p>hi</p>');
  });

  test('a StatusError as its Status, with its headers', async () => {
    const { deps } = world();
    const { exchange, answering } = exchangeFor(keysRequest('list'));
    await respond(deps, answering, { kind: 'error', error: tooManyRequests(7) });
    expect(exchange.response.statusCode).toBe(429);
    expect(exchange.response.headers['retry-after']).toBe('7');
    expect(exchange.response.json).toEqual(tooManyRequests(7).toStatus());
  });

  test('anything else: logged, and a 500 that tells nothing', async () => {
    const { deps, logged } = world();
    const { exchange, answering } = exchangeFor(keysRequest('list'));
    await respond(deps, answering, { kind: 'error', error: new Error('password=hunter2') });
    expect(exchange.response.statusCode).toBe(500);
    expect(exchange.response.json).toMatchObject({ kind: 'Status', code: 500, reason: 'InternalError' });
    expect(exchange.response.text).not.toContain('hunter2');
    expect(logged).toHaveLength(1);
  });

  test('a client that went away: 499 in the metrics and the audit, nothing logged', async () => {
    const { deps, logged } = world();
    const { exchange, answering, completed } = exchangeFor(keysRequest('list'));
    const abort = new AbortController();
    abort.abort(new Error('client went away'));
    const gone = { ...answering, exchange: { ...exchange, signal: abort.signal } };
    await respond(deps, gone, { kind: 'error', error: new Error('client went away') });
    expect(completed[0]).toMatchObject({ code: 499 });
    expect(logged).toEqual([]);
  });

  test('an error once the answer is under way cuts the connection', async () => {
    const { deps } = world();
    const { exchange, answering, completed } = exchangeFor(keysRequest('list'));
    exchange.response.writeHead(200, {});
    await respond(deps, answering, { kind: 'error', error: new StatusError(502, 'BadGateway', 'broken') });
    expect(exchange.response.destroyed).toBe(true);
    expect(completed[0]).toMatchObject({ code: 502 });
  });
});

describe('apiserver answers relayed', () => {
  test('small JSON without redaction: passed on as it came, with its warnings', async () => {
    const { deps } = world();
    const { exchange, answering, completed } = exchangeFor(nonResourceRequest('get', '/x'));
    const text = '{"kind":"SharedSecretList","items":[]}';
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(
          200,
          { 'content-type': 'application/json', 'content-length': String(text.length), warning: '299 - "w"' },
          [text],
        ),
        redaction: undefined,
      }),
    );
    expect(exchange.response.text).toBe(text);
    expect(exchange.response.headers.warning).toBe('299 - "w"');
    expect(completed).toEqual([{ code: 200 }]);
  });

  test.each([
    ['with its declared length (read whole at once)', true],
    ['without a length (read chunk by chunk)', false],
  ])('an answer of several chunks %s: passed on whole, with its length', async (_, declared) => {
    const { deps } = world();
    const { exchange, answering, completed } = exchangeFor(nonResourceRequest('get', '/x'));
    const chunks = ['{"kind":"SharedSecretList",', '"items":[]', '}'];
    const text = chunks.join('');
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (declared) headers['content-length'] = String(Buffer.byteLength(text));
    await respond(deps, answering, relayed({ relay: upstream(200, headers, chunks), redaction: undefined }));
    expect(exchange.response.text).toBe(text);
    expect(exchange.response.headers['content-length']).toBe(Buffer.byteLength(text));
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
    const { exchange, answering } = exchangeFor(keysRequest('get'), accept);
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(200, { 'content-type': 'application/json' }, [JSON.stringify(value, null, 2)]),
        redaction: redactAccessKeys,
      }),
    );
    expect(exchange.response.statusCode).toBe(200);
    expect(exchange.response.text).toContain('k1');
    expect(exchange.response.text).not.toContain(SECRET);
  });

  test('a watch: streamed event by event, each redacted; the slot given back when it ends', async () => {
    const { deps, counted } = world();
    const { exchange, answering, started, completed, released } = exchangeFor(keysRequest('watch'));
    const event = (name: string) => JSON.stringify({ type: 'ADDED', object: key(name) });
    const both = `${event('k1')}\n${event('k2')}\n`;
    // Split inside a document: the stream reassembles it before redacting.
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(200, { 'content-type': 'application/json' }, [both.slice(0, 50), both.slice(50)]),
        redaction: redactAccessKeys,
      }),
    );
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
    const { exchange, answering, released } = exchangeFor(keysRequest('watch'));
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(200, { 'content-type': 'application/json' }, [
          `${JSON.stringify({ type: 'ADDED', object: key('k1') })}\n`,
          `not json ${SECRET}`,
        ]),
        redaction: redactAccessKeys,
      }),
    );
    expect(exchange.response.text).not.toContain(SECRET);
    expect(released()).toBe(1);
  });

  test('events read whole (a watch spelled as a list) are redacted one by one', async () => {
    const { deps } = world();
    const { exchange, answering } = exchangeFor(keysRequest('list'));
    const events = [key('k1'), key('k2')].map((object) => JSON.stringify({ type: 'ADDED', object }));
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(200, { 'content-type': 'application/json' }, [events.join('\n')]),
        redaction: redactAccessKeys,
      }),
    );
    expect(exchange.response.text.trim().split('\n')).toHaveLength(2);
    expect(exchange.response.text).not.toContain(SECRET);
  });

  test('an answer that must be redacted but is no JSON: 502, never passed on', async () => {
    const { deps } = world();
    const { exchange, answering, completed } = exchangeFor(keysRequest('get'));
    await respond(
      deps,
      answering,
      relayed({
        relay: upstream(200, { 'content-type': 'text/plain' }, [SECRET]),
        redaction: redactAccessKeys,
      }),
    );
    expect(exchange.response.statusCode).toBe(502);
    expect(exchange.response.text).not.toContain(SECRET);
    expect(completed).toEqual([expect.objectContaining({ code: 502 })]);
  });
});

describe('access proxy relays', () => {
  const forwarded = (run: (answering: (code: number) => void) => Promise<number>) =>
    ({ kind: 'forwarded', longLived: false, run }) as const;

  test('counted when its headers are known, completed and the slot given back when it ends', async () => {
    const { deps, counted } = world();
    const { answering, completed, released } = exchangeFor(keysRequest('get'));
    await respond(
      deps,
      answering,
      forwarded(async (started) => {
        started(200);
        return 200;
      }),
    );
    expect(completed).toEqual([{ code: 200 }]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['GET', '200', 1]]);
  });

  test('a failure before its headers: a Status, counted and completed once', async () => {
    const { deps, counted } = world();
    const { exchange, answering, completed, released } = exchangeFor(keysRequest('get'));
    await respond(
      deps,
      answering,
      forwarded(async () => {
        throw new StatusError(503, 'ServiceUnavailable', 'unreachable');
      }),
    );
    expect(exchange.response.statusCode).toBe(503);
    expect(completed).toEqual([expect.objectContaining({ code: 503 })]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['GET', '503', 1]]);
  });

  test('a failure once counted: answered, and its audit record completed and slot given back all the same', async () => {
    const { deps, counted } = world();
    const { exchange, answering, completed, released } = exchangeFor(keysRequest('get'));
    await respond(
      deps,
      answering,
      forwarded(async (started) => {
        started(101);
        throw new StatusError(502, 'BadGateway', 'switched protocols unasked');
      }),
    );
    expect(exchange.response.statusCode).toBe(502);
    expect(completed).toEqual([{ code: 502 }]);
    expect(released()).toBe(1);
    expect(await counted()).toEqual([['GET', '101', 1]]);
  });
});
