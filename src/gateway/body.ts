import type { IncomingHttpHeaders } from 'node:http';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { GROUP_VERSION } from '../api/meta.ts';
import {
  badRequest,
  notAcceptable,
  requestEntityTooLarge,
  StatusError,
  sanitize,
  unsupportedMediaType,
} from '../api/status.ts';
import { isJsonObject, ownValue } from '../runtime/json.ts';

/**
 * Request and response bodies, pure: media types, YAML and JSON decoding, JSON patch checks,
 * content negotiation. Errors never quote the body (it may hold secrets), only where it broke.
 */

/** kube-apiserver's request body limit. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;
/** kube-apiserver refuses JSON patches with more operations than this. */
export const MAX_PATCH_OPERATIONS = 10_000;

export type PatchType = 'json' | 'merge' | 'apply';

/** The media type without parameters, lower case. */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

const JSON_TYPES = new Set(['application/json']);
const YAML_TYPES = new Set(['application/yaml', 'application/x-yaml', 'text/yaml']);

export const PATCH_TYPES: Readonly<Record<string, PatchType>> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/apply-patch+yaml': 'apply',
};

function decodeUtf8(body: Uint8Array): string | StatusError {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return badRequest('the request body is not valid UTF-8');
  }
}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const where = err instanceof SyntaxError ? err.message.replace(/"[^"]*"/g, '"..."').slice(0, 120) : '';
    return badRequest(`the request body is not valid JSON${where ? `: ${where}` : ''}`);
  }
}

function parseYamlText(text: string): unknown {
  try {
    const value = parseYaml(text, { prettyErrors: false, uniqueKeys: true, maxAliasCount: 100 }) as unknown;
    // `a: &a [*a]` parses to a value that contains itself; like go-yaml, refuse it.
    if (containsItself(value))
      return badRequest('the request body is not valid YAML: an anchor contains itself');
    return value;
  } catch (err) {
    const position =
      typeof err === 'object' && err !== null && 'linePos' in err
        ? (err as { linePos?: { line: number; col: number }[] }).linePos?.[0]
        : undefined;
    const where = position ? ` at line ${position.line}, column ${position.col}` : '';
    return badRequest(`the request body is not valid YAML${where}`);
  }
}

function containsItself(value: unknown, ancestors = new Set<object>()): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (ancestors.has(value)) return true;
  ancestors.add(value);
  const children = Array.isArray(value) ? value : Object.values(value);
  const found = children.some((child) => containsItself(child, ancestors));
  ancestors.delete(value);
  return found;
}

/** Decodes a JSON or YAML document (JSON is read as JSON, everything else as YAML). */
export function decodeDocument(body: Uint8Array, type: 'json' | 'yaml'): unknown {
  const text = decodeUtf8(body);
  if (text instanceof StatusError) return text;
  if (text.trim() === '') return badRequest('the request body is empty');
  return type === 'json' ? parseJsonText(text) : parseYamlText(text);
}

/**
 * The object of a create or update body (`application/json` or `application/yaml`); 415 for
 * other media types, 400 for anything that is not one object.
 */
export function parseObjectBody(
  body: Uint8Array,
  contentType: string | undefined,
): Record<string, unknown> | StatusError {
  const type = mediaType(contentType);
  // No content type at all reads as JSON, as kube-apiserver reads it (its first media type):
  // `kubectl create --raw -f` sends none.
  const format = type === '' || JSON_TYPES.has(type) ? 'json' : YAML_TYPES.has(type) ? 'yaml' : undefined;
  if (!format) return unsupportedMediaType(contentType);
  const value = decodeDocument(body, format);
  if (value instanceof StatusError) return value;
  if (!isJsonObject(value)) return badRequest('the request body must be one object');
  return value;
}

const PATCH_OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

