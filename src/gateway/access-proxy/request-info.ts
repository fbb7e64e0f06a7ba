import { badRequest, type StatusError, sanitize } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { isWatch } from '../paths.ts';

/**
 * What a request through the access proxy asks of the target's API server, read exactly as
 * kube-apiserver reads it: a port of `RequestInfoFactory.NewRequestInfo`
 * (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`, API prefixes `api` (groupless) and
 * `apis`), and of the parts of `url.ParseQuery`, `metav1.ListOptions` decoding and
 * `fields.ParseSelector` it depends on. The key's scope is checked against this reading before
 * the request leaves the platform, so it must be the target's own reading, byte for byte: a
 * request the target reads as another verb, namespace or name than we authorized would slip
 * past the scope.
 *
 * - `/api/<v>/...` and `/apis/<group>/<v>/...` with at least one more segment are resource
 *   requests; everything else (`/api`, `/api/v1`, `/apis/<g>/<v>`, `/version`, `/healthz`, ...)
 *   is a non-resource request whose verb is the lower-cased method.
 * - `watch` and `proxy` right after the version are the legacy verb-in-path forms
 *   (`/api/v1/watch/namespaces/ns/pods`); `proxy` takes no subresource.
 * - `namespaces/<ns>` is the resource `namespaces` named `<ns>` in the namespace `<ns>` (and its
 *   subresources `status` and `finalize`); `namespaces/<ns>/<resource>/...` is `<resource>` in `<ns>`.
 * - A collection GET is `list`, or `watch` when the `watch` parameter is true
 *   (`Convert_Slice_string_To_bool`); a `fieldSelector` requiring `metadata.name=<n>` names the
 *   list or watch `<n>`, unless the list options do not decode (then the target answers 400).
 * - A collection DELETE is `deletecollection`; a method kube-apiserver has no verb for reads as `''`.
 *
 * One difference, on the safe side: kube-apiserver's decoding of the list options also fails
 * for a `labelSelector` it cannot parse, and then reads no name from the field selector; this
 * port does not parse label selectors, so it may read a name the target would not. The target
 * then refuses that very request (its list handler decodes the same options: 400) and nothing is
 * read under the name we authorized.
 */

/** A request in Kubernetes' authorizer terms, before the gateway adds where it goes. */
export type RequestInfo = Omit<
  RequestAttributes,
  'target' | 'cluster' | 'project' | 'space' | 'virtualCluster' | 'requiredRole'
>;

const API_PREFIXES: ReadonlySet<string> = new Set(['api', 'apis']);
const GROUPLESS_API_PREFIXES: ReadonlySet<string> = new Set(['api']);
/** Verbs spelled in the path, right after the version (`specialVerbs`). */
const PATH_VERBS: ReadonlySet<string> = new Set(['proxy', 'watch']);
/** Path verbs whose paths have no subresource (`specialVerbsNoSubresources`). */
const PATH_VERBS_WITHOUT_SUBRESOURCES: ReadonlySet<string> = new Set(['proxy']);
/** What may follow `namespaces/<ns>` as a subresource of the namespace, not a resource in it. */
const NAMESPACE_SUBRESOURCES: ReadonlySet<string> = new Set(['status', 'finalize']);

const METHOD_VERBS: ReadonlyMap<string, string> = new Map([
  ['POST', 'create'],
  ['GET', 'get'],
  ['HEAD', 'get'],
  ['PUT', 'update'],
  ['PATCH', 'patch'],
  ['DELETE', 'delete'],
]);

/**
 * Reads a request. `path` is the request's path as the target's Go server decodes it
 * (`req.URL.Path`: percent-decoded); `query` as {@link kubernetesQuery} reads it. Returns a 400
 * where kube-apiserver fails to read the request at all (a path verb with nothing after it,
 * which it answers with a 500).
 */
