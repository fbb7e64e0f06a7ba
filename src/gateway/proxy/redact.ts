import { Transform, type TransformCallback } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { LAST_APPLIED_ANNOTATION, lastAppliedWithoutKey } from '../../api/ownedaccesskey.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { isJsonObject } from '../../runtime/json.ts';

/**
 * What never leaves the platform in an answer, whatever shape the answer has: an object, a list,
 * a `Table` (with full or partial objects), a watch event, a stream of watch events (however the
 * request spelled `watch`), pretty-printed or compact. Applied to every answer about
 * `ownedaccesskeys`, proxied or made by the gateway:
 *
 * - `spec.key` (a plaintext key never is stored, but a stray one must not leave either) and a
 *   plaintext key in `kubectl apply`'s last-applied annotation;
 * - `spec.identity.connectorData` (the connector's data for later requests, spec: "never shared
 *   with end users");
 * - the OIDC login tokens `spec.oidcLogin.idToken`, `accessToken`, `refreshToken`.
 *
 * An answer that cannot be read as JSON documents is never passed on unredacted: the stream is
 * cut ({@link RedactingStream}) or the answer refused ({@link redactDocuments} throws).
 */

/** Applied to each JSON document of an answer. */
export type Redaction = (document: unknown) => unknown;

/** An answer that could not be redacted (not JSON, or an incomplete document). */
export class UnredactableAnswer extends Error {
  override readonly name = 'UnredactableAnswer';
}

/** The redaction for answers about `attributes`' resource, if it needs one. */
export function redactionFor(attributes: Pick<RequestAttributes, 'resource'>): Redaction | undefined {
  return attributes.resource === 'ownedaccesskeys' ? redactAccessKeys : undefined;
}

/** One access key object without what never leaves. */
export function redactAccessKey<T>(key: T): T {
  if (!isJsonObject(key)) return key;
  const metadata = withoutAppliedKey(key.metadata);
  if (!isJsonObject(key.spec)) return metadata ? ({ ...key, metadata } as T) : key;
  const { key: _key, ...spec } = key.spec;
  if (isJsonObject(spec.identity) && 'connectorData' in spec.identity) {
    const { connectorData: _data, ...identity } = spec.identity;
    spec.identity = identity;
  }
  if (isJsonObject(spec.oidcLogin)) {
    const { idToken: _id, accessToken: _access, refreshToken: _refresh, ...kept } = spec.oidcLogin;
    spec.oidcLogin = kept;
  }
  return { ...key, ...(metadata ? { metadata } : {}), spec } as T;
}

/**
 * {@link redactAccessKey} over every object an answer about access keys holds: the object itself,
 * `items` of a list, `rows[].object` of a table, `object` of a watch event. Objects are taken for
 * keys by where they are, not by their `kind` (list items need not carry one).
 */
export function redactAccessKeys(value: unknown): unknown {
  if (!isJsonObject(value)) return value;
  if (Array.isArray(value.items)) return { ...value, items: value.items.map(redactAccessKeys) };
  if (Array.isArray(value.rows)) {
    return {
      ...value,
      rows: value.rows.map((row) =>
        isJsonObject(row) ? { ...row, object: redactAccessKeys(row.object) } : row,
      ),
    };
  }
  if (typeof value.type === 'string' && isJsonObject(value.object)) {
    return { ...value, object: redactAccessKeys(value.object) };
  }
  if (value.kind === 'Status') return value;
  return redactAccessKey(value);
}

/** Objects applied before admission cleaned the annotation may still hold a key in it. */
function withoutAppliedKey(metadata: unknown): Record<string, unknown> | undefined {
  if (!isJsonObject(metadata) || !isJsonObject(metadata.annotations)) return undefined;
  const applied = metadata.annotations[LAST_APPLIED_ANNOTATION];
  if (typeof applied !== 'string') return undefined;
  const cleaned = lastAppliedWithoutKey(applied);
  if (cleaned === applied) return undefined;
  const { [LAST_APPLIED_ANNOTATION]: _applied, ...annotations } = metadata.annotations;
  return {
    ...metadata,
    annotations: cleaned === undefined ? annotations : { ...annotations, [LAST_APPLIED_ANNOTATION]: cleaned },
  };
}

/**
 * Splits JSON text into its top-level documents (objects or arrays, any whitespace between and
 * inside them), incrementally: feed text, get the complete documents.
 */
export class JsonDocumentSplitter {
  private pending = '';
  private depth = 0;
  private inString = false;
  private escaped = false;

  /** The documents completed by `text`. Throws {@link UnredactableAnswer} on anything but documents. */
  push(text: string): string[] {
    const documents: string[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
      } else if (c === 0x22) {
        if (this.depth === 0) throw new UnredactableAnswer('a JSON scalar at the top level');
        this.inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        this.depth++;
      } else if (c === 0x7d || c === 0x5d) {
        this.depth--;
        if (this.depth < 0) throw new UnredactableAnswer('unbalanced JSON');
        if (this.depth === 0) {
          documents.push(this.pending + text.slice(start, i + 1));
          this.pending = '';
          start = i + 1;
        }
      } else if (this.depth === 0 && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) {
        throw new UnredactableAnswer('a JSON scalar at the top level');
      }
    }
    this.pending += text.slice(start);
    return documents;
  }

  /** Throws when text of an unfinished document is left. */
  end(): void {
    if (this.pending.trim() !== '' || this.depth !== 0)
      throw new UnredactableAnswer('an incomplete JSON document');
  }
}

function redactDocument(text: string, redaction: Redaction): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UnredactableAnswer('not JSON');
  }
  return redaction(value);
}

/**
 * A whole answer, redacted: its one document, or (a watch-shaped answer) the list of its
 * documents. Throws {@link UnredactableAnswer} when it is not JSON documents.
 */
export function redactDocuments(
  text: string,
  redaction: Redaction,
): { single: unknown } | { many: unknown[] } {
  const splitter = new JsonDocumentSplitter();
  const documents = splitter.push(text);
  splitter.end();
  if (documents.length === 0) throw new UnredactableAnswer('no JSON document');
  const values = documents.map((document) => redactDocument(document, redaction));
  return values.length === 1 ? { single: values[0] } : { many: values };
}

/**
 * A stream of JSON documents (watch events), each redacted and written as one line. Anything
 * that is not a document ends the stream with an error: nothing unredacted goes out.
 */
export class RedactingStream extends Transform {
  private readonly decoder = new StringDecoder('utf8');
  private readonly splitter = new JsonDocumentSplitter();

  constructor(private readonly redaction: Redaction) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      const documents = this.splitter.push(this.decoder.write(chunk));
      callback(
        null,
        documents.map((document) => `${JSON.stringify(redactDocument(document, this.redaction))}\n`).join(''),
      );
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      const documents = this.splitter.push(this.decoder.end());
      this.splitter.end();
      callback(
        null,
        documents.map((document) => `${JSON.stringify(redactDocument(document, this.redaction))}\n`).join(''),
      );
    } catch (error) {
      callback(error as Error);
    }
  }
}
