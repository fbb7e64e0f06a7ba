import type { Clock } from './clock.ts';

/** How long an item must wait before it is processed again (client-go's workqueue.RateLimiter). */
export interface RateLimiter {
  /** Records a failure (or a rate-limited add) of `key` and returns the delay in ms. */
  when(key: string): number;
  /** Clears the failure history of `key`. */
  forget(key: string): void;
  numRequeues(key: string): number;
}

/** Per-key exponential backoff: base * 2^failures, capped (client-go: 5 ms .. 1000 s). */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly baseDelayMs = 5,
    private readonly maxDelayMs = 1_000_000,
  ) {}

  when(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    // 2^failures overflows to Infinity long after the cap; Math.min handles it.
    return Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** failures);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/**
 * A global token bucket (golang.org/x/time/rate semantics with reservations): `burst` tokens,
 * refilled at `qps`; each call takes one token now and returns how long until it is covered.
 */
export class BucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;

  constructor(
    private readonly clock: Clock,
    private readonly qps = 10,
    private readonly burst = 100,
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  when(_key: string): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }

  forget(_key: string): void {}

  numRequeues(_key: string): number {
    return 0;
  }
}

/** The largest delay of several limiters; failures are recorded in all of them. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(0, ...this.limiters.map((limiter) => limiter.when(key)));
  }

  forget(key: string): void {
    for (const limiter of this.limiters) limiter.forget(key);
  }

  numRequeues(key: string): number {
    return Math.max(0, ...this.limiters.map((limiter) => limiter.numRequeues(key)));
  }
}

export interface DefaultRateLimiterOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  qps?: number;
  burst?: number;
}

/** client-go's DefaultControllerRateLimiter: per-key 5 ms..1000 s backoff, max'd with a 10 qps / 100 burst bucket. */
export function defaultControllerRateLimiter(
  clock: Clock,
  options: DefaultRateLimiterOptions = {},
): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(options.baseDelayMs ?? 5, options.maxDelayMs ?? 1_000_000),
    new BucketRateLimiter(clock, options.qps ?? 10, options.burst ?? 100),
  );
}
