import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { accessKeyExpired, StatusError, tooManyRequests, unauthorized } from '../../api/status.ts';
import { sourceBucket } from '../../http/client-address.ts';
import { AccessKeyExpired, type AuthenticationFailure } from '../../identity/authenticate.ts';
import { keyIdOf } from './authenticate.ts';
import type { Exchange } from './exchange.ts';

/**
 * The throttle stage: limits on failed authentications (DESIGN.md section 5, 429) and on
 * concurrent watches per identity.
 *
 * Failures are counted per source address (the client, trusted proxies resolved) and per
 * subject (`key:<id>`, the public part of a presented key, or `user:<name>` for a password
 * login), so that neither one client guessing many keys nor many clients guessing one key's
 * secret get far. Only failing attempts are throttled: a key whose secret verifies is accepted
 * whatever failures others made from its source or with its id (a wrong secret sent with a
 * victim's public id cannot lock the victim out). A caller with recent failures is judged on the
 * caches alone (no apiserver reads for it), and a failure past a limit is answered 429 with
 * `Retry-After` instead of 401. Counting is in memory per replica (rate-limiter-flexible's
 * `RateLimiterMemory`). Sources are counted by {@link sourceBucket}: an IPv6 client by its /64.
 *
 * "Limit N" means here what it means for sign-ins (`src/login/throttle.ts`): N failures within
 * the window are answered as failures (401), the next failing attempt is refused (429) and so is
 * every attempt that is judged blocked until the block ends.
 */

export interface FailureLimit {
  /** Failures allowed within the window (answered as failures); the next failing attempt is refused. */
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
   * False when neither the source nor the subject failed recently, so that {@link blockedFor}
   * would answer undefined; true when it must be asked. An undefined source is not counted (a
   * reviewing apiserver speaks for many clients).
   */
  mayBeBlocked(source: string | undefined, subject: string | undefined): boolean {
    if (this.recent.size === 0) return false;
    const now = this.now();
    const recent = (entry: string) => (this.recent.get(entry) ?? 0) > now;
    return (
      (source !== undefined && recent(`s:${sourceBucket(source)}`)) ||
      (subject !== undefined && recent(`k:${subject}`))
    );
  }

  /** Seconds the caller must wait when the source or the subject is blocked; undefined when neither is. */
  async blockedFor(source: string | undefined, subject: string | undefined): Promise<number | undefined> {
    if (!this.mayBeBlocked(source, subject)) return undefined;
    const waits = await Promise.all([
      source === undefined
        ? undefined
        : this.wait(this.bySource, this.limits.perSource, sourceBucket(source)),
      subject === undefined ? undefined : this.wait(this.byKey, this.limits.perKey, subject),
    ]);
    const longest = Math.max(...waits.map((wait) => wait ?? 0));
    return longest > 0 ? longest : undefined;
  }

  /** Counts a failed attempt; returns the wait when this failure crossed a limit. */
  async failed(source: string | undefined, subject: string | undefined): Promise<number | undefined> {
    const now = this.now();
    const bucket = source === undefined ? undefined : sourceBucket(source);
    if (bucket !== undefined) this.recent.set(`s:${bucket}`, now + horizonMs(this.limits.perSource));
    if (subject !== undefined) this.recent.set(`k:${subject}`, now + horizonMs(this.limits.perKey));
    await Promise.all([
      bucket === undefined ? undefined : this.count(this.bySource, bucket),
      subject === undefined ? undefined : this.count(this.byKey, subject),
    ]);
    return this.blockedFor(source, subject);
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

/** The throttling subject of a presented key: its public id. */
export const keySubject = (keyId: string) => `key:${keyId}`;
/** The throttling subject of a password login. */
export const userSubject = (user: string) => `user:${user}`;

export interface WatchLimits {
  /** Concurrent watches one identity (username) may hold; one more is answered 429. */
  readonly perIdentity: number;
  /** The longest watch: a client's `timeoutSeconds` is cut to this, and set to it when absent. */
  readonly maxTimeoutSeconds: number;
}

export const DEFAULT_WATCH_LIMITS: WatchLimits = { perIdentity: 64, maxTimeoutSeconds: 1800 };

/** Concurrent watches per identity. */
export class WatchSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** A slot for `identity`, with the function that gives it back (once), or undefined when none is free. */
  acquire(identity: string): (() => void) | undefined {
    const count = this.held.get(identity) ?? 0;
    if (count >= this.limit) return undefined;
    this.held.set(identity, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = (this.held.get(identity) ?? 1) - 1;
      if (now <= 0) this.held.delete(identity);
      else this.held.set(identity, now);
    };
  }

  /** Watches `identity` holds now. */
  count(identity: string): number {
    return this.held.get(identity) ?? 0;
  }
}

/**
 * The `timeoutSeconds` a watch is sent upstream with: the client's, at most `max`; `max` when
 * absent or 0 (the apiserver's "its own default"). A value that is no number is passed on, for
 * the apiserver to refuse.
 */
export function cappedWatchTimeout(requested: string | null, max: number): string {
  if (requested === null || requested === '') return String(max);
  if (!/^\d{1,12}$/.test(requested)) return requested;
  const value = Number(requested);
  return String(value === 0 ? max : Math.min(value, max));
}

/** The throttle stage's decisions for one gateway. */
export class Throttle {
  private readonly slots: WatchSlots;

  constructor(
    readonly failures: AuthFailureLimiter,
    readonly watches: WatchLimits = DEFAULT_WATCH_LIMITS,
  ) {
    this.slots = new WatchSlots(watches.perIdentity);
  }

  /**
   * Whether a caller presenting `token` from `source` is judged on the caches alone: it (its
   * source or its key id) failed recently. Synchronous; false in the common case at no cost.
   */
  cachedOnly(source: string | undefined, token: string): boolean {
    if (!this.failures.watching()) return false;
    const keyId = keyIdOf(token);
    return this.failures.mayBeBlocked(source, keyId === undefined ? undefined : keySubject(keyId));
  }

  /**
   * The answer to a failed authentication, after counting it: 429 with `Retry-After` once the
   * source or the key id is over its limit, 401 otherwise ("expired" said as such).
   */
  async refusal(
    source: string | undefined,
    failure: AuthenticationFailure,
    keyId: string | undefined,
  ): Promise<StatusError> {
    const wait = await this.failures.failed(source, keyId === undefined ? undefined : keySubject(keyId));
    if (wait !== undefined) return tooManyRequests(wait);
    return failure instanceof AccessKeyExpired ? accessKeyExpired() : unauthorized();
  }

  /** A watch slot of `identity` (given back by the returned function), or 429 when it holds all. */
  watchSlot(identity: string): (() => void) | StatusError {
    const release = this.slots.acquire(identity);
    if (release) return release;
    return new StatusError(
      429,
      'TooManyRequests',
      `too many concurrent watches for this user (at most ${this.watches.perIdentity}); close some first`,
      { retryAfterSeconds: 1 },
      { 'Retry-After': '1' },
    );
  }
}

/**
 * The throttle stage for an authenticated request: a watch holds one of its identity's slots
 * until its answer ends (`exchange.release`, called by encode); 429 when the identity holds all.
 */
export function holdWatchSlot(throttle: Pick<Throttle, 'watchSlot'>, exchange: Exchange): void {
  if (exchange.identity === undefined || exchange.attributes?.verb !== 'watch') return;
  const slot = throttle.watchSlot(exchange.identity.username);
  if (slot instanceof StatusError) throw slot;
  exchange.release = slot;
}
