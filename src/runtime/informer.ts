import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Backoff, type BackoffOptions, defaultReflectorBackoff } from './backoff.ts';
import { type Clock, type Random, sleep, type Timer } from './clock.ts';
import {
  isApiError,
  ResourceVersionExpiredError,
  WatchErrorEventError,
  WatchStalledError,
} from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import { collectionPath, groupVersion, type ObjectList, objectKey, type ResourceRef } from './kube-client.ts';
import type { WatchEvent, WatchStream } from './kube-watch.ts';
import { Latch } from './latch.ts';
import { type IndexFunc, Store } from './store.ts';

export interface EventHandler<T extends KubernetesObject = KubernetesObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  /**
   * `finalStateUnknown` is true when the deletion was inferred from a relist (client-go's
   * DeletedFinalStateUnknown): `obj` is then the last state seen, not the state at deletion.
   */
  onDelete?(obj: T, finalStateUnknown: boolean): void;
}

export interface InformerSelector {
  /** Only in this namespace (namespaced resources); all namespaces when absent. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface InformerOptions<T extends KubernetesObject = KubernetesObject> extends InformerSelector {
  api: KubeApi;
  resource: ResourceRef;
  clock: Clock;
  random: Random;
  logger: Logger;
  indexers?: Record<string, IndexFunc<T>>;
  /**
   * Each watch asks the server to end it after `timeoutSeconds` in [min, 2*min), randomized like
   * client-go's reflector (default 300 s) so that informers do not reconnect in lockstep.
   */
  minWatchTimeoutSeconds?: number;
  /** A stream silent for longer than its server timeout plus this is treated as dead (default 30 s). */
  watchdogSlackMs?: number;
  backoff?: BackoffOptions;
  /** List page size (default 500); 0 lists in one request. */
  pageSize?: number;
  /**
   * What the cache keeps of each object (client-go's `TransformFunc`): applied to every listed and
   * watched object before the store and the handlers see it, so they all share its one result.
   * It must not change the key, uid or resourceVersion. Default: the object as the server sent it.
   */
  transform?: (obj: T) => T;
}

/**
 * The transform that drops `metadata.managedFields` (the largest part of most objects, read by no
 * controller but one), keeping only the entries of the field managers `keep` names. Returns a new
 * object; the one given is left as it is.
 */
export function keepManagedFieldsOf<T extends KubernetesObject>(keep: readonly string[]): (obj: T) => T {
  return (obj) => {
    const managedFields = obj.metadata?.managedFields;
    if (!managedFields) return obj;
    const { managedFields: _all, ...metadata } = obj.metadata!;
    const kept = managedFields.filter((entry) => entry.manager !== undefined && keep.includes(entry.manager));
    return { ...obj, metadata: kept.length > 0 ? { ...metadata, managedFields: kept } : metadata };
  };
}

/**
 * A reflector plus indexer plus event distribution (client-go's SharedIndexInformer) over plain
 * JSON objects of any resource.
 *
 * Correctness contract: the cache converges to the apiserver's state after any disruption.
 * - It lists, then watches from the list's resourceVersion, and resumes every later watch from
 *   the last resourceVersion it saw (events and bookmarks), so a reconnect loses no event.
 * - 410 Gone (as an HTTP status or as an ERROR event in the stream) means that resourceVersion
 *   is no longer available: it relists and emits synthetic add/update/delete for the difference.
 * - A transport failure (reset, refused, timeout): retry after exponential backoff (800 ms ..
 *   30 s, jittered), resuming the watch from the last resourceVersion. Any other ERROR event in
 *   the stream: relist after backoff (it may recur for that resourceVersion).
 * - A watchdog aborts a stream that is silent for longer than its server-side timeout plus slack
 *   (a half-open TCP connection would otherwise hang forever).
 */
export class Informer<T extends KubernetesObject = KubernetesObject> {
  readonly store: Store<T>;
  private readonly handlers = new Set<EventHandler<T>>();
  private readonly backoff: Backoff;
  private readonly synced = new Latch();
  private resourceVersion: string | undefined;
  private stopController: AbortController | undefined;
  private running: Promise<void> | undefined;
  private currentStream: WatchStream | undefined;

