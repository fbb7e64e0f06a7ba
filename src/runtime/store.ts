import type { KubernetesObject } from '@kubernetes/client-node';
import { objectKey } from './kube-client.ts';

/** Returns the index values an object is filed under (none to leave it out of the index). */
export type IndexFunc<T extends KubernetesObject = KubernetesObject> = (obj: T) => string[];

export const NamespaceIndex = 'namespace';
/** Every owner's uid (`metadata.ownerReferences[].uid`). */
export const OwnerUidIndex = 'owner-uid';
/** The uid of the controller owner (the reference with `controller: true`). */
export const ControllerOwnerUidIndex = 'controller-owner-uid';
/** `key=value` for every label. */
export const LabelIndex = 'label';

/**
 * Indexes many consumers want, each under its name above. None is kept unless asked for
 * (`{ [LabelIndex]: commonIndexers[LabelIndex] }`): an index costs an entry per object, the label
 * index a string per label per object, in every cache that never looks one up.
 */
export const commonIndexers: Readonly<Record<string, IndexFunc>> = {
  [NamespaceIndex]: (obj) => (obj.metadata?.namespace ? [obj.metadata.namespace] : []),
  [OwnerUidIndex]: (obj) => (obj.metadata?.ownerReferences ?? []).map((ref) => ref.uid),
  [ControllerOwnerUidIndex]: (obj) =>
    (obj.metadata?.ownerReferences ?? []).filter((ref) => ref.controller === true).map((ref) => ref.uid),
  [LabelIndex]: (obj) => Object.entries(obj.metadata?.labels ?? {}).map(([k, v]) => `${k}=${v}`),
};

const MAX_REMEMBERED_WRITES = 10_000;

/**
 * A thread-unsafe-by-design (single event loop) cache of objects keyed by `ns/name` with
 * secondary indexes maintained on every change, like client-go's `cache.Indexer`. Objects
 * returned are the cached instances: callers must not mutate them (copy with structuredClone).
 */
export class Store<T extends KubernetesObject = KubernetesObject> {
  private readonly items = new Map<string, T>();
  private readonly indexers = new Map<string, IndexFunc<T>>();
  /** index name -> index value -> the objects filed there (by key), and their list once asked for */
  private readonly indices = new Map<string, Map<string, IndexEntry<T>>>();
  /**
   * key -> an object we wrote, the resourceVersion the cache had then, and the versions of our
   * own earlier writes it was made over (see `recordWrite`).
   */
  private readonly writes = new Map<string, { from: string | undefined; via: string[]; written: T }>();
  private changes = 0;

  constructor(indexers: Record<string, IndexFunc<T>> = {}) {
    for (const [name, fn] of Object.entries(indexers)) this.addIndexer(name, fn);
  }

  /**
   * Adds an index; existing objects are indexed at once. Asking again for the same function under
   * the same name (two consumers of one shared cache) is a no-op; another function under a name
   * already taken is an error.
   */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    const existing = this.indexers.get(name);
    if (existing === fn) return;
    if (existing) throw new Error(`indexer ${name} already exists`);
    this.indexers.set(name, fn);
    const index = new Map<string, IndexEntry<T>>();
    this.indices.set(name, index);
    for (const [key, obj] of this.items) addToIndex(index, fn(obj), key, obj);
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  /**
   * A number that grows with every change of the content (an insert, a replacement, a removal):
   * what is derived from the cached objects stays valid while it is the same.
   */
  get version(): number {
    return this.changes;
  }

  /**
   * Remembers an object a controller just wrote (the apiserver's answer) over the cached version
   * `fromResourceVersion` (undefined: the cache did not have it). Until the watch brings the
   * cache past that version, `fresh` returns the written object: a reconcile that runs again
   * before its own writes came back (woken by the events of the first writes) sees them, and
   * does not write them again. Exact, not a guess about ordering: the memory counts only while
   * the cache still holds precisely the version the write replaced, or one of our own writes
   * that led to it (a finalizer, then the status: the watch bringing the finalizer's version
   * does not make the cache newer than the status written over it).
   */
  recordWrite(written: T, fromResourceVersion: string | undefined): void {
    const key = objectKey(written);
    const previous = this.writes.get(key);
    // A write over our own earlier write (a finalizer, then the status) replaced what the
    // cache still holds: the chain counts from there, through that earlier write.
    const chained =
      previous !== undefined &&
      fromResourceVersion !== undefined &&
      previous.written.metadata?.resourceVersion === fromResourceVersion;
    const from = chained ? previous.from : fromResourceVersion;
    const via = chained ? [...previous.via, fromResourceVersion] : [];
    this.writes.delete(key);
    this.writes.set(key, { from, via, written });
    // Bounded: a write whose watch event never reaches this store (it left the selector) must
    // not stay forever; the oldest go first.
    if (this.writes.size > MAX_REMEMBERED_WRITES) this.writes.delete(this.writes.keys().next().value!);
  }

  /** The cached object, or the one we wrote over it while the cache has not caught up. */
  fresh(key: string): T | undefined {
    const cached = this.items.get(key);
    const write = this.writes.get(key);
    if (!write) return cached;
    if (leadsTo(write, cached?.metadata?.resourceVersion)) return write.written;
    this.writes.delete(key);
    return cached;
  }

  getByName(namespace: string | undefined, name: string): T | undefined {
    return this.items.get(namespace ? `${namespace}/${name}` : name);
  }

