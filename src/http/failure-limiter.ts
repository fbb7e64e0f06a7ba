import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { sourceBucket } from './client-address.ts';

/**
 * The one failure limiter of every component that checks credentials: the gateway's access keys
 * (and the TokenReview webhook's), an endpoint's own credential checks (an OpenID client's
 * secret), and password sign-ins (`src/login/throttle.ts`, which counts each attempt before its
 * check and gives the count back when the check succeeds).
 *
 * "Limit N" means one thing everywhere: N failures within the window are answered as failures,
 * the next failing attempt is refused (429 with `Retry-After`) and so is every attempt judged
 * blocked until the block ends. Counting is in memory per replica (rate-limiter-flexible's
 * `RateLimiterMemory`); a counter lives for its window (or block) after its last failure, so
 * memory is bounded by the failures the limits let in. Sources are counted by
 * {@link sourceBucket}: an IPv6 client by its /64.
 */

export interface FailureLimit {
  /** Failures allowed within the window (answered as failures); the next failing attempt is refused. */
  readonly failures: number;
  readonly windowSeconds: number;
  /** How long a key stays blocked once over the limit. */
  readonly blockSeconds: number;
}

/** Failures per key under one {@link FailureLimit}. */
export class FailureCounter {
  private readonly limiter: RateLimiterMemory;

  /** `name`: what the keys are (`source`, `login-user`), kept apart from other counters'. */
  constructor(
    private readonly limit: FailureLimit,
    name: string,
  ) {
    this.limiter = new RateLimiterMemory({
      keyPrefix: name,
      points: limit.failures,
      duration: limit.windowSeconds,
      blockDuration: limit.blockSeconds,
    });
  }

  /** Counts one failure of `key`; the seconds to wait when it is past its limit now, undefined otherwise. */
  async count(key: string): Promise<number | undefined> {
    try {
      await this.limiter.consume(key, 1);
      return undefined;
    } catch (err) {
      // Past the limit: the limiter blocks the key; anything else is a bug worth surfacing.
      if (!(err instanceof RateLimiterRes)) throw err;
      return waitSeconds(err);
    }
  }

  /** The seconds `key` must still wait, undefined when it is not past its limit. */
  async blockedFor(key: string): Promise<number | undefined> {
    const res = await this.limiter.get(key);
    if (!res || res.consumedPoints <= this.limit.failures) return undefined;
    return waitSeconds(res);
  }

  /** Gives one count of `key` back (a check that succeeded); a window that ended holds nothing to give back. */
  async giveBack(key: string): Promise<void> {
    const current = await this.limiter.get(key);
    if (current && current.consumedPoints > 0) await this.limiter.reward(key, 1);
  }
}

const waitSeconds = (res: RateLimiterRes) => Math.max(1, Math.ceil(res.msBeforeNext / 1000));

export interface AuthFailureLimits {
  readonly perSource: FailureLimit;
  readonly perKey: FailureLimit;
}

export const DEFAULT_AUTH_FAILURE_LIMITS: AuthFailureLimits = {
  perSource: { failures: 30, windowSeconds: 60, blockSeconds: 60 },
  perKey: { failures: 10, windowSeconds: 60, blockSeconds: 300 },
};

/** How long after its last failure a source or key may still be blocked (or counted). */
const horizonMs = (limit: FailureLimit) => (limit.windowSeconds + limit.blockSeconds) * 1000;

/**
 * Failures per source and per subject (the gateway's keys, `key:<id>`; an endpoint's own
 * credentials such as a user's password or an OpenID client's secret), counted after they
 * happened: a caller is refused once its source or its subject is past its limit.
 */
export class AuthFailureLimiter {
  private readonly bySource: FailureCounter;
  private readonly byKey: FailureCounter;
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
    this.bySource = new FailureCounter(limits.perSource, 'source');
    this.byKey = new FailureCounter(limits.perKey, 'key');
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
      source === undefined ? undefined : this.bySource.blockedFor(sourceBucket(source)),
      subject === undefined ? undefined : this.byKey.blockedFor(subject),
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
      bucket === undefined ? undefined : this.bySource.count(bucket),
      subject === undefined ? undefined : this.byKey.count(subject),
    ]);
    return this.blockedFor(source, subject);
  }
}

/** The throttling subject of a presented key: its public id. */
export const keySubject = (keyId: string) => `key:${keyId}`;
/** The throttling subject of a password login. */
export const userSubject = (user: string) => `user:${user}`;