/** Checks an RFC 6902 document: an array of operations with valid `op`, `path`, `from` and `value`. */
export function checkJsonPatch(value: unknown): StatusError | undefined {
  if (!Array.isArray(value)) return badRequest('a JSON patch must be an array of operations');
  if (value.length > MAX_PATCH_OPERATIONS) {
    return new StatusError(
      413,
      'RequestEntityTooLarge',
      `a JSON patch may have at most ${MAX_PATCH_OPERATIONS} operations`,
    );
  }
  for (const [index, operation] of value.entries()) {
    const at = `operation ${index}`;
    if (!isJsonObject(operation)) return badRequest(`${at} of the JSON patch is not an object`);
    const { op, path } = operation;
    if (typeof op !== 'string' || !PATCH_OPS.has(op)) {
      return badRequest(`${at} of the JSON patch has no valid "op" (add, remove, replace, move, copy, test)`);
    }
    if (typeof path !== 'string' || !isJsonPointer(path)) {
      return badRequest(`${at} of the JSON patch has no valid "path" (a JSON pointer)`);
    }
    if (
      (op === 'move' || op === 'copy') &&
      (typeof operation.from !== 'string' || !isJsonPointer(operation.from))
    ) {
      return badRequest(`${at} of the JSON patch has no valid "from" (a JSON pointer)`);
    }
    if ((op === 'add' || op === 'replace' || op === 'test') && !('value' in operation)) {
      return badRequest(`${at} of the JSON patch has no "value"`);
    }
  }
  return undefined;
}

/** RFC 6901: empty, or `/`-separated tokens where `~` is only followed by `0` or `1`. */
export function isJsonPointer(text: string): boolean {
  return text === '' || (text.startsWith('/') && !/~(?![01])/.test(text));
}

export interface ParsedPatch {
  readonly type: PatchType;
  /** The patch as a value (operations for JSON patch, an object otherwise). */
  readonly value: unknown;
}

/** Decodes and checks a PATCH body by its media type. */
export function parsePatchBody(body: Uint8Array, contentType: string | undefined): ParsedPatch | StatusError {
  // Own keys only: a media type `constructor` or `toString` is no patch type.
  const type = ownValue(PATCH_TYPES, mediaType(contentType));
  if (!type) return unsupportedMediaType(contentType);
  const value = decodeDocument(body, type === 'apply' ? 'yaml' : 'json');
  if (value instanceof StatusError) return value;
  if (type === 'json') {
    const problem = checkJsonPatch(value);
    return problem ?? { type, value };
  }
  if (!isJsonObject(value))
    return badRequest(`a ${type === 'merge' ? 'merge' : 'apply'} patch must be an object`);
  return { type, value };
}

export type ResponseFormat = 'json' | 'yaml';

export interface Negotiated {
  readonly format: ResponseFormat;
  /**
   * The Accept header to send upstream when the client's JSON flavour matters (tables for
   * `kubectl get`); plain JSON otherwise.
   */
  readonly upstreamAccept: string;
}

interface AcceptEntry {
  readonly type: string;
  readonly full: string;
  readonly q: number;
}

function parseAccept(header: string): AcceptEntry[] {
  return header
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part, index) => {
      const params = part.split(';').map((p) => p.trim());
      const type = (params[0] ?? '').toLowerCase();
      const qParam = params.find((p) => p.toLowerCase().startsWith('q='));
      const q = qParam ? Number(qParam.slice(2)) : 1;
      return { type, full: part, q: Number.isFinite(q) ? q : 0, index };
    })
    .filter((entry) => entry.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
}

/**
 * What to answer in: JSON (the default, also for `*\/*` and `application/*`) or YAML
 * (`application/yaml`); 406 when the client accepts neither. A JSON entry with parameters (a
 * `Table` request) is passed upstream as is, with plain JSON after it as a fallback.
 */
