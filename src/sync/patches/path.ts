import { isJsonObject, type Json, type JsonObject, setOwnValue } from './merge-patch.ts';

/**
 * Patch paths: `spec.ports[0].port`, `metadata.annotations["a.b/c"]`, `metadata.labels['x']`,
 * `subsets[*].addresses.*.ip`, `spec.rules."a.b".0`.
 *
 * Grammar: segments separated by `.`; a segment is a bare word, a number (an index, or a key on a
 * map), `*` (every array element or map entry, anywhere, also last), or a key quoted with `"` or `'`
 * (inside quotes `\` escapes the next character). `[...]` holds a number, `*` or a quoted key, and
 * may follow a segment directly. Unlike the reference, single quotes are quote characters, a trailing
 * `.*` on a map is a wildcard, and a bracketed key never creates a missing key. The empty path (or
 * only blanks) names the whole object.
 */

export type PathSegment =
  | { readonly type: 'key'; readonly key: string }
  | { readonly type: 'index'; readonly index: number }
  | { readonly type: 'wildcard' };

/** A path to one existing value: map keys and array indexes. */
export type ConcretePath = readonly (string | number)[];

export class InvalidPatchPath extends Error {
  override readonly name = 'InvalidPatchPath';
  constructor(
    readonly path: string,
    readonly position: number,
    readonly reason: string,
  ) {
    super(`invalid path ${JSON.stringify(path)} at ${position}: ${reason}`);
  }
}

const INDEX = /^(0|[1-9][0-9]*)$/;

function classifyBare(word: string): PathSegment {
  if (word === '*') return { type: 'wildcard' };
  if (INDEX.test(word)) return { type: 'index', index: Number(word) };
  return { type: 'key', key: word };
}

/** A position in a path being parsed; each read advances it past what it read. */
class PathCursor {
  i = 0;
  constructor(
    readonly path: string,
    readonly text: string,
  ) {}

  fail(reason: string, at = this.i): never {
    throw new InvalidPatchPath(this.path, at, reason);
  }

  /** A quoted key (a backslash escapes the next character), from its opening quote. */
  readQuoted(): string {
    const { text } = this;
    const quote = text[this.i];
    const start = this.i;
    this.i++;
    let out = '';
    while (this.i < text.length && text[this.i] !== quote) {
      if (text[this.i] === '\\') {
        this.i++;
        if (this.i >= text.length) break;
      }
      out += text[this.i];
      this.i++;
    }
    if (this.i >= text.length) this.fail('unclosed quote', start);
    this.i++;
    return out;
  }

  /** A bracket, from its `[`: an index, `*` or a quoted key. */
  readBracket(): PathSegment {
    const { text } = this;
    const open = this.i;
    this.i++;
    const q = text[this.i];
    let segment: PathSegment;
    if (q === '"' || q === "'") {
      segment = { type: 'key', key: this.readQuoted() };
    } else {
      let content = '';
      while (this.i < text.length && text[this.i] !== ']') {
        if (text[this.i] === '[') this.fail('bracket inside bracket');
        content += text[this.i];
        this.i++;
      }
      if (this.i >= text.length) this.fail('unclosed bracket', open);
      if (content === '*') segment = { type: 'wildcard' };
      else if (INDEX.test(content)) segment = { type: 'index', index: Number(content) };
      else if (content === '') this.fail('empty brackets', open);
      else {
        this.fail(`bracket holds neither an index, "*" nor a quoted key: ${JSON.stringify(content)}`, open);
      }
    }
    if (text[this.i] !== ']') this.fail('unclosed bracket', open);
    this.i++;
    return segment;
  }

  /** A segment outside brackets: a quoted key, or a bare word up to the next `.`, `[`, `]` or quote. */
  readSegment(): PathSegment {
    const { text } = this;
    const c = text[this.i];
    if (c === '"' || c === "'") return { type: 'key', key: this.readQuoted() };
    let word = '';
    while (this.i < text.length && !'.[]"\''.includes(text[this.i]!)) {
      word += text[this.i];
      this.i++;
    }
    if (/\s/.test(word)) this.fail('whitespace in an unquoted segment');
    return classifyBare(word);
  }
}

export function parsePath(path: string): PathSegment[] {
  const text = path.trim();
  const segments: PathSegment[] = [];
  // The empty path names the whole object.
  if (text === '') return segments;
  const cursor = new PathCursor(path, text);
  // true after a segment: the next character must be `.`, `[` or the end.
  let afterSegment = false;
  let expectSegment = true;
  while (cursor.i < text.length) {
    const c = text[cursor.i]!;
    if (c === '.') {
      if (expectSegment) cursor.fail('empty segment');
      expectSegment = true;
      afterSegment = false;
      cursor.i++;
      continue;
    }
    if (c === '[') {
      if (expectSegment && segments.length > 0) cursor.fail('empty segment');
      segments.push(cursor.readBracket());
    } else {
      if (c === ']') cursor.fail('bracket close without bracket');
      if (afterSegment) cursor.fail('expected ".", "[" or the end');
      segments.push(cursor.readSegment());
    }
    afterSegment = true;
    expectSegment = false;
  }
  if (expectSegment) cursor.fail('empty segment');
  return segments;
}

