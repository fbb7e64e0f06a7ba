import { stringify as stringifyYaml } from 'yaml';

/**
 * The OpenAPI v2 document in the protobuf form kube-apiserver serves and kubectl reads
 * (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): the message
 * `openapi.v2.Document` of gnostic's `openapiv2/OpenAPIv2.proto`, field numbers as there.
 *
 * kubectl validates a manifest on the client (`--validate`, strict by default) through this
 * document when the OpenAPI v3 document does not tell it that the server validates fields for
 * that kind: a kind without a PATCH operation (DirectClusterEndpointToken) or a group/version the
 * server does not serve. Without it kubectl stops at "failed to download openapi".
 *
 * Pure: the Swagger 2.0 JSON document in, bytes out. JSON Schema keywords that Swagger 2.0 has no
 * field for (`anyOf`, `nullable`) have none here either: such a schema accepts any value, which
 * leaves the decision to the server's own validation, as before.
 */

export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';
/** What kube-apiserver answers that request with: the same type spelt so that it parses as a media type. */
export const OPENAPI_V2_PROTOBUF_CONTENT_TYPE = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

type Json = Record<string, unknown>;
type Bytes = Buffer;

const EMPTY = Buffer.alloc(0);
const WIRE_VARINT = 0;
const WIRE_64BIT = 1;
const WIRE_BYTES = 2;

function varint(value: number): Bytes {
  const out: number[] = [];
  let rest = BigInt(Math.trunc(value));
  if (rest < 0n) rest += 1n << 64n; // int64 two's complement, as protobuf encodes negatives
  do {
    const low = Number(rest & 0x7fn);
    rest >>= 7n;
    out.push(rest > 0n ? low | 0x80 : low);
  } while (rest > 0n);
  return Buffer.from(out);
}

const key = (field: number, wire: number) => varint(field * 8 + wire);

/** A length-delimited field (a string or an embedded message), present even when empty. */
const delimited = (field: number, body: Bytes): Bytes =>
  Buffer.concat([key(field, WIRE_BYTES), varint(body.length), body]);

const string = (field: number, value: unknown): Bytes =>
  typeof value === 'string' && value !== '' ? delimited(field, Buffer.from(value, 'utf8')) : EMPTY;

const strings = (field: number, values: unknown): Bytes =>
  Array.isArray(values) ? Buffer.concat(values.map((v) => string(field, v))) : EMPTY;

const bool = (field: number, value: unknown): Bytes =>
  value === true ? Buffer.concat([key(field, WIRE_VARINT), varint(1)]) : EMPTY;

const int64 = (field: number, value: unknown): Bytes =>
  typeof value === 'number' && Number.isInteger(value) && value !== 0
    ? Buffer.concat([key(field, WIRE_VARINT), varint(value)])
    : EMPTY;

function double(field: number, value: unknown): Bytes {
  if (typeof value !== 'number' || value === 0) return EMPTY;
  const bytes = Buffer.alloc(8);
  bytes.writeDoubleLE(value);
  return Buffer.concat([key(field, WIRE_64BIT), bytes]);
}

const message = (field: number, body: Bytes | undefined): Bytes =>
  body === undefined ? EMPTY : delimited(field, body);

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `Any`: a value as YAML text (field 2), as gnostic keeps values it has no message for. */
const any = (value: unknown): Bytes => string(2, stringifyYaml(value));

/** `NamedAny` entries for the `x-` keys of an object: vendor extensions. */
const vendorExtensions = (field: number, object: Json): Bytes =>
  Buffer.concat(
    Object.entries(object)
      .filter(([name]) => name.startsWith('x-'))
      .map(([name, value]) => delimited(field, Buffer.concat([string(1, name), message(2, any(value))]))),
  );

/** `Schema` (JSON Schema as Swagger 2.0 has it). */
export function encodeSchema(schema: Json): Bytes {
  const additional = schema.additionalProperties;
  const items = schema.items;
  return Buffer.concat([
    string(1, schema.$ref),
    string(2, schema.format),
    string(3, schema.title),
    string(4, schema.description),
    schema.default !== undefined ? message(5, any(schema.default)) : EMPTY,
    double(6, schema.multipleOf),
    double(7, schema.maximum),
    bool(8, schema.exclusiveMaximum),
    double(9, schema.minimum),
    bool(10, schema.exclusiveMinimum),
    int64(11, schema.maxLength),
    int64(12, schema.minLength),
    string(13, schema.pattern),
    int64(14, schema.maxItems),
    int64(15, schema.minItems),
    bool(16, schema.uniqueItems),
    int64(17, schema.maxProperties),
    int64(18, schema.minProperties),
    strings(19, schema.required),
    Array.isArray(schema.enum) ? Buffer.concat(schema.enum.map((v) => message(20, any(v)))) : EMPTY,
    isObject(additional)
      ? message(21, message(1, encodeSchema(additional)))
      : typeof additional === 'boolean'
        ? message(21, Buffer.concat([key(2, WIRE_VARINT), varint(additional ? 1 : 0)]))
        : EMPTY,
    typeof schema.type === 'string' ? message(22, string(1, schema.type)) : EMPTY,
    isObject(items)
      ? message(23, message(1, encodeSchema(items)))
      : Array.isArray(items)
        ? message(23, Buffer.concat(items.filter(isObject).map((item) => message(1, encodeSchema(item)))))
        : EMPTY,
    Array.isArray(schema.allOf)
      ? Buffer.concat(schema.allOf.filter(isObject).map((s) => message(24, encodeSchema(s))))
      : EMPTY,
    isObject(schema.properties) ? message(25, namedSchemas(schema.properties)) : EMPTY,
    bool(27, schema.readOnly),
    schema.example !== undefined ? message(30, any(schema.example)) : EMPTY,
    vendorExtensions(31, schema),
  ]);
}

