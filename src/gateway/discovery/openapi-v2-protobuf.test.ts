import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { openApiV2, openApiV2ProtobufDocument } from './openapi.ts';
import { encodeSchema, openApiV2Protobuf } from './openapi-v2-protobuf.ts';

/** A protobuf field as read back: number, wire type, and the varint, 8 bytes or embedded bytes. */
interface Field {
  readonly field: number;
  readonly wire: number;
  readonly value: bigint | Buffer;
}

/** Reads one message's fields (the wire format only; what a field means is the caller's). */
function readFields(bytes: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  const readVarint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++];
      if (byte === undefined) throw new Error('truncated varint');
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
  };
  while (at < bytes.length) {
    const key = Number(readVarint());
    const field = key >> 3;
    const wire = key & 7;
    if (wire === 0) fields.push({ field, wire, value: readVarint() });
    else if (wire === 1) {
      fields.push({ field, wire, value: bytes.subarray(at, at + 8) });
      at += 8;
    } else if (wire === 2) {
      const length = Number(readVarint());
      fields.push({ field, wire, value: bytes.subarray(at, at + length) });
      at += length;
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  if (at !== bytes.length) throw new Error('trailing bytes');
  return fields;
}

const embedded = (fields: Field[], number: number) =>
  fields.filter((f) => f.field === number).map((f) => f.value as Buffer);
const text = (fields: Field[], number: number) => embedded(fields, number).map((b) => b.toString('utf8'));

describe('the OpenAPI v2 document as protobuf (gnostic openapi.v2.Document)', () => {
  test("a schema's fields carry gnostic's numbers and protobuf's encodings", () => {
    // type (22) is a TypeItem whose value (1) is the string.
    expect(encodeSchema({ type: 'string' }).toString('hex')).toBe(
      `b201080a06${Buffer.from('string').toString('hex')}`,
    );
    // minimum (9) is a double, 8 bytes little endian; maxLength (11) a varint; required (19) repeated.
    const fields = readFields(encodeSchema({ minimum: -1.5, maxLength: 300, required: ['a', 'b'] }));
    expect(fields.find((f) => f.field === 9)?.wire).toBe(1);
    expect(embedded(fields, 9)[0]?.readDoubleLE()).toBe(-1.5);
    expect(fields.find((f) => f.field === 11)?.value).toBe(300n);
    expect(text(fields, 19)).toEqual(['a', 'b']);
    // additionalProperties: false is the oneof's boolean (2), present although false.
    const closed = readFields(embedded(readFields(encodeSchema({ additionalProperties: false })), 21)[0]!);
    expect(closed).toEqual([{ field: 2, wire: 0, value: 0n }]);
  });

  test('vendor extensions and values without a message of their own are YAML in an Any', () => {
    const fields = readFields(
      encodeSchema({
        'x-kubernetes-group-version-kind': [{ group: 'management.platform', version: 'v1', kind: 'Team' }],
        enum: ['a', 'b'],
        anyOf: [{ type: 'string' }],
      }),
    );
    const [extension] = embedded(fields, 31).map(readFields);
    expect(text(extension!, 1)).toEqual(['x-kubernetes-group-version-kind']);
    const yaml = text(readFields(embedded(extension!, 2)[0]!), 2)[0]!;
    expect(parseYaml(yaml)).toEqual([{ group: 'management.platform', version: 'v1', kind: 'Team' }]);
    expect(embedded(fields, 20).map((any) => parseYaml(text(readFields(any), 2)[0]!))).toEqual(['a', 'b']);
    // anyOf has no field in Swagger 2.0's schema: left out (the schema accepts any value).
    expect(fields.map((f) => f.field).sort((a, b) => a - b)).toEqual([20, 20, 31]);
  });

  test("the served document has the JSON document's paths, operations and definitions, every one", () => {
    const json = JSON.parse(openApiV2()) as {
      swagger: string;
      paths: Record<string, Record<string, { operationId?: string }>>;
      definitions: Record<string, unknown>;
    };
    const document = readFields(openApiV2ProtobufDocument());
    expect(text(document, 1)).toEqual([json.swagger]);
    const definitions = embedded(readFields(embedded(document, 9)[0]!), 1).map(readFields);
    expect(definitions.map((named) => text(named, 1)[0])).toEqual(Object.keys(json.definitions));
    const paths = embedded(readFields(embedded(document, 8)[0]!), 2).map(readFields);
    expect(paths.map((named) => text(named, 1)[0])).toEqual(Object.keys(json.paths));
    // Each PathItem's operations in their fields (get 2, put 3, post 4, delete 5, patch 8), each
    // with its operationId (5).
    const numbers: Record<string, number> = { get: 2, put: 3, post: 4, delete: 5, patch: 8 };
    for (const [i, [, item]] of Object.entries(json.paths).entries()) {
      const pathItem = readFields(embedded(paths[i]!, 2)[0]!);
      for (const [method, op] of Object.entries(item)) {
        if (method === 'parameters') continue;
        const operation = readFields(embedded(pathItem, numbers[method]!)[0]!);
        expect(text(operation, 5)).toEqual([op.operationId]);
      }
    }
  });

  test('a document without paths or definitions encodes what it has', () => {
    const fields = readFields(openApiV2Protobuf({ swagger: '2.0', info: { title: 't', version: 'v' } }));
    expect(text(fields, 1)).toEqual(['2.0']);
    expect(text(readFields(embedded(fields, 2)[0]!), 1)).toEqual(['t']);
  });
});
