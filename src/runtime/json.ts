/**
 * JSON values as the apiserver sends and takes them, and RFC 7386 merge patches between them.
 * A key whose value is `undefined` is absent, as it is once serialized: `{a: undefined}` equals
 * `{}`, and a patch from `{a: 1}` to `{a: undefined}` deletes `a`. Arrays are atomic; `null` in a
 * patch deletes its key.
 *
 * Keys are data, never property names: a key such as `constructor`, `toString` or `__proto__` (a
 * valid ConfigMap data key) is an ordinary key. Reads go through {@link ownValue} (an absent key
 * is `undefined`, never a value inherited from `Object.prototype`), writes through
 * {@link setOwnValue} (assigning `__proto__` would set the prototype instead of the key).
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The own value of `key`; `undefined` when `record` has no such own key, whatever its prototype has. */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/**
 * Sets `key` as an own enumerable property, the way `JSON.parse` does: for `__proto__` too, which
 * an assignment would take as the object's prototype (JSON.stringify would then drop the key).
 */
export function setOwnValue<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__')
    Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
  else record[key] = value;
}

/**
 * An empty map for keys that others choose (labels, annotations, data): no prototype, so no key
 * is inherited and assigning `__proto__` sets an ordinary key; `JSON.stringify`, `Object.keys`
 * and spreads see it as any other object.
 */
export function emptyRecord<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/**
 * The paths (keys and indexes) of every key `__proto__` in a parsed document. Schemas refuse it:
 * zod drops such a key without a word (it assigns it, which sets a prototype), and no name in
 * our documents can be one.
 */
export function prototypeKeyPaths(
  value: unknown,
  at: readonly (string | number)[] = [],
): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((item, i) => prototypeKeyPaths(item, [...at, i]));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, child]) => [
    ...(key === '__proto__' ? [[...at, key]] : []),
    ...prototypeKeyPaths(child, [...at, key]),
  ]);
}

/**
 * A deep copy of a JSON value (objects as read from an apiserver). Several times faster than
 * structuredClone, which serializes through V8's value serializer.
 */
export function cloneJson<T extends Json | undefined>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => cloneJson(v)) as T;
  const out: JsonObject = {};
  for (const key of Object.keys(value)) {
    const v = (value as JsonObject)[key];
    if (v !== undefined) setOwnValue(out, key, cloneJson(v));
  }
  return out as T;
}

/** Whether two values are the same JSON document (keys holding `undefined` do not count). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a))
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  if (isJsonObject(a) && isJsonObject(b)) {
    const keysA = definedKeys(a);
    const keysB = definedKeys(b);
    return keysA.length === keysB.length && keysA.every((k) => deepEqual(a[k], ownValue(b, k)));
  }
  return false;
}

function definedKeys(o: Record<string, unknown>): string[] {
  return Object.entries(o).flatMap(([key, value]) => (value === undefined ? [] : [key]));
}

/**
 * The merge patch that turns `before` into `after` (both objects), `{}` when they are equal.
 * A `null` value in `after` cannot be expressed by a merge patch (it means delete), so such keys
 * are deletions too. Values in the patch are copies.
 */
export function mergePatchDiff(
  before: Readonly<Record<string, unknown>>,
  after: Readonly<Record<string, unknown>>,
): JsonObject {
  const patch: JsonObject = {};
  for (const [key, old] of Object.entries(before)) {
    const now = ownValue(after, key);
    const gone = now === undefined || now === null;
    if (gone && old !== undefined && old !== null) setOwnValue(patch, key, null);
  }
  for (const [key, value] of Object.entries(after)) {
    if (value === undefined || value === null) continue;
    const old = ownValue(before, key);
    if (isJsonObject(old) && isJsonObject(value)) {
      const nested = mergePatchDiff(old, value);
      if (Object.keys(nested).length > 0) setOwnValue(patch, key, nested);
    } else if (!deepEqual(old, value)) {
      setOwnValue(patch, key, cloneJson(value as Json));
    }
  }
  return patch;
}

/** RFC 7386 MergePatch(target, patch); returns a new value, never mutates its inputs. */
export function applyMergePatch(target: Json | undefined, patch: Json): Json {
  if (!isJsonObject(patch)) return cloneJson(patch);
  const result: JsonObject = isJsonObject(target) ? cloneJson(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else if (value !== undefined) setOwnValue(result, key, applyMergePatch(ownValue(result, key), value));
  }
  return result;
}