/** `Properties` / `Definitions`: repeated `NamedSchema` in field 1. */
const namedSchemas = (schemas: Json): Bytes =>
  Buffer.concat(
    Object.entries(schemas)
      .filter((entry): entry is [string, Json] => isObject(entry[1]))
      .map(([name, schema]) =>
        message(1, Buffer.concat([string(1, name), message(2, encodeSchema(schema))])),
      ),
  );

/** `NonBodyParameter`: a query, path or header parameter (each message numbers its fields apart). */
function nonBodyParameter(parameter: Json): Bytes {
  switch (parameter.in) {
    case 'query': {
      // QueryParameterSubSchema: type 6, format 7, unique_items 20, vendor_extension 23.
      const body = Buffer.concat([
        bool(1, parameter.required),
        string(2, parameter.in),
        string(3, parameter.description),
        string(4, parameter.name),
        string(6, parameter.type),
        string(7, parameter.format),
        bool(20, parameter.uniqueItems),
        vendorExtensions(23, parameter),
      ]);
      return message(3, body);
    }
    case 'path':
    case 'header': {
      // PathParameterSubSchema and HeaderParameterSubSchema: type 5, format 6, unique_items 19,
      // vendor_extension 22.
      const body = Buffer.concat([
        bool(1, parameter.required),
        string(2, parameter.in),
        string(3, parameter.description),
        string(4, parameter.name),
        string(5, parameter.type),
        string(6, parameter.format),
        bool(19, parameter.uniqueItems),
        vendorExtensions(22, parameter),
      ]);
      return message(parameter.in === 'path' ? 4 : 1, body);
    }
    default:
      return EMPTY;
  }
}

/** `ParametersItem` > `Parameter` (a body parameter, or one of the others). */
function parameterItem(parameter: Json): Bytes {
  if (parameter.in === 'body') {
    const body = Buffer.concat([
      string(1, parameter.description),
      string(2, parameter.name),
      string(3, parameter.in),
      bool(4, parameter.required),
      isObject(parameter.schema) ? message(5, encodeSchema(parameter.schema)) : EMPTY,
      vendorExtensions(6, parameter),
    ]);
    return message(1, message(1, body));
  }
  return message(1, message(2, nonBodyParameter(parameter)));
}

const parameterItems = (field: number, parameters: unknown): Bytes =>
  Array.isArray(parameters)
    ? Buffer.concat(parameters.filter(isObject).map((p) => message(field, parameterItem(p))))
    : EMPTY;

/** `Responses`: repeated `NamedResponseValue` (field 1) > `ResponseValue` > `Response`. */
function responses(answers: unknown): Bytes | undefined {
  if (!isObject(answers)) return undefined;
  return Buffer.concat(
    Object.entries(answers)
      .filter((entry): entry is [string, Json] => isObject(entry[1]))
      .map(([code, answer]) => {
        const response = Buffer.concat([
          string(1, answer.description),
          isObject(answer.schema) ? message(2, message(1, encodeSchema(answer.schema))) : EMPTY,
          vendorExtensions(5, answer),
        ]);
        return message(1, Buffer.concat([string(1, code), message(2, message(1, response))]));
      }),
  );
}

/** `Operation`. */
function operation(op: Json): Bytes {
  return Buffer.concat([
    strings(1, op.tags),
    string(2, op.summary),
    string(3, op.description),
    string(5, op.operationId),
    strings(6, op.produces),
    strings(7, op.consumes),
    parameterItems(8, op.parameters),
    message(9, responses(op.responses)),
    strings(10, op.schemes),
    bool(11, op.deprecated),
    vendorExtensions(13, op),
  ]);
}

const PATH_ITEM_METHODS: ReadonlyArray<readonly [string, number]> = [
  ['get', 2],
  ['put', 3],
  ['post', 4],
  ['delete', 5],
  ['options', 6],
  ['head', 7],
  ['patch', 8],
];

/** `PathItem`. */
function pathItem(item: Json): Bytes {
  return Buffer.concat([
    string(1, item.$ref),
    ...PATH_ITEM_METHODS.map(([method, field]) =>
      isObject(item[method]) ? message(field, operation(item[method] as Json)) : EMPTY,
    ),
    parameterItems(9, item.parameters),
    vendorExtensions(10, item),
  ]);
}

/** `Document`, from the Swagger 2.0 JSON document. */
export function openApiV2Protobuf(document: Json): Buffer {
  const info = isObject(document.info) ? document.info : {};
  const paths = isObject(document.paths) ? document.paths : {};
  return Buffer.concat([
    string(1, document.swagger),
    message(2, Buffer.concat([string(1, info.title), string(2, info.version), string(3, info.description)])),
    message(
      8,
      Buffer.concat(
        Object.entries(paths)
          .filter((entry): entry is [string, Json] => isObject(entry[1]))
          .map(([path, item]) => message(2, Buffer.concat([string(1, path), message(2, pathItem(item))]))),
      ),
    ),
    isObject(document.definitions) ? message(9, namedSchemas(document.definitions)) : EMPTY,
  ]);
}
