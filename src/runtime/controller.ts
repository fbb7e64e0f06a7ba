import { randomUUID } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type Clock, jitter, type Random, type Timer } from './clock.ts';
import { errorReason, TerminalError } from './errors.ts';
import type { EventHandler, Informer } from './informer.ts';
import { objectKey, splitKey } from './kube-client.ts';
import { Latch } from './latch.ts';
import type { ReconcileResultLabel, RuntimeMetrics } from './metrics.ts';
import { type EventPredicate, passesCreate, passesDelete, passesUpdate } from './predicates.ts';
import { type DefaultRateLimiterOptions, defaultControllerRateLimiter } from './rate-limiter.ts';
import { WorkQueue } from './workqueue.ts';

export interface ReconcileResult {
  /** Reconcile this key again after this many ms (time-driven work such as TTLs); resets backoff. */
  requeueAfter?: number;
}

export interface ReconcileContext {
  /** Aborted when the controller stops and the drain deadline has passed. */
  signal: AbortSignal;
  /** Carries `controller`, `reconcileID` (one per reconcile), `namespace` (if any) and `name`. */
  logger: Logger;
}

/**
 * Converges the object named `key` (`ns/name`, or `name` when cluster-scoped) towards its desired
 * state. It receives only the key, never the event: read the current state from the cache.
 * Throwing retries with per-key exponential backoff; throwing `TerminalError` does not retry.
 */
export type Reconciler = (
  key: string,
  ctx: ReconcileContext,
) => Promise<ReconcileResult | undefined> | Promise<void>;

/** Maps an event's object to the keys of the primary objects to reconcile. */
export type EventMapper = (obj: KubernetesObject) => string[];

export interface WatchOptions<T extends KubernetesObject> {
  /** Which of the watch's events enqueue anything (all when absent); see {@link EventPredicate}. */
  predicates?: EventPredicate<T>[];
}

/**
 * The informer handler of one watch: each event that `predicates` let through enqueues the keys
 * `mapper` gives for its object. An update maps both objects (a child whose owner changed must
 * wake the old owner as well as the new one) and enqueues each key they give once.
 */
export function watchHandler<T extends KubernetesObject>(
  mapper: (obj: T) => string[],
  predicates: readonly EventPredicate<T>[],
  enqueue: (key: string) => void,
): EventHandler<T> {
  const enqueueKeys = (obj: T) => {
    for (const key of mapper(obj)) enqueue(key);
  };
  return {
    onAdd: (obj) => {
      if (passesCreate(predicates, obj)) enqueueKeys(obj);
    },
    onUpdate: (oldObj, newObj) => {
      if (!passesUpdate(predicates, oldObj, newObj)) return;
      // Each key once: a worker waiting for work takes the first add at once, and a second add
      // of the key it holds would reconcile it again afterwards.
      for (const key of new Set([...mapper(oldObj), ...mapper(newObj)])) enqueue(key);
    },
    onDelete: (obj) => {
      if (passesDelete(predicates, obj)) enqueueKeys(obj);
    },
  };
}

export interface ControllerOptions {
  /** The controller name: metric label, queue name, log field. Unique per manager. */
  name: string;
  reconcile: Reconciler;
  clock: Clock;
  random: Random;
  logger: Logger;
  metrics?: RuntimeMetrics;
  /** Number of workers (default 1). A key is still never reconciled by two at once. */
  maxConcurrentReconciles?: number;
  rateLimiter?: DefaultRateLimiterOptions;
  /** Every cached primary key is re-enqueued this often, jittered by up to 10% (default 10 min). */
  resyncPeriodMs?: number;
  /** Whether it runs only on the elected leader (default true). */
  needLeaderElection?: boolean;
}

/**
 * controller-runtime's Controller: informer events become keys in a work queue that a bounded
 * number of workers reconcile. Workers start only after every watched informer has synced.
 * A controller can be started again after it was stopped (leadership lost, then regained);
 * each run gets a fresh queue.
 */
export class Controller {
  readonly name: string;
  readonly needLeaderElection: boolean;
  private readonly informers = new Set<Informer>();
  /** Every watch with its mapper and predicates, to replay the caches when the controller starts. */
  private readonly watches: {
    informer: Informer;
    mapper: (obj: KubernetesObject) => string[];
    predicates: readonly EventPredicate[];
  }[] = [];
  private primary: Informer | undefined;
  private queue: WorkQueue | undefined;
  private workers: Promise<void>[] = [];
  private resyncTimer: Timer | undefined;
  private reconcileAbort: AbortController | undefined;
  private runAbort: AbortController | undefined;
  /** Open while the workers run. */
  private readonly running = new Latch();

  private readonly logger: Logger;