export function requestInfo(method: string, path: string, query: URLSearchParams): RequestInfo | StatusError {
  const { target: _target, ...nonResource } = nonResourceRequest(method.toLowerCase(), path);
  let parts = splitPath(path);
  const prefix = parts[0] ?? '';
  if (parts.length < 3 || !API_PREFIXES.has(prefix)) return nonResource;
  parts = parts.slice(1);
  let apiGroup = '';
  if (!GROUPLESS_API_PREFIXES.has(prefix)) {
    if (parts.length < 3) return nonResource;
    apiGroup = parts[0] ?? '';
    parts = parts.slice(1);
  }
  parts = parts.slice(1); // the version
  let verb: string;
  const first = parts[0] ?? '';
  if (PATH_VERBS.has(first)) {
    if (parts.length < 2) {
      return badRequest(`unable to determine kind and namespace from url ${sanitize(path)}`);
    }
    verb = first;
    parts = parts.slice(1);
  } else {
    verb = METHOD_VERBS.get(method) ?? '';
  }
  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1] ?? '';
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2] ?? '')) parts = parts.slice(2);
  }
  const [resource = '', pathName = '', pathSubresource = ''] = parts;
  const subresource = PATH_VERBS_WITHOUT_SUBRESOURCES.has(verb) ? '' : pathSubresource;
  let name = pathName;
  if (name === '' && verb === 'get') ({ verb, name } = collectionRead(query));
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return { ...nonResource, verb, resourceRequest: true, apiGroup, resource, subresource, name, namespace };
}

/** `splitPath`: the segments between the first and last non-slash, empty segments inside kept. */
function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

/**
 * A collection GET's verb, and its name when a field selector names one: kube-apiserver decodes
 * the list options; when they do not decode it falls back to the raw `watch` parameter and no name.
 */
function collectionRead(query: URLSearchParams): { verb: string; name: string } {
  const selector = query.get('fieldSelector');
  const fields = selector === null ? [] : parseFieldSelector(selector);
  if (fields === undefined || !listIntegersDecode(query)) {
    return { verb: isWatch(query) ? 'watch' : 'list', name: '' };
  }
  const name = fields.find((term) => term.operator === '=' && term.field === 'metadata.name')?.value;
  return {
    verb: goBool(query.get('watch')) ? 'watch' : 'list',
    name: name !== undefined && isValidPathSegmentName(name) ? name : '',
  };
}

/**
 * `Convert_Slice_string_To_bool`: absent, `0` and `false` (Go's `strings.EqualFold`, under which
 * `ſ` (U+017F) is an `s`) are false, every other value (the empty one included) true.
 */
