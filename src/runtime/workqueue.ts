import type { Clock, Timer } from './clock.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiter.ts';

/** Hooks the queue reports through; `metrics.ts` implements them with prom-client. */
export interface WorkQueueMetricsHooks {
  depth(depth: number): void;
  added(): void;
  retried(): void;
  /** Seconds a key waited between being added and handed to a worker. */
  queueDuration(seconds: number): void;
  /** Seconds a worker held a key (get to done). */
  workDuration(seconds: number): void;
}

export const noopQueueMetrics: WorkQueueMetricsHooks = {
  depth() {},
  added() {},
  retried() {},
  queueDuration() {},
  workDuration() {},
};

export interface WorkQueueOptions {
  name: string;
  clock: Clock;
  rateLimiter?: RateLimiter;
  metrics?: WorkQueueMetricsHooks;
}

/**
 * controller-runtime's rate-limiting, delaying work queue of string keys.
 *
 * - A key is never handed to two workers at once: a key added while being processed is marked
 *   dirty and queued again only when `done(key)` is called.
 * - Duplicates collapse: a key waiting in the queue is queued once however often it is added.
 * - `addAfter`: if the key is already waiting for a delayed add, the earlier time wins. A delayed
 *   add that comes due goes ahead of keys added directly (which queue behind it in order): a
 *   `requeueAfter` is a promise about time (a deadline), and a burst of new objects must not
 *   make it late. controller-runtime's priority queue makes the same choice for initial lists.
 * - `addRateLimited` waits as long as the rate limiter says (per-key backoff and a global bucket);
 *   `forget` resets the key's backoff (call it after a success).
 * - `shutDown`: no new keys are accepted, pending delays are dropped, `get()` returns undefined
 *   to every worker; `drain()` resolves when every key handed out has been marked done.
 */
export class WorkQueue {
  readonly name: string;
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter;
  private readonly metrics: WorkQueueMetricsHooks;
  private queue: string[] = [];
  /** Keys whose delayed add came due; served before `queue`. */
  private due: string[] = [];
  /** Dirty keys that were last added by a delayed add (they go to `due` when queued). */
  private readonly promoted = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly processing = new Map<string, number>();
  private readonly addedAt = new Map<string, number>();
  private readonly waiting = new Map<string, { readyAt: number; timer: Timer }>();
  private readonly getters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.clock = options.clock;
    this.rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter(options.clock);
    this.metrics = options.metrics ?? noopQueueMetrics;
  }

  add(key: string): void {
    this.enqueue(key, false);
  }

  private enqueue(key: string, cameDue: boolean): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      // Already waiting: a delayed add that comes due moves it ahead of the directly added keys.
      if (cameDue && !this.promoted.has(key)) {
        this.promoted.add(key);
        const index = this.queue.indexOf(key);
        if (index >= 0) {
          this.queue.splice(index, 1);
          this.due.push(key);
        }
      }
      return;
    }
    this.metrics.added();
    this.dirty.add(key);
    if (cameDue) this.promoted.add(key);
    this.addedAt.set(key, this.clock.now());
    if (this.processing.has(key)) return;
    this.push(key);
    this.dispatch();
  }

  private push(key: string): void {
    (this.promoted.has(key) ? this.due : this.queue).push(key);
    this.metrics.depth(this.len());
  }

  /** Adds `key` after `delayMs`; an earlier pending delayed add of the same key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.clock.now() + delayMs;
    const existing = this.waiting.get(key);
    if (existing && existing.readyAt <= readyAt) return;
    existing?.timer.cancel();
    const timer = this.clock.setTimer(delayMs, () => {
      this.waiting.delete(key);
      this.enqueue(key, true);
    });
    this.waiting.set(key, { readyAt, timer });
  }

  addRateLimited(key: string): void {
    if (this.shuttingDown) return;
    this.metrics.retried();
    this.addAfter(key, this.rateLimiter.when(key));
  }

  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** The next key to work on, or undefined once the queue is shut down. Call `done` after. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.pop();
    if (key !== undefined) return Promise.resolve(key);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Marks the end of processing `key`; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    const startedAt = this.processing.get(key);
    if (startedAt === undefined) return;
    this.processing.delete(key);
    this.metrics.workDuration((this.clock.now() - startedAt) / 1000);
    if (this.dirty.has(key) && !this.shuttingDown) {
      this.push(key);
      this.dispatch();
    }
  }

  len(): number {
    return this.due.length + this.queue.length;
  }

  /** Keys waiting for a delayed add. */
  delayedCount(): number {
    return this.waiting.size;
  }

  isProcessing(key: string): boolean {
    return this.processing.has(key);
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    for (const { timer } of this.waiting.values()) timer.cancel();
    this.waiting.clear();
    for (const resolve of this.getters.splice(0)) resolve(undefined);
  }

  /** Sum of the time every key in progress has been processed so far (workqueue_unfinished_work_seconds). */
  unfinishedWorkSeconds(): number {
    const now = this.clock.now();
    let total = 0;
    for (const startedAt of this.processing.values()) total += now - startedAt;
    return total / 1000;
  }

  /** The longest time any key in progress has been processed (workqueue_longest_running_processor_seconds). */
  longestRunningProcessorSeconds(): number {
    const now = this.clock.now();
    let longest = 0;
    for (const startedAt of this.processing.values()) longest = Math.max(longest, now - startedAt);
    return longest / 1000;
  }

  private pop(): string | undefined {
    const key = this.due.shift() ?? this.queue.shift();
    if (key === undefined) return undefined;
    const now = this.clock.now();
    this.processing.set(key, now);
    this.dirty.delete(key);
    this.promoted.delete(key);
    const addedAt = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (addedAt !== undefined) this.metrics.queueDuration((now - addedAt) / 1000);
    this.metrics.depth(this.len());
    return key;
  }

  private dispatch(): void {
    while (this.getters.length > 0 && this.len() > 0) {
      const resolve = this.getters.shift()!;
      resolve(this.pop());
    }
  }
}