  constructor(private readonly options: InformerOptions<T>) {
    this.store = new Store<T>(options.indexers);
    this.backoff = new Backoff(options.backoff ?? defaultReflectorBackoff, options.random);
  }

  get resource(): ResourceRef {
    return this.options.resource;
  }

  /** A name for logs and /readyz: group/version/plural plus namespace and selectors. */
  get description(): string {
    const { resource, namespace, labelSelector, fieldSelector } = this.options;
    const parts = [`${groupVersion(resource)}/${resource.plural}`];
    if (namespace) parts.push(`namespace=${namespace}`);
    if (labelSelector) parts.push(`labels=${labelSelector}`);
    if (fieldSelector) parts.push(`fields=${fieldSelector}`);
    return parts.join(' ');
  }

  /** True once the first list has been loaded into the cache (stays true, as in client-go). */
  hasSynced(): boolean {
    return this.synced.isOpen;
  }

  /**
   * Registers a handler. If the cache is already synced, the handler first receives an add for
   * every cached object, so late registrations (a second controller sharing this informer) see
   * the same world as early ones. Returns a function that unregisters it.
   */
  addEventHandler(handler: EventHandler<T>): () => void {
    this.handlers.add(handler);
    if (this.synced.isOpen)
      for (const obj of this.store.list()) this.call(handler, 'onAdd', () => handler.onAdd?.(obj));
    return () => this.handlers.delete(handler);
  }

  /** Resolves true once synced, or false if `signal` aborts first. */
  waitForSync(signal?: AbortSignal): Promise<boolean> {
    return this.synced.wait(signal);
  }

  start(): void {
    if (this.running) return;
    this.stopController = new AbortController();
    this.running = this.run(this.stopController.signal);
  }

  async stop(): Promise<void> {
    this.stopController?.abort(new Error('informer stopped'));
    await this.running;
    this.running = undefined;
  }