  has(key: string): boolean {
    return this.items.has(key);
  }

  list(): T[] {
    return [...this.items.values()];
  }

  keys(): string[] {
    return [...this.items.keys()];
  }

  get size(): number {
    return this.items.size;
  }

  /**
   * Objects filed under `value` in index `indexName`. Unknown index names are an error. The list
   * is kept until the index changes there (every authenticated request looks one up): callers
   * must not change it.
   */
  byIndex(indexName: string, value: string): readonly T[] {
    const index = this.indices.get(indexName);
    if (!index) throw new Error(`no indexer named ${indexName}`);
    const entry = index.get(value);
    if (!entry) return NONE;
    entry.list ??= [...entry.objects.values()];
    return entry.list;
  }

  /** The index values currently present in `indexName`. */
  indexValues(indexName: string): string[] {
    const index = this.indices.get(indexName);
    if (!index) throw new Error(`no indexer named ${indexName}`);
    return [...index.keys()];
  }

  /** Inserts or replaces; returns the previous object. */
  upsert(obj: T): T | undefined {
    const key = objectKey(obj);
    this.forgetWrite(key, obj.metadata?.resourceVersion);
    const previous = this.items.get(key);
    if (previous) this.unindex(key, previous);
    this.items.set(key, obj);
    this.changes++;
    for (const [name, fn] of this.indexers) addToIndex(this.indices.get(name)!, fn(obj), key, obj);
    return previous;
  }

  /** Removes by key; returns the removed object. */
  delete(key: string): T | undefined {
    this.writes.delete(key);
    const previous = this.items.get(key);
    if (!previous) return undefined;
    this.unindex(key, previous);
    this.items.delete(key);
    this.changes++;
    return previous;
  }

  /** Replaces the whole content with `objects` (after a list) and returns what changed. */
  replace(objects: T[]): ReplaceDelta<T> {
    const delta = computeReplaceDelta(this.items, objects);
    for (const { object } of delta.deleted) this.delete(objectKey(object));
    for (const obj of delta.added) this.upsert(obj);
    for (const { newObject } of delta.updated) this.upsert(newObject);
    return delta;
  }

  /** A write is forgotten once the cache holds any version other than the one it replaced. */
  private forgetWrite(key: string, resourceVersion: string | undefined): void {
    const write = this.writes.get(key);
    if (write && !leadsTo(write, resourceVersion)) this.writes.delete(key);
  }

  private unindex(key: string, obj: T): void {
    for (const [name, fn] of this.indexers) {
      const index = this.indices.get(name)!;
      for (const value of fn(obj)) {
        const entry = index.get(value);
        if (!entry) continue;
        entry.objects.delete(key);
        entry.list = undefined;
        if (entry.objects.size === 0) index.delete(value);
      }
    }
  }
}

/** Whether the cache holding `resourceVersion` has not caught up with `write` yet: it holds what the write (or the chain of our writes that led to it) replaced. */
function leadsTo(
  write: { from: string | undefined; via: string[] },
  resourceVersion: string | undefined,
): boolean {
  return (
    resourceVersion === write.from || (resourceVersion !== undefined && write.via.includes(resourceVersion))
  );
}

interface IndexEntry<T> {
  readonly objects: Map<string, T>;
  list: T[] | undefined;
}

const NONE: readonly never[] = Object.freeze([]);

function addToIndex<T>(index: Map<string, IndexEntry<T>>, values: string[], key: string, obj: T): void {
  for (const value of values) {
    let entry = index.get(value);
    if (!entry) {
      entry = { objects: new Map(), list: undefined };
      index.set(value, entry);
    }
    entry.objects.set(key, obj);
    entry.list = undefined;
  }
}

export interface ReplaceDelta<T> {
  added: T[];
  /** Objects whose resourceVersion differs between the cache and the list. */
  updated: Array<{ oldObject: T; newObject: T }>;
  /**
   * Objects cached but absent from the list: they were deleted while we were not watching, so
   * their final state is unknown (client-go's `DeletedFinalStateUnknown`): `object` is the last
   * state we saw, not the state at deletion.
   */
  deleted: Array<{ object: T; finalStateUnknown: true }>;
}

/**
 * The pure part of client-go's `Replace`: what must be emitted so that handlers that saw the old
 * cache end up having seen the new list. Unchanged objects (same resourceVersion) emit nothing;
 * resync is the controller's job, not the informer's.
 */
export function computeReplaceDelta<T extends KubernetesObject>(
  current: ReadonlyMap<string, T>,
  listed: readonly T[],
): ReplaceDelta<T> {
  const delta: ReplaceDelta<T> = { added: [], updated: [], deleted: [] };
  const listedKeys = new Set<string>();
  for (const obj of listed) {
    const key = objectKey(obj);
    listedKeys.add(key);
    const old = current.get(key);
    if (!old) {
      delta.added.push(obj);
    } else if (old.metadata?.uid !== obj.metadata?.uid) {
      // Deleted and recreated under the same name while we were not watching.
      delta.deleted.push({ object: old, finalStateUnknown: true });
      delta.added.push(obj);
    } else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) {
      delta.updated.push({ oldObject: old, newObject: obj });
    }
  }
  for (const [key, obj] of current) {
    if (!listedKeys.has(key)) delta.deleted.push({ object: obj, finalStateUnknown: true });
  }
  return delta;
}
