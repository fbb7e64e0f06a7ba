import { sourceBucket } from '../http/client-address.ts';
import { FailureCounter, type FailureLimit } from '../http/failure-limiter.ts';
import type { RandomBytes } from '../identity/keys.ts';
import { LoginRefused } from './identity.ts';
import { mac, macEqual } from './secrets.ts';

/**
 * Throttling of password sign-ins (and of cluster-manager keys), by counting every attempt
 * BEFORE it is checked and giving the point back when the check succeeds, so that attempts sent
 * at once cannot all be checked before the first failure is counted:
 *
 * - per source address (the client address the gateway determined, trusted proxies applied; an
 *   IPv6 client by its /64, see `sourceBucket`): one address guessing many users' passwords;
 * - per user (the User object's name), for attempts without a device token of that user: many
 *   addresses guessing one user's password;
 * - per device token: a stolen device token cannot be used to guess either.
 *
 * The counters are the platform's one failure limiter (`src/http/failure-limiter.ts`), so "limit
 * N" means what it means for the gateway's failed keys: N failed attempts within the window are
 * checked and answered as failures, the next attempt is refused with `LoginThrottled` (429,
 * `Retry-After`) without being checked, until the block ends.
 *
 * Checks are expensive (scrypt: 32 MiB and about 0.1 s of a core), so besides counting, the
 * checks running at once are capped per source, per user (or device) and in all: an attempt over
 * a cap is refused at once (429, `Retry-After: 1`), never queued, so a burst from one place costs
 * at most its share of checks and leaves the rest for everyone else.
 *
 * A device token (OWASP "device cookies") is handed out by every successful password sign-in and
 * names the user it was issued to. An attempt carrying a valid token for the user it names is
 * exempt from the per-source and per-user limits, so an attacker guessing a user's password
 * (which blocks the user for unknown devices) does not lock the real user out of the browser or
 * terminal they signed in from before. Counters are in memory per gateway replica
 * (rate-limiter-flexible), as the gateway's key-failure limits; a counter lives for its window
 * (or block) after its last attempt, so memory is bounded by the attempts the limits let in.
 */

/** Too many sign-ins from here or for this user; try again after `retryAfterSeconds`. */
export class LoginThrottled extends LoginRefused {
  override readonly name = 'LoginThrottled';
  override readonly code = 429;
  constructor(
    readonly retryAfterSeconds: number,
    message = `too many failed sign-ins; try again in ${retryAfterSeconds} seconds`,
  ) {
    super(message);
  }
}

/** Checks that may run at once. */
export interface ConcurrentChecks {
  /** In all, on this replica. */
  readonly total: number;
  /** From one source (IPv6: one /64). */
  readonly perSource: number;
  /** For one user, or one device token. */
  readonly perUser: number;
}

export interface LoginThrottleLimits {
  readonly perSource: FailureLimit;
  readonly perUser: FailureLimit;
  readonly perDevice: FailureLimit;
  /** Default {@link DEFAULT_CONCURRENT_CHECKS}. */
  readonly concurrent?: ConcurrentChecks;
}

/**
 * Four checks at once fill libuv's four threads (scrypt runs there) and hold 128 MiB; one source
 * takes at most two, so a single attacker leaves half for everyone else.
 */
export const DEFAULT_CONCURRENT_CHECKS: ConcurrentChecks = { total: 4, perSource: 2, perUser: 2 };

export const DEFAULT_LOGIN_THROTTLE_LIMITS: LoginThrottleLimits = {
  perSource: { failures: 20, windowSeconds: 600, blockSeconds: 600 },
  perUser: { failures: 5, windowSeconds: 900, blockSeconds: 900 },
  perDevice: { failures: 5, windowSeconds: 900, blockSeconds: 900 },
  concurrent: DEFAULT_CONCURRENT_CHECKS,
};

/** Lifetime of a device token. */
export const DEVICE_TOKEN_TTL_SECONDS = 90 * 24 * 60 * 60;

export interface Attempt {
  readonly source: string;
  /**
   * The User object's name the attempt is for (the caller resolves what was typed to it, so
   * spellings share a counter), or a name for what else is guessed at; none: per source only.
   */
  readonly user?: string | undefined;
  /** A device token presented with the attempt, if any. */
  readonly deviceToken?: string | undefined;
}

/** An attempt let through to its check, already counted. */
export interface AdmittedAttempt {
  /** The check succeeded: the attempt's count is given back. */
  succeeded(): Promise<void>;
  /** The check is over, whichever way: its places among the running checks are freed (idempotent). */
  done(): void;
}

/** Checks running at once, by key (`*` for all); an entry exists only while a check holds it. */
export class RunningChecks {
  private readonly held = new Map<string, number>();

  constructor(private readonly limits: ConcurrentChecks) {}