  private async run(signal: AbortSignal): Promise<void> {
    const { logger } = this.options;
    let needList = true;
    let consecutiveGone = 0;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.listAndReplace(signal);
          needList = false;
        }
        await this.watchOnce(signal);
        // The server ended the stream at its timeout: resume at once from the last resourceVersion.
        this.backoff.reset();
        consecutiveGone = 0;
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ResourceVersionExpiredError || isApiError(err, 410)) {
          logger.info(
            { informer: this.description, resourceVersion: this.resourceVersion },
            'resourceVersion expired, relisting',
          );
          needList = true;
          // Relist at once the first time; back off if the server keeps answering 410.
          if (consecutiveGone++ === 0) continue;
        } else {
          // An error the server reported inside the stream (e.g. an InternalError) may repeat
          // for this resourceVersion: relist, as client-go does. Transport failures (reset,
          // refused, stalled) resume the watch from the last resourceVersion instead.
          if (err instanceof WatchErrorEventError) needList = true;
          logger.warn({ informer: this.description, err }, 'list/watch failed, retrying after backoff');
        }
        await sleep(this.options.clock, this.backoff.next(), signal);
      }
    }
  }

  private async listAndReplace(signal: AbortSignal): Promise<void> {
    const list = await this.listAll(signal);
    if (signal.aborted) return;
    const delta = this.store.replace(list.items);
    this.resourceVersion = list.metadata?.resourceVersion;
    for (const { object } of delta.deleted) this.emit('onDelete', (h) => h.onDelete?.(object, true));
    for (const obj of delta.added) this.emit('onAdd', (h) => h.onAdd?.(obj));
    for (const { oldObject, newObject } of delta.updated)
      this.emit('onUpdate', (h) => h.onUpdate?.(oldObject, newObject));
    this.backoff.reset();
    this.synced.open();
  }

  /** A consistent list, paginated; falls back to one unpaginated list if a continue token expires. */
  private async listAll(signal: AbortSignal): Promise<ObjectList<T>> {
    const pageSize = this.options.pageSize ?? 500;
    try {
      return await this.listPages(pageSize, signal);
    } catch (err) {
      if (pageSize > 0 && isApiError(err, 410)) return this.listPages(0, signal);
      throw err;
    }
  }

  private async listPages(pageSize: number, signal: AbortSignal): Promise<ObjectList<T>> {
    const { api, resource, namespace, labelSelector, fieldSelector } = this.options;
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await api.request<ObjectList<T> & { kind?: string; apiVersion?: string }>({
        method: 'GET',
        path: collectionPath(resource, namespace),
        query: {
          labelSelector,
          fieldSelector,
          limit: pageSize > 0 ? pageSize : undefined,
          continue: continueToken,
        },
        signal,
      });
      // Items of built-in lists carry no apiVersion/kind; fill them in so objects look the same
      // whether they came from a list or a watch.
      const kind = page.kind?.replace(/List$/, '');
      const transform = this.options.transform;
      for (const item of page.items ?? []) {
        const complete = { apiVersion: page.apiVersion, kind, ...item };
        items.push(transform ? transform(complete) : complete);
      }
      continueToken = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (continueToken);
    return { metadata: { resourceVersion }, items };
  }

  private async watchOnce(signal: AbortSignal): Promise<void> {
    const { api, resource, namespace, labelSelector, fieldSelector, clock, random } = this.options;
    const minTimeout = this.options.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(minTimeout * (1 + random()));
    const silentLimitMs = timeoutSeconds * 1000 + (this.options.watchdogSlackMs ?? 30_000);
    const watchAbort = new AbortController();
    const onStop = () => watchAbort.abort(signal.reason);
    signal.addEventListener('abort', onStop, { once: true });
    let watchdog: Timer | undefined;
    const armWatchdog = () => {
      watchdog?.cancel();
      watchdog = clock.setTimer(silentLimitMs, () => {
        const stalled = new WatchStalledError(`watch of ${this.description} silent for ${silentLimitMs} ms`);
        watchAbort.abort(stalled);
        this.currentStream?.abort(stalled);
      });
    };
    armWatchdog();
    try {
      const stream = await api.watch(
        collectionPath(resource, namespace),
        {
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds,
          labelSelector,
          fieldSelector,
        },
        (event) => {
          armWatchdog();
          this.handleWatchEvent(event as WatchEvent<T>);
        },
        watchAbort.signal,
      );
      this.currentStream = stream;
      await stream.done;
    } finally {
      watchdog?.cancel();
      this.currentStream = undefined;
      signal.removeEventListener('abort', onStop);
    }
  }

  /** Applies one watch event to the cache and handlers. Throws to end the stream. */
  private handleWatchEvent(event: WatchEvent<T>): void {
    if (event.type === 'ERROR') {
      const status = event.object as unknown as { code?: number; message?: string; reason?: string };
      if (status.code === 410 || status.reason === 'Expired' || status.reason === 'Gone') {
        throw new ResourceVersionExpiredError(status.message ?? 'resourceVersion expired');
      }
      throw new WatchErrorEventError(status.code, status.message ?? 'watch error event');
    }
    const obj = this.options.transform ? this.options.transform(event.object) : event.object;
    const resourceVersion = obj.metadata?.resourceVersion;
    switch (event.type) {
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED': {
        const previous = this.store.upsert(obj);
        if (previous) this.emit('onUpdate', (h) => h.onUpdate?.(previous, obj));
        else this.emit('onAdd', (h) => h.onAdd?.(obj));
        break;
      }
      case 'DELETED': {
        const previous = this.store.delete(objectKey(obj));
        this.emit('onDelete', (h) => h.onDelete?.(obj, false));
        if (!previous)
          this.options.logger.debug({ key: objectKey(obj) }, 'delete of an object not in the cache');
        break;
      }
      default:
        this.options.logger.warn({ type: (event as { type: string }).type }, 'unknown watch event type');
    }
    if (resourceVersion) this.resourceVersion = resourceVersion;
  }

  private emit(kind: keyof EventHandler<T>, invoke: (handler: EventHandler<T>) => void): void {
    for (const handler of this.handlers) this.call(handler, kind, () => invoke(handler));
  }

  /** A failing handler is logged and must not break the informer or other handlers. */
  private call(_handler: EventHandler<T>, kind: string, invoke: () => void): void {
    try {
      invoke();
    } catch (err) {
      this.options.logger.error({ informer: this.description, err, kind }, 'event handler failed');
    }
  }
}
