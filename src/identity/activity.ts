/**
 * Records when access keys were last used and writes `status.lastActivity` without a write per
 * request: in memory per key, flushed in batches, at most one successful write per key per
 * `minWriteIntervalMs` (one minute by default).
 *
 * No activity is ever dropped: a failed write leaves the entries pending and the next tick
 * retries them; `stop()` writes everything still pending (ignoring the per-minute limit) and
 * throws {@link ActivityFlushFailed} when it cannot. This matters for `ttlAfterLastActivity` keys,
 * whose life is counted from the last activity. Until a value is written, {@link lastActivityOf}
 * serves it to the expiry check, so a key in use never expires for want of a write.
 *
 * Other replicas and the expiry controller only see what is written. So when the stored state
 * would let a key expire before the next regular write (`record`'s `writeBy`, for keys whose life
 * counts from their last activity), the activity is written at once, the per-minute limit
 * notwithstanding: a short inactivity ttl costs writes, never the key.
 */

export interface ActivityWrite {
  /** Object name of the OwnedAccessKey. */
  readonly keyName: string;
  readonly lastActivity: Date;
}

/**
 * Writes a batch; resolves when every entry is stored, rejects when any may not be (the whole
 * batch is then retried, so writes must be idempotent). Contract: set `status.lastActivity` to the
 * later of the stored and the given value, never move it backwards; skip keys that no longer exist.
 */
export type ActivityWriter = (batch: readonly ActivityWrite[]) => Promise<void>;

/** Timer functions, injected so tests drive time (`globalThis` ones in production). */
export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ActivityRecorderOptions {
  readonly writer: ActivityWriter;
  readonly now: () => Date;
  readonly timers?: Timers;
  /** Least time between two writes of the same key. Default 60 000 ms. */
  readonly minWriteIntervalMs?: number;
  /** How often pending activity is looked at (and failed writes retried). Default 10 000 ms. */
  readonly tickMs?: number;
  /** Most keys per writer call. Default 100. */
  readonly maxBatchSize?: number;
  /** How often `stop()` tries to write what is left. Default 3. */
  readonly shutdownAttempts?: number;
  /** Told about each failed batch (for logs and metrics); gets no key names. */
  readonly onWriteError?: (error: unknown, batchSize: number) => void;
}

/** `stop()` could not write every pending activity; `pendingKeys` entries are lost. */
export class ActivityFlushFailed extends Error {
  override readonly name = 'ActivityFlushFailed';
  constructor(
    readonly pendingKeys: number,
    options?: ErrorOptions,
  ) {
    super(`could not write the last activity of ${pendingKeys} access keys`, options);
  }
}

const DEFAULT_TIMERS: Timers = {
  setTimeout: (callback, ms) => globalThis.setTimeout(callback, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>),
};

export class ActivityRecorder {
  private readonly writer: ActivityWriter;
  private readonly now: () => Date;
  private readonly timers: Timers;
  private readonly minWriteIntervalMs: number;
  private readonly tickMs: number;
  private readonly maxBatchSize: number;
  private readonly shutdownAttempts: number;
  private readonly onWriteError: (error: unknown, batchSize: number) => void;

  /** Latest activity (epoch ms) not yet written, per key name. */
  private readonly pending = new Map<string, number>();
  /** Per key: when it was last written (clock ms) and the activity written then. */
  private readonly written = new Map<string, { at: number; activity: number }>();
  /** Keys whose pending activity must be written now (see `record`'s `writeBy`). */
  private readonly urgent = new Set<string>();
  private urgentTimer: unknown;
  private timer: unknown;
  private running = false;
  private inFlight: Promise<void> | undefined;

  constructor(options: ActivityRecorderOptions) {
    this.writer = options.writer;
    this.now = options.now;
    this.timers = options.timers ?? DEFAULT_TIMERS;
    this.minWriteIntervalMs = options.minWriteIntervalMs ?? 60_000;
    this.tickMs = options.tickMs ?? 10_000;
    this.maxBatchSize = options.maxBatchSize ?? 100;
    this.shutdownAttempts = options.shutdownAttempts ?? 3;
    this.onWriteError = options.onWriteError ?? (() => {});
  }