const BARE_KEY = /^[^.[\]"'\\\s*]+$/;

function printKey(key: string): string {
  if (BARE_KEY.test(key) && !INDEX.test(key)) return key;
  return `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/** Canonical text of a path: bare words, bare indexes, `*`, other keys in double quotes. */
export function printPath(segments: readonly PathSegment[]): string {
  return segments
    .map((s) => (s.type === 'wildcard' ? '*' : s.type === 'index' ? String(s.index) : printKey(s.key)))
    .join('.');
}

/** Text of a concrete path (as `context.path`); numbers are array indexes. */
export function printConcretePath(path: ConcretePath): string {
  return path.map((s) => (typeof s === 'number' ? String(s) : printKey(s))).join('.');
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Every existing value the path names, in document order. An index segment also matches the key
 * of the same digits on a map. A missing key, an index out of range or a scalar in the way ends
 * that branch; no match at all is an empty list.
 */
export function expandPath(root: unknown, segments: readonly PathSegment[]): ConcretePath[] {
  let frontier: { value: unknown; path: (string | number)[] }[] = [{ value: root, path: [] }];
  for (const segment of segments) {
    const next: typeof frontier = [];
    for (const { value, path } of frontier) {
      if (Array.isArray(value)) {
        if (segment.type === 'wildcard') {
          for (let i = 0; i < value.length; i++) next.push({ value: value[i], path: [...path, i] });
        } else if (segment.type === 'index' && segment.index < value.length) {
          path.push(segment.index);
          next.push({ value: value[segment.index], path });
        }
      } else if (isMap(value)) {
        if (segment.type === 'wildcard') {
          for (const k of Object.keys(value)) next.push({ value: value[k], path: [...path, k] });
        } else {
          const key = segment.type === 'index' ? String(segment.index) : segment.key;
          if (Object.hasOwn(value, key)) {
            path.push(key);
            next.push({ value: value[key], path });
          }
        }
      }
    }
    frontier = next;
  }
  return frontier.map((f) => f.path);
}

export function getAt(root: unknown, path: ConcretePath): unknown {
  let current: unknown = root;
  for (const s of path) {
    if (Array.isArray(current) && typeof s === 'number') current = current[s];
    // Own keys only: `constructor` or `__proto__` on a map is a key or nothing, never inherited.
    else if (isMap(current) && typeof s === 'string')
      current = Object.hasOwn(current, s) ? current[s] : undefined;
    else return undefined;
  }
  return current;
}

function segmentCanName(segment: PathSegment, key: string): boolean {
  if (segment.type === 'wildcard') return true;
  if (segment.type === 'index') return String(segment.index) === key;
  return segment.key === key;
}

/**
 * Whether a non-empty path pattern can name the field, one of its ancestors or anything inside
 * it: a patch on it could change the field (used to refuse patches on restricted fields).
 */
export function pathMayReach(segments: readonly PathSegment[], field: readonly string[]): boolean {
  if (segments.length === 0) return false;
  const n = Math.min(segments.length, field.length);
  for (let i = 0; i < n; i++) if (!segmentCanName(segments[i]!, field[i]!)) return false;
  return true;
}

/**
 * Whether patches on two path patterns can run in either order with the same outcome: they never
 * name the same value, one never names a value inside the other's, and removing what one names
 * never moves what the other names (an array element removed shifts its successors). Decided on
 * the patterns alone, conservatively: true only where two keys differ before either path ends.
 */
export function pathsIndependent(a: readonly PathSegment[], b: readonly PathSegment[]): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.type === 'key' && y.type === 'key' && x.key !== y.key) return true;
    // Below this level both may be in the same element; at the last level of either, that element
    // itself may be replaced or removed.
    if (i === a.length - 1 || i === b.length - 1) return false;
  }
  return false;
}

/**
 * Writes one result. The whole object (the empty path) takes the result's top-level fields, as
 * the reference does (a field the result leaves out stays; `null` removes it).
 */
export function setAt(doc: JsonObject, path: ConcretePath, value: Json, isMergePatch: boolean): void {
  if (path.length === 0) {
    for (const [key, field] of Object.entries(value as JsonObject)) {
      if (field === null && !isMergePatch) delete doc[key];
      else setOwnValue(doc, key, field);
    }
    return;
  }
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent[last] = value;
  else if (isJsonObject(parent) && typeof last === 'string') setOwnValue(parent, last, value);
}

/** Removes one value; in a merge patch it is written as `null` (delete) instead. */
export function removeAt(doc: JsonObject, path: ConcretePath, isMergePatch: boolean): void {
  const parent = getAt(doc, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
  else if (isJsonObject(parent) && typeof last === 'string') {
    if (isMergePatch) setOwnValue(parent, last, null);
    else delete parent[last];
  }
}
