import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { RandomBytes } from '../identity/keys.ts';
import { LoginRefused } from './identity.ts';
import { mac, macEqual } from './secrets.ts';

/**
 * Throttling of password sign-ins, counting failures only (a success never costs anything):
 *
 * - per source address (the client address the gateway determined, trusted proxies applied):
 *   one address guessing many users' passwords;
 * - per user, for attempts without a device token of that user: many addresses guessing one
 *   user's password;
 * - per device token: a stolen device token cannot be used to guess either.
 *
 * A device token (OWASP "device cookies") is handed out by every successful password sign-in and
 * names the user it was issued to. An attempt carrying a valid token for the user it names is
 * exempt from the per-source and per-user limits, so an attacker guessing a user's password
 * (which blocks the user for unknown devices) does not lock the real user out of the browser or
 * terminal they signed in from before. Counters are in memory per gateway replica
 * (rate-limiter-flexible), as the gateway's key-failure limits.
 */

/** Too many failed sign-ins from here or for this user; try again after `retryAfterSeconds`. */
export class LoginThrottled extends LoginRefused {
  override readonly name = 'LoginThrottled';
  override readonly code = 429;
  constructor(readonly retryAfterSeconds: number) {
    super(`too many failed sign-ins; try again in ${retryAfterSeconds} seconds`);
  }
}

export interface ThrottleLimit {
  readonly failures: number;
  readonly windowSeconds: number;
  readonly blockSeconds: number;
}

export interface LoginThrottleLimits {
  readonly perSource: ThrottleLimit;
  readonly perUser: ThrottleLimit;
  readonly perDevice: ThrottleLimit;
}

export const DEFAULT_LOGIN_THROTTLE_LIMITS: LoginThrottleLimits = {
  perSource: { failures: 20, windowSeconds: 600, blockSeconds: 600 },
  perUser: { failures: 5, windowSeconds: 900, blockSeconds: 900 },
  perDevice: { failures: 5, windowSeconds: 900, blockSeconds: 900 },
};

/** Lifetime of a device token. */
export const DEVICE_TOKEN_TTL_SECONDS = 90 * 24 * 60 * 60;

export interface Attempt {
  readonly source: string;
  /** The username as typed (counted by its User object name, so spellings share a counter). */
  readonly user: string;
  /** A device token presented with the attempt, if any. */
  readonly deviceToken?: string | undefined;
}

const limiter = (limit: ThrottleLimit, keyPrefix: string) =>
  new RateLimiterMemory({
    keyPrefix,
    points: limit.failures,
    duration: limit.windowSeconds,
    blockDuration: limit.blockSeconds,
  });

export class LoginThrottle {
  private readonly bySource: RateLimiterMemory;
  private readonly byUser: RateLimiterMemory;
  private readonly byDevice: RateLimiterMemory;

  private readonly deviceKey: () => Promise<Uint8Array>;

  /** `deviceKey`: the key signing device tokens, or how to get it once it can be read. */
  constructor(
    deviceKey: Uint8Array | (() => Promise<Uint8Array>),
    private readonly limits: LoginThrottleLimits = DEFAULT_LOGIN_THROTTLE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {
    this.deviceKey = typeof deviceKey === 'function' ? deviceKey : async () => deviceKey;
    this.bySource = limiter(limits.perSource, 'login-source');
    this.byUser = limiter(limits.perUser, 'login-user');
    this.byDevice = limiter(limits.perDevice, 'login-device');
  }

  /** A device token for `user`, to hand out after a successful sign-in. */
  async issueDeviceToken(user: string, random: RandomBytes): Promise<string> {
    const body = `${Buffer.from(user, 'utf8').toString('base64url')}.${Math.floor(this.now() / 1000)}.${Buffer.from(random(12)).toString('base64url')}`;
    return `${body}.${mac(body, await this.deviceKey())}`;
  }

  /** The device token's id when it is valid and names `user`; undefined otherwise. */
  private async trustedDevice(attempt: Attempt): Promise<string | undefined> {
    const token = attempt.deviceToken;
    if (!token || token.length > 1024) return undefined;
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

  /** Seconds to wait before this attempt may be checked; undefined when it may go ahead. */
  async blockedFor(attempt: Attempt): Promise<number | undefined> {
    const device = await this.trustedDevice(attempt);
    const waits =
      device !== undefined
        ? [await this.wait(this.byDevice, this.limits.perDevice, device)]
        : await Promise.all([
            this.wait(this.bySource, this.limits.perSource, attempt.source),
            this.wait(this.byUser, this.limits.perUser, attempt.user),
          ]);
    const longest = Math.max(0, ...waits.map((wait) => wait ?? 0));
    return longest > 0 ? longest : undefined;
  }

  /** Counts a failed attempt. */
  async failed(attempt: Attempt): Promise<void> {
    const device = await this.trustedDevice(attempt);
    if (device !== undefined) {
      await this.count(this.byDevice, device);
      return;
    }
    await Promise.all([this.count(this.bySource, attempt.source), this.count(this.byUser, attempt.user)]);
  }

  private async wait(
    limiter: RateLimiterMemory,
    limit: ThrottleLimit,
    key: string,
  ): Promise<number | undefined> {
    const res = await limiter.get(key);
    if (!res || res.consumedPoints < limit.failures) return undefined;
    return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  }

  private async count(limiter: RateLimiterMemory, key: string): Promise<void> {
    try {
      await limiter.consume(key, 1);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
    }
  }
}
