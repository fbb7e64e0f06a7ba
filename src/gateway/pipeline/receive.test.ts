import { describe, expect, test } from 'vitest';
import { jsonBody, routedTestExchange, testEndpointTable } from '../../../test-support/gateway-exchange.ts';
import { BASE_PATH } from '../paths.ts';
import { receiveBody } from './receive.ts';

const api = `${BASE_PATH}/apis/management.platform/v1`;
const table = testEndpointTable();

const routed = (
  ...args: Parameters<typeof routedTestExchange> extends [unknown, ...infer Rest] ? Rest : never
) => routedTestExchange(table, ...args);

describe('receiveBody', () => {
  test('a resource write: decoded, and what the audit log records', async () => {
    const { headers, text } = jsonBody({ metadata: { name: 'c' } });
    const { exchange, route } = routed('POST', `${api}/configs`, headers, text);
    const { bytes, body, requestObject } = await receiveBody(exchange, route);
    expect(bytes.toString()).toBe(text);
    expect(body).toEqual({ metadata: { name: 'c' } });
    expect(requestObject).toEqual({ metadata: { name: 'c' } });
  });

  test('a patch: the patch decoded by its type, its value audited', async () => {
    const { exchange, route } = routed(
      'PATCH',
      `${api}/namespaces/ns/sharedsecrets/s`,
      { 'content-type': 'application/merge-patch+json', 'transfer-encoding': 'chunked' },
      ['{"spec":', '{"description":"d"}}'],
    );
    const { body, requestObject } = await receiveBody(exchange, route);
    expect(body).toEqual({ type: 'merge', value: { spec: { description: 'd' } } });
    expect(requestObject).toEqual({ spec: { description: 'd' } });
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
  });

  test('past the limit: 413, whatever the body', async () => {
    const { exchange, route } = routed('POST', `${api}/configs`, { 'transfer-encoding': 'chunked' }, [
      '0123456789',
      '0123456789',
    ]);
    await expect(receiveBody(exchange, route, 15)).rejects.toMatchObject({ code: 413 });
  });
});