  constructor(private readonly options: ControllerOptions) {
    this.name = options.name;
    this.logger = options.logger.child({ controller: options.name });
    this.needLeaderElection = options.needLeaderElection ?? true;
  }

  /** Watches the primary resource: each event (that `options.predicates` let through) enqueues the object's own key. */
  watchPrimary<T extends KubernetesObject>(
    informer: Informer<T>,
    options: WatchOptions<NoInfer<T>> = {},
  ): this {
    if (this.primary) throw new Error(`controller ${this.name} already has a primary informer`);
    this.primary = asAnyInformer(informer);
    return this.watch(informer, (obj) => [objectKey(obj)], options);
  }

  /**
   * Watches objects the primary controls (controller-runtime's `Owns`): each event enqueues the
   * object's controller owner (`ownerReferences[]` with `controller: true`) when that owner is a
   * `ownerKind` of the primary's API group, of the primary's scope. Call after `watchPrimary`.
   */
  owns<T extends KubernetesObject>(
    informer: Informer<T>,
    ownerKind: string,
    options: WatchOptions<NoInfer<T>> = {},
  ): this {
    if (!this.primary)
      throw new Error(`controller ${this.name} owns objects of a primary it does not watch yet`);
    const { group, namespaced } = this.primary.resource;
    return this.watch(informer, mapToControllerOwner({ group, kind: ownerKind, namespaced }), options);
  }

  /** Watches a related resource; `mapper` turns each event's object into primary keys. */
  watch<T extends KubernetesObject>(
    informer: Informer<T>,
    mapper: (obj: T) => string[],
    options: WatchOptions<NoInfer<T>> = {},
  ): this {
    const predicates = options.predicates ?? [];
    this.informers.add(asAnyInformer(informer));
    this.watches.push({
      informer: asAnyInformer(informer),
      mapper: mapper as unknown as (obj: KubernetesObject) => string[],
      predicates: predicates as unknown as readonly EventPredicate[],
    });
    informer.addEventHandler(watchHandler(mapper, predicates, (key) => this.queue?.add(key)));
    return this;
  }

  get watchedInformers(): Informer[] {
    return [...this.informers];
  }

  get isRunning(): boolean {
    return this.queue !== undefined && !this.queue.isShuttingDown;
  }

  /**
   * Resolves true once the workers run (at once if they do), false if `signal` aborts first.
   * For whoever added the controller to a running manager and waits for its caches.
   */
  whenStarted(signal?: AbortSignal): Promise<boolean> {
    return this.running.wait(signal);
  }

  /** Adds a key by hand (tests, external triggers). Ignored while not running. */
  enqueue(key: string): void {
    this.queue?.add(key);
  }

  /** Enqueues `key` after `delayMs`, ahead of directly enqueued keys once due (see WorkQueue). */
  enqueueAfter(key: string, delayMs: number): void {
    this.queue?.addAfter(key, delayMs);
  }

  /**
   * Waits for the informers to sync (returns false if `signal` aborts first), then starts the
   * workers and the resync timer and enqueues every key the cached objects of every watch map to
   * (events that arrived before the queue existed, say while another replica led, are not lost:
   * an orphaned child still wakes its gone owner).
   */
  async start(signal?: AbortSignal): Promise<boolean> {
    if (this.runAbort) throw new Error(`controller ${this.name} is already running`);
    const runAbort = new AbortController();
    this.runAbort = runAbort;
    const onOuterAbort = () => runAbort.abort();
    signal?.addEventListener('abort', onOuterAbort, { once: true });
    try {
      const synced = await Promise.all(
        [...this.informers].map((informer) => informer.waitForSync(runAbort.signal)),
      );
      if (!synced.every(Boolean) || runAbort.signal.aborted) {
        this.runAbort = undefined;
        return false;
      }
    } finally {
      signal?.removeEventListener('abort', onOuterAbort);
    }
    const { clock, metrics } = this.options;
    const logger = this.logger;
    const queue = new WorkQueue({
      name: this.name,
      clock,
      rateLimiter: defaultControllerRateLimiter(clock, this.options.rateLimiter),
      metrics: metrics?.queueHooks(this.name),
    });
    metrics?.registerQueue(queue);
    this.queue = queue;
    this.reconcileAbort = new AbortController();
    const workerCount = Math.max(1, this.options.maxConcurrentReconciles ?? 1);
    metrics?.maxConcurrentReconciles.set({ controller: this.name }, workerCount);
    for (const { informer, mapper, predicates } of this.watches) {
      for (const obj of informer.store.list()) {
        if (passesCreate(predicates, obj)) for (const key of mapper(obj)) queue.add(key);
      }
    }
    this.scheduleResync();
    this.workers = Array.from({ length: workerCount }, () => this.work(queue, this.reconcileAbort!.signal));
    logger.info({ workers: workerCount }, 'controller started');
    this.running.open();
    return true;
  }