export function negotiate(accept: string | undefined): Negotiated | StatusError {
  if (accept === undefined || accept.trim() === '')
    return { format: 'json', upstreamAccept: 'application/json' };
  const entries = parseAccept(accept);
  const jsonFlavours = entries
    .filter((entry) => entry.type === 'application/json')
    .map((entry) => entry.full);
  for (const entry of entries) {
    if (entry.type === 'application/json') {
      const flavours = jsonFlavours.includes('application/json')
        ? jsonFlavours
        : [...jsonFlavours, 'application/json'];
      return { format: 'json', upstreamAccept: flavours.join(',') };
    }
    if (YAML_TYPES.has(entry.type)) return { format: 'yaml', upstreamAccept: 'application/json' };
    if (entry.type === '*/*' || entry.type === 'application/*') {
      return { format: 'json', upstreamAccept: 'application/json' };
    }
  }
  return notAcceptable('only application/json and application/yaml responses are served');
}

/** Encodes a response value in the negotiated format. */
export function encodeBody(value: unknown, format: ResponseFormat): { body: string; contentType: string } {
  return format === 'yaml'
    ? { body: stringifyYaml(value, { aliasDuplicateObjects: false }), contentType: 'application/yaml' }
    : { body: JSON.stringify(value), contentType: 'application/json' };
}

/** A decoded request body: an object (create, update, delete options) or a patch. */
export type RequestBody = Record<string, unknown> | ParsedPatch;

/**
 * Decodes the body of a resource request by its verb (a patch for `patch`, an object otherwise).
 * The object of a create or update must be of the path's group/version ({@link otherApiVersion}).
 */
export function decodeRequestBody(
  bytes: Uint8Array,
  contentType: string | undefined,
  verb: string,
): RequestBody | StatusError {
  if (verb === 'patch') return parsePatchBody(bytes, contentType);
  const object = parseObjectBody(bytes, contentType ?? (verb === 'delete' ? 'application/json' : undefined));
  if (object instanceof StatusError || (verb !== 'create' && verb !== 'update')) return object;
  return otherApiVersion(object) ?? object;
}

/**
 * kube-apiserver's answer (400 BadRequest, its message) to an object naming an `apiVersion` other
 * than the path's `management.platform/v1`, the only version served: the same for the kinds the
 * gateway serves itself as for those the apiserver stores. An object without one is read as the
 * path's (the path names the kind).
 */
export function otherApiVersion(object: Record<string, unknown>): StatusError | undefined {
  const apiVersion = object.apiVersion;
  if (apiVersion === undefined || apiVersion === '' || apiVersion === GROUP_VERSION) return undefined;
  const named = typeof apiVersion === 'string' ? sanitize(apiVersion) : typeof apiVersion;
  return badRequest(
    `the API version in the data (${named}) does not match the expected API version (${GROUP_VERSION})`,
  );
}

/** The Content-Type of a patch of this type. */
export function patchContentType(patch: ParsedPatch): string {
  return patch.type === 'json'
    ? 'application/json-patch+json'
    : patch.type === 'merge'
      ? 'application/merge-patch+json'
      : 'application/apply-patch+yaml';
}

const FORWARDED_QUERY = /^[\x21-\x7e]*$/;

/** The query of a request as it is passed on (kube-apiserver validates it); re-encoded when it holds other bytes. */
export function forwardedSearch(search: string): string {
  if (search === '' || search === '?') return '';
  return FORWARDED_QUERY.test(search) ? search : `?${new URLSearchParams(search.slice(1)).toString()}`;
}

/** Reads a request body, at most `limit` bytes (413 beyond). */
export async function readRequestBody(stream: AsyncIterable<Buffer>, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.length;
    if (size > limit) throw requestEntityTooLarge(limit);
    chunks.push(chunk);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/** Verbs whose body is always decoded (the object or patch to write). */
const WRITE_VERBS = new Set(['create', 'update', 'patch']);

/** Whether the request says it has a body (a length above 0, or chunked). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  if (length !== undefined) return length !== '0';
  return headers['transfer-encoding'] !== undefined;
}

/**
 * Whether a request of `verb` to a management API resource has its body decoded before dispatch
 * (for the proxy, the endpoint and the audit log): writes always, deletes when they carry
 * options; reads never.
 */
export function decodesBody(verb: string, bytes: Uint8Array): boolean {
  return WRITE_VERBS.has(verb) || ((verb === 'delete' || verb === 'deletecollection') && bytes.length > 0);
}
