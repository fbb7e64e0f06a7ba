import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { jsonWithPrototypeKeys, PROTOTYPE_KEYS } from '../../test-support/prototype-keys.ts';
import { StatusError } from '../api/status.ts';
import {
  checkJsonPatch,
  decodeRequestBody,
  decodesBody,
  hasBody,
  negotiate,
  otherApiVersion,
  parseObjectBody,
  parsePatchBody,
} from './body.ts';

const bytes = (text: string) => new TextEncoder().encode(text);
const code = (value: unknown) => (value instanceof StatusError ? value.code : 0);

describe('bodies', () => {
  test('YAML and JSON objects', () => {
    expect(parseObjectBody(bytes('kind: SharedSecret\nmetadata:\n  name: a\n'), 'application/yaml')).toEqual({
      kind: 'SharedSecret',
      metadata: { name: 'a' },
    });
    expect(parseObjectBody(bytes('{"a":1}'), 'application/json; charset=utf-8')).toEqual({ a: 1 });
    expect(code(parseObjectBody(bytes('a: [1'), 'application/yaml'))).toBe(400);
    expect(code(parseObjectBody(bytes('a: 1\n---\nb: 2\n'), 'application/yaml'))).toBe(400);
    expect(code(parseObjectBody(bytes('[1]'), 'application/json'))).toBe(400);
    expect(code(parseObjectBody(bytes(''), 'application/json'))).toBe(400);
    expect(code(parseObjectBody(bytes('a'), 'text/plain'))).toBe(415);
    // Without a content type the body is JSON, as kube-apiserver reads it.
    expect(parseObjectBody(bytes('{"kind":"X"}'), undefined)).toEqual({ kind: 'X' });
    expect(code(parseObjectBody(bytes('kind: X'), undefined))).toBe(400);
    expect(code(parseObjectBody(new Uint8Array([0xff, 0xfe]), 'application/json'))).toBe(400);
    // A recursive alias (found by the gateway fuzz test): 400, not a value that contains itself.
    expect(code(parseObjectBody(bytes('a: &a [*a]'), 'application/yaml'))).toBe(400);
    // Aliases that do not recurse are fine, also when one value is used twice.
    expect(parseObjectBody(bytes('a: &x [1]\nb: *x\nc: *x\n'), 'application/yaml')).toEqual({
      a: [1],
      b: [1],
      c: [1],
    });
  });

  test('patches by media type', () => {
    expect(
      parsePatchBody(bytes('[{"op":"add","path":"/a","value":1}]'), 'application/json-patch+json'),
    ).toEqual({
      type: 'json',
      value: [{ op: 'add', path: '/a', value: 1 }],
    });
    expect(code(parsePatchBody(bytes('{"op":"add"}'), 'application/json-patch+json'))).toBe(400);
    expect(
      code(parsePatchBody(bytes('[{"op":"add","path":"a","value":1}]'), 'application/json-patch+json')),
    ).toBe(400);
    expect(code(parsePatchBody(bytes('[{"op":"add","path":"/a"}]'), 'application/json-patch+json'))).toBe(
      400,
    );
    expect(code(parsePatchBody(bytes('[{"op":"move","path":"/a"}]'), 'application/json-patch+json'))).toBe(
      400,
    );
    expect(code(parsePatchBody(bytes('[1]'), 'application/merge-patch+json'))).toBe(400);
    expect(parsePatchBody(bytes('spec:\n  a: 1\n'), 'application/apply-patch+yaml')).toEqual({
      type: 'apply',
      value: { spec: { a: 1 } },
    });
    expect(code(parsePatchBody(bytes('{}'), 'application/strategic-merge-patch+json'))).toBe(415);
    // A media type named like an Object.prototype member is no patch type (issue 29).
    for (const type of PROTOTYPE_KEYS) expect(code(parsePatchBody(bytes('{}'), type))).toBe(415);
  });

  test('a body with keys named like Object.prototype members decodes to exactly those keys', () => {
    fc.assert(
      fc.property(jsonWithPrototypeKeys().object, (value) => {
        const text = JSON.stringify(value);
        expect(JSON.stringify(parseObjectBody(bytes(text), 'application/json'))).toBe(text);
        expect(JSON.stringify(parseObjectBody(bytes(text), 'application/yaml'))).toBe(text);
        const patch = parsePatchBody(bytes(text), 'application/merge-patch+json');
        expect(JSON.stringify(patch instanceof StatusError ? patch : patch.value)).toBe(text);
      }),
    );
  });

  test('never throws on any input', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.constantFrom(
          'application/json',
          'application/yaml',
          'application/json-patch+json',
          'application/merge-patch+json',
          'application/apply-patch+yaml',
          'x/y',
          '',
        ),
        (body, type) => {
          parseObjectBody(body, type);
          parsePatchBody(body, type);
        },
      ),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const result = checkJsonPatch(value);
        expect(result === undefined || result instanceof StatusError).toBe(true);
      }),
    );
  });

  test('negotiation', () => {
    expect(negotiate(undefined)).toEqual({ format: 'json', upstreamAccept: 'application/json' });
    expect(negotiate('application/yaml')).toEqual({ format: 'yaml', upstreamAccept: 'application/json' });
    expect(negotiate('application/json;as=Table;v=v1;g=meta.k8s.io,application/json')).toEqual({
      format: 'json',
      upstreamAccept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
    });
    expect(negotiate('*/*')).toMatchObject({ format: 'json' });
    expect(code(negotiate('text/html'))).toBe(406);
  });
});

describe('the API version of a written object', () => {
  const json = (value: unknown) => bytes(JSON.stringify(value));

  test("another group/version than the path's: 400 with kube-apiserver's message, on create and update", () => {
    for (const verb of ['create', 'update']) {
      const refused = decodeRequestBody(
        json({ apiVersion: 'management.platform/v2', kind: 'DirectClusterEndpointToken' }),
        'application/json',
        verb,
      );
      expect(refused).toBeInstanceOf(StatusError);
      expect(refused).toMatchObject({
        code: 400,
        reason: 'BadRequest',
        message:
          'the API version in the data (management.platform/v2) does not match the expected API version (management.platform/v1)',
      });
    }
    expect(otherApiVersion({ apiVersion: 'v1' })?.code).toBe(400);
    expect(otherApiVersion({ apiVersion: 42 })?.message).toContain('(number)');
    expect(otherApiVersion({ apiVersion: `x\n${'y'.repeat(300)}` })?.message.length).toBeLessThan(250);
  });

  test("the path's version, or none (the path names it), is read as it is", () => {
    const object = { apiVersion: 'management.platform/v1', kind: 'Config' };
    expect(decodeRequestBody(json(object), 'application/json', 'create')).toEqual(object);
    expect(decodeRequestBody(json({ kind: 'Config' }), 'application/json', 'create')).toEqual({
      kind: 'Config',
    });
    expect(otherApiVersion({ apiVersion: '' })).toBeUndefined();
  });

  test("a delete's options carry their own (meta) version and are not checked", () => {
    const options = { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Foreground' };
    expect(decodeRequestBody(json(options), undefined, 'delete')).toEqual(options);
  });
});

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
