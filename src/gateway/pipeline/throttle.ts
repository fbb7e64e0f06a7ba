import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

/**
 * Limits on failed authentications (DESIGN.md section 5, 429): per source address and per key id
 * (the public part of a presented key), so that neither one client guessing many keys nor many
 * clients guessing one key's secret get far. Counting is in memory per replica
 * (rate-limiter-flexible's `RateLimiterMemory`); a blocked source or key gets 429 with
 * `Retry-After` before any key lookup, whatever it presents.
 */

export interface FailureLimit {
  /** Failures allowed within the window; one more blocks. */
  readonly failures: number;
  readonly windowSeconds: number;
  /** How long a source or key stays blocked once over the limit. */
  readonly blockSeconds: number;
}

export interface AuthFailureLimits {
  readonly perSource: FailureLimit;
  readonly perKey: FailureLimit;
}

export const DEFAULT_AUTH_FAILURE_LIMITS: AuthFailureLimits = {
  perSource: { failures: 30, windowSeconds: 60, blockSeconds: 60 },
  perKey: { failures: 10, windowSeconds: 60, blockSeconds: 300 },
};

const limiterFor = (limit: FailureLimit, keyPrefix: string) =>
  new RateLimiterMemory({
    keyPrefix,
    points: limit.failures,
    duration: limit.windowSeconds,
    blockDuration: limit.blockSeconds,
  });

/** How long after its last failure a source or key may still be blocked (or counted). */
const horizonMs = (limit: FailureLimit) => (limit.windowSeconds + limit.blockSeconds) * 1000;

export class AuthFailureLimiter {
  private readonly bySource: RateLimiterMemory;
  private readonly byKey: RateLimiterMemory;
  /**
   * Sources and key ids with a failure recent enough that the limiter may hold something on them
   * (`s:<source>`/`k:<key id>` to the time after which it cannot), so that the common case (no
   * failures) is decided without the limiter's asynchronous calls.
   */
  private readonly recent = new Map<string, number>();
  private sweepAt = 0;

  constructor(
    private readonly limits: AuthFailureLimits = DEFAULT_AUTH_FAILURE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {
    this.bySource = limiterFor(limits.perSource, 'source');
    this.byKey = limiterFor(limits.perKey, 'key');
  }

  /** False when no failure of anyone is recent: nothing can be blocked, no key id is needed. */
  watching(): boolean {
    if (this.recent.size === 0) return false;
    const now = this.now();
    if (now >= this.sweepAt) {
      for (const [entry, until] of this.recent) if (until <= now) this.recent.delete(entry);
      this.sweepAt = now + 1000;
    }
    return this.recent.size > 0;
  }

  /**
   * False when neither the source nor the key id failed recently, so that {@link blockedFor}
   * would answer undefined; true when it must be asked.
   */
  mayBeBlocked(source: string, keyId: string | undefined): boolean {
    if (this.recent.size === 0) return false;
    const now = this.now();
    const recent = (entry: string) => (this.recent.get(entry) ?? 0) > now;
    return recent(`s:${source}`) || (keyId !== undefined && recent(`k:${keyId}`));
  }

  /** Seconds the caller must wait when the source or the key id is blocked; undefined when neither is. */
  async blockedFor(source: string, keyId: string | undefined): Promise<number | undefined> {
    const waits = await Promise.all([
      this.wait(this.bySource, this.limits.perSource, source),
      keyId === undefined ? undefined : this.wait(this.byKey, this.limits.perKey, keyId),
    ]);
    const longest = Math.max(...waits.map((wait) => wait ?? 0));
    return longest > 0 ? longest : undefined;
  }

  /** Counts a failed authentication; returns the wait when this failure crossed a limit. */
  async failed(source: string, keyId: string | undefined): Promise<number | undefined> {
    const now = this.now();
    this.recent.set(`s:${source}`, now + horizonMs(this.limits.perSource));
    if (keyId !== undefined) this.recent.set(`k:${keyId}`, now + horizonMs(this.limits.perKey));
    await Promise.all([
      this.count(this.bySource, source),
      keyId === undefined ? undefined : this.count(this.byKey, keyId),
    ]);
    return this.blockedFor(source, keyId);
  }

  private async wait(
    limiter: RateLimiterMemory,
    limit: FailureLimit,
    key: string,
  ): Promise<number | undefined> {
    const res = await limiter.get(key);
    if (!res || res.consumedPoints <= limit.failures) return undefined;
    return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  }

  private async count(limiter: RateLimiterMemory, key: string): Promise<void> {
    try {
      await limiter.consume(key, 1);
    } catch (err) {
      // Over the limit: the limiter blocks the key; anything else is a bug worth surfacing.
      if (!(err instanceof RateLimiterRes)) throw err;
    }
  }
}