function goBool(value: string | null): boolean {
  return value !== null && value !== '0' && !/^[fF][aA][lL][sSſ][eE]$/u.test(value);
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Whether the integer list options (`limit`, `timeoutSeconds`) decode: Go's `strconv.ParseInt(v, 10, 64)`. */
function listIntegersDecode(query: URLSearchParams): boolean {
  return ['limit', 'timeoutSeconds'].every((key) => {
    const value = query.get(key);
    if (value === null) return true;
    if (!/^[+-]?[0-9]+$/.test(value)) return false;
    const number = BigInt(value);
    return number >= INT64_MIN && number <= INT64_MAX;
  });
}

/** `path.IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`. */
function isValidPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

/** One term of a field selector; `=` stands for both `=` and `==`. */
export interface FieldSelectorTerm {
  readonly field: string;
  readonly operator: '=' | '!=';
  readonly value: string;
}

/**
 * `fields.ParseSelector`: terms split at unescaped commas and sorted (Go's byte order, which
 * decides which of several `metadata.name` terms `RequiresExactMatch` finds first), each split at
 * its first `!=`, `==` or `=`, the value unescaped (`\\`, `\,`, `\=`). Undefined when it fails.
 */
export function parseFieldSelector(selector: string): FieldSelectorTerm[] | undefined {
  const terms = splitTerms(selector).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const parsed: FieldSelectorTerm[] = [];
  for (const term of terms) {
    if (term === '') continue;
    const match = /!=|==|=/.exec(term);
    if (!match) return undefined;
    const value = unescapeFieldValue(term.slice(match.index + match[0].length));
    if (value === undefined) return undefined;
    parsed.push({ field: term.slice(0, match.index), operator: match[0] === '!=' ? '!=' : '=', value });
  }
  return parsed;
}

function splitTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let escaped = false;
  for (let index = 0; index < selector.length; index++) {
    const char = selector[index];
    if (escaped) escaped = false;
    else if (char === '\\') escaped = true;
    else if (char === ',') {
      terms.push(selector.slice(start, index));
      start = index + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

/** `fields.UnescapeValue`: undefined for an unknown escape, a trailing `\`, or an unescaped `,` or `=`. */
function unescapeFieldValue(value: string): string | undefined {
  let unescaped = '';
  let escaped = false;
  for (const char of value) {
    if (escaped) {
      if (char !== '\\' && char !== ',' && char !== '=') return undefined;
      unescaped += char;
      escaped = false;
    } else if (char === '\\') escaped = true;
    else if (char === ',' || char === '=') return undefined;
    else unescaped += char;
  }
  return escaped ? undefined : unescaped;
}

/** Go's default `urlmaxqueryparams`: a query with more parameters reads as no parameters at all. */
const MAX_QUERY_PARAMETERS = 10_000;

/** Go keeps a byte-order mark: `ignoreBOM` keeps it in the text instead of dropping it. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The query as the target's Go server reads it (`url.ParseQuery`), or a 400 for a query Go
 * would read differently from what a WHATWG parser reads, or only in part: a pair holding `;`
 * or a malformed `%` escape (Go drops that pair), more than 10,000 parameters (Go reads none),
 * an escape that is not UTF-8 (Go keeps the raw bytes), a character that is not printable ASCII
 * (a request line holds none). `raw` is the query without its `?`.
 * Such a query is refused rather than read, as the proxy forwards it unchanged: the target
 * must read the very parameters the scope was checked against.
 */
export function kubernetesQuery(raw: string): URLSearchParams | StatusError {
  const query = new URLSearchParams();
  if (raw === '') return query;
  if (/[^\x21-\x7e]/.test(raw)) return badRequest('the query holds characters that are not printable ASCII');
  const pairs = raw.split('&');
  if (pairs.length > MAX_QUERY_PARAMETERS) {
    return badRequest(`the query has more than ${MAX_QUERY_PARAMETERS} parameters`);
  }
  for (const pair of pairs) {
    if (pair.includes(';')) return badRequest('the query holds a ";", which is no parameter separator');
    if (pair === '') continue;
    const separator = pair.indexOf('=');
    const key = queryUnescape(separator < 0 ? pair : pair.slice(0, separator));
    const value = queryUnescape(separator < 0 ? '' : pair.slice(separator + 1));
    if (key === undefined || value === undefined) {
      return badRequest('the query is not valid percent-encoded UTF-8');
    }
    query.append(key, value);
  }
  return query;
}

/** `url.QueryUnescape` (`+` is a space), undefined for a malformed escape or bytes that are not UTF-8. */
function queryUnescape(text: string): string | undefined {
  if (/%(?![0-9a-fA-F]{2})/.test(text)) return undefined;
  const bytes = Buffer.from(text.replaceAll('+', ' '), 'latin1');
  const decoded: number[] = [];
  for (let index = 0; index < bytes.length; index++) {
    const byte = bytes[index] ?? 0;
    if (byte === 0x25) {
      decoded.push(Number.parseInt(bytes.subarray(index + 1, index + 3).toString('latin1'), 16));
      index += 2;
    } else decoded.push(byte);
  }
  try {
    return strictUtf8.decode(Uint8Array.from(decoded));
  } catch {
    return undefined;
  }
}