  /**
   * A place for a check from `source` for `subject` (`u:<user>`, `d:<device>`, or none), with the
   * function that gives it back (once); undefined when the source, the subject or all are full.
   */
  acquire(source: string, subject: string | undefined): (() => void) | undefined {
    const keys: Array<[string, number]> = [
      ['*', this.limits.total],
      [`s:${source}`, this.limits.perSource],
      ...(subject === undefined ? [] : ([[subject, this.limits.perUser]] as Array<[string, number]>)),
    ];
    if (keys.some(([key, limit]) => (this.held.get(key) ?? 0) >= limit)) return undefined;
    for (const [key] of keys) this.held.set(key, (this.held.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const [key] of keys) {
        const left = (this.held.get(key) ?? 1) - 1;
        if (left <= 0) this.held.delete(key);
        else this.held.set(key, left);
      }
    };
  }

  /** Checks running for `key` (`*`, `s:<source bucket>`, `u:<user>`, `d:<device>`). */
  count(key: string): number {
    return this.held.get(key) ?? 0;
  }
}

export class LoginThrottle {
  private readonly bySource: FailureCounter;
  private readonly byUser: FailureCounter;
  private readonly byDevice: FailureCounter;
  readonly running: RunningChecks;

  private readonly deviceKey: () => Promise<Uint8Array>;

  /** `deviceKey`: the key signing device tokens, or how to get it once it can be read. */
  constructor(
    deviceKey: Uint8Array | (() => Promise<Uint8Array>),
    limits: LoginThrottleLimits = DEFAULT_LOGIN_THROTTLE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {
    this.deviceKey = typeof deviceKey === 'function' ? deviceKey : async () => deviceKey;
    this.bySource = new FailureCounter(limits.perSource, 'login-source');
    this.byUser = new FailureCounter(limits.perUser, 'login-user');
    this.byDevice = new FailureCounter(limits.perDevice, 'login-device');
    this.running = new RunningChecks(limits.concurrent ?? DEFAULT_CONCURRENT_CHECKS);
  }

  /** A device token for `user`, to hand out after a successful sign-in. */
  async issueDeviceToken(user: string, random: RandomBytes): Promise<string> {
    const body = `${Buffer.from(user, 'utf8').toString('base64url')}.${Math.floor(this.now() / 1000)}.${Buffer.from(random(12)).toString('base64url')}`;
    return `${body}.${mac(body, await this.deviceKey())}`;
  }

  /** The device token's id when it is valid and names the attempt's user; undefined otherwise. */
  private async trustedDevice(attempt: Attempt): Promise<string | undefined> {
    const token = attempt.deviceToken;
    if (!token || token.length > 1024 || attempt.user === undefined) return undefined;
    const parts = token.split('.');
    if (parts.length !== 4) return undefined;
    const [user, issued, nonce, signature] = parts as [string, string, string, string];
    const body = `${user}.${issued}.${nonce}`;
    if (!macEqual(mac(body, await this.deviceKey()), signature)) return undefined;
    if (Buffer.from(user, 'base64url').toString('utf8') !== attempt.user) return undefined;
    const age = this.now() / 1000 - Number(issued);
    if (!Number.isFinite(age) || age < 0 || age > DEVICE_TOKEN_TTL_SECONDS) return undefined;
    return nonce;
  }

  /**
   * Lets an attempt through to its check, counted already, or refuses it ({@link LoginThrottled}):
   * at once when as many checks as allowed run for its source, its user (or device) or in all;
   * until the block ends when its source or user (with a valid device token: that device) is
   * over its limit. The caller calls `done()` when the check is over and `succeeded()` when it
   * succeeded.
   */
  async admit(attempt: Attempt): Promise<AdmittedAttempt> {
    const device = await this.trustedDevice(attempt);
    const source = sourceBucket(attempt.source);
    const subject =
      device !== undefined ? `d:${device}` : attempt.user !== undefined ? `u:${attempt.user}` : undefined;
    const release = this.running.acquire(source, subject);
    if (!release) throw new LoginThrottled(1, 'too many sign-ins at once; try again in 1 second');
    const counters: Array<[FailureCounter, string]> =
      device !== undefined
        ? [[this.byDevice, device]]
        : [
            [this.bySource, source],
            ...(attempt.user === undefined ? [] : [[this.byUser, attempt.user] as [FailureCounter, string]]),
          ];
    try {
      for (const [counter, key] of counters) {
        // Counted before the check: one past the limit (or blocked) is refused unchecked.
        const wait = await counter.count(key);
        if (wait !== undefined) throw new LoginThrottled(wait);
      }
    } catch (err) {
      release();
      throw err;
    }
    return {
      succeeded: async () => {
        for (const [counter, key] of counters) await counter.giveBack(key);
      },
      done: release,
    };
  }
}