  /**
   * Stops taking new work and waits up to `drainTimeoutMs` for in-flight reconciles; after that,
   * their `signal` is aborted and the controller stops without waiting further.
   */
  async stop(drainTimeoutMs = 30_000): Promise<void> {
    const queue = this.queue;
    this.running.close();
    this.runAbort?.abort();
    this.runAbort = undefined;
    this.resyncTimer?.cancel();
    this.resyncTimer = undefined;
    if (!queue) return;
    queue.shutDown();
    let timer: Timer | undefined;
    const timedOut = await Promise.race([
      Promise.all(this.workers).then(() => false),
      new Promise<boolean>((resolve) => {
        timer = this.options.clock.setTimer(drainTimeoutMs, () => resolve(true));
      }),
    ]);
    timer?.cancel();
    if (timedOut) {
      this.logger.warn('reconciles still running after the drain timeout; aborting them');
      this.reconcileAbort?.abort(new Error('controller stopped'));
    }
    this.queue = undefined;
    this.workers = [];
    this.logger.info('controller stopped');
  }

  private enqueueAllPrimary(): void {
    for (const key of this.primary?.store.keys() ?? []) this.queue?.add(key);
  }

  private scheduleResync(): void {
    const period = this.options.resyncPeriodMs ?? 10 * 60_000;
    if (period <= 0) return;
    this.resyncTimer = this.options.clock.setTimer(jitter(period, 0.1, this.options.random), () => {
      this.enqueueAllPrimary();
      this.scheduleResync();
    });
  }

  private async work(queue: WorkQueue, signal: AbortSignal): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        await this.reconcileOne(queue, key, signal);
      } finally {
        queue.done(key);
      }
    }
  }

  private async reconcileOne(queue: WorkQueue, key: string, signal: AbortSignal): Promise<void> {
    const { clock, metrics, reconcile } = this.options;
    const controller = this.name;
    const { namespace, name } = splitKey(key);
    const logger = this.logger.child({
      reconcileID: randomUUID(),
      ...(namespace ? { namespace } : {}),
      name,
    });
    const started = clock.now();
    metrics?.activeWorkers.inc({ controller });
    let result: ReconcileResultLabel;
    try {
      const outcome = await reconcile(key, { signal, logger });
      const requeueAfter = outcome ? outcome.requeueAfter : undefined;
      queue.forget(key);
      if (requeueAfter !== undefined && requeueAfter > 0) {
        queue.addAfter(key, requeueAfter);
        result = 'requeue_after';
      } else {
        result = 'success';
      }
    } catch (err) {
      result = 'error';
      const reason = errorReason(err);
      metrics?.reconcileErrors.inc({ controller });
      metrics?.reconcileErrorsByReason.inc({ controller, reason });
      if (err instanceof TerminalError) {
        metrics?.terminalReconcileErrors.inc({ controller });
        queue.forget(key);
        logger.error({ err, reason }, 'reconcile failed terminally; not retrying');
      } else {
        queue.addRateLimited(key);
        logger.warn(
          { err, reason, retries: queue.numRequeues(key) },
          'reconcile failed; retrying with backoff',
        );
      }
    } finally {
      metrics?.activeWorkers.dec({ controller });
    }
    metrics?.reconcileTotal.inc({ controller, result });
    metrics?.reconcileTime.observe({ controller }, (clock.now() - started) / 1000);
  }
}

function groupOf(apiVersion: string | undefined): string {
  if (!apiVersion) return '';
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/**
 * Maps an object to its controller owner's key, if that owner is of `kind` in API group `group`
 * (any version). Owners of namespaced kinds live in the object's namespace (Kubernetes forbids
 * cross-namespace owners); `namespaced: false` names a cluster-scoped owner by name alone.
 */
export function mapToControllerOwner(owner: {
  group: string;
  kind: string;
  namespaced: boolean;
}): EventMapper {
  return (obj) => {
    const ref = obj.metadata?.ownerReferences?.find(
      (candidate) =>
        candidate.controller === true &&
        candidate.kind === owner.kind &&
        groupOf(candidate.apiVersion) === owner.group,
    );
    if (!ref) return [];
    const namespace = owner.namespaced ? obj.metadata?.namespace : undefined;
    return [namespace ? `${namespace}/${ref.name}` : ref.name];
  };
}

/**
 * The controller keeps informers of any object type side by side; it only reads their sync
 * state and store keys, which do not depend on the type. (Informer<T> is invariant in T.)
 */
function asAnyInformer<T extends KubernetesObject>(informer: Informer<T>): Informer {
  return informer as unknown as Informer;
}