  /**
   * Notes that the key was used at `at` (now by default). Call only after successful
   * authentication. `writeBy` is when the key expires by its stored state (ttlAfterLastActivity
   * keys): when that comes before the next regular write could, the activity is written at once.
   */
  record(keyName: string, at: Date = this.now(), writeBy?: Date): void {
    this.recordMillis(keyName, at.getTime(), writeBy);
  }

  /** {@link record} with the time as epoch milliseconds (the request path: no Date made). */
  recordMillis(keyName: string, millis: number, writeBy?: Date): void {
    const known = this.lastActivityMillis(keyName);
    if (known !== undefined && known >= millis) return;
    this.pending.set(keyName, millis);
    if (
      writeBy !== undefined &&
      writeBy.getTime() - this.now().getTime() < this.minWriteIntervalMs + this.tickMs
    ) {
      this.urgent.add(keyName);
      this.scheduleUrgent();
    }
  }

  /** The latest activity this process knows of for the key (written or not), if any. */
  lastActivityOf(keyName: string): Date | undefined {
    const millis = this.lastActivityMillis(keyName);
    return millis === undefined ? undefined : new Date(millis);
  }

  /** Number of keys whose latest activity is not written yet. */
  get pendingCount(): number {
    return this.pending.size;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  /** Stops the ticks, then writes everything pending; throws {@link ActivityFlushFailed} if it cannot. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    if (this.urgentTimer !== undefined) this.timers.clearTimeout(this.urgentTimer);
    this.timer = undefined;
    this.urgentTimer = undefined;
    await this.inFlight;
    let lastError: unknown;
    for (let attempt = 0; attempt < this.shutdownAttempts && this.pending.size > 0; attempt++) {
      lastError = (await this.writeEntries([...this.pending])) ?? lastError;
    }
    if (this.pending.size > 0) throw new ActivityFlushFailed(this.pending.size, { cause: lastError });
  }

  /**
   * Writes the pending activity of every key not written within the last interval. Runs on each
   * tick; exposed for tests and for callers that drive it themselves. Never rejects.
   */
  async flushDue(): Promise<void> {
    const now = this.now().getTime();
    const due = [...this.pending].filter(([keyName]) => {
      const last = this.written.get(keyName);
      return last === undefined || now - last.at >= this.minWriteIntervalMs || this.urgent.has(keyName);
    });
    await this.writeEntries(due);
    // Entries older than the interval no longer limit anything, and the stored object has their value.
    for (const [keyName, last] of this.written) {
      if (now - last.at >= this.minWriteIntervalMs && !this.pending.has(keyName))
        this.written.delete(keyName);
    }
  }

  private lastActivityMillis(keyName: string): number | undefined {
    return this.pending.get(keyName) ?? this.written.get(keyName)?.activity;
  }

  /** Writes the urgent entries on the next turn of the event loop (coalescing a burst of requests). */
  private scheduleUrgent(): void {
    if (!this.running || this.urgentTimer !== undefined) return;
    this.urgentTimer = this.timers.setTimeout(() => {
      this.urgentTimer = undefined;
      const entries = [...this.urgent]
        .map((keyName) => [keyName, this.pending.get(keyName)] as const)
        .filter((entry): entry is readonly [string, number] => entry[1] !== undefined);
      this.urgent.clear();
      // A failed urgent write stays pending and is retried by the next regular tick.
      void this.writeEntries(entries);
    }, 0);
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      this.inFlight = this.flushDue().finally(() => {
        this.inFlight = undefined;
        this.schedule();
      });
    }, this.tickMs);
  }

  /** Writes the entries in batches; returns the last error, if any batch failed. */
  private async writeEntries(entries: readonly (readonly [string, number])[]): Promise<unknown> {
    let lastError: unknown;
    for (let start = 0; start < entries.length; start += this.maxBatchSize) {
      const batch = entries.slice(start, start + this.maxBatchSize);
      try {
        await this.writer(batch.map(([keyName, millis]) => ({ keyName, lastActivity: new Date(millis) })));
      } catch (error) {
        lastError = error;
        this.onWriteError(error, batch.length);
        continue;
      }
      const writtenAt = this.now().getTime();
      for (const [keyName, millis] of batch) {
        this.written.set(keyName, { at: writtenAt, activity: millis });
        // A newer activity recorded during the write stays pending.
        if (this.pending.get(keyName) === millis) {
          this.pending.delete(keyName);
          this.urgent.delete(keyName);
        }
      }
    }
    return lastError;
  }
}
