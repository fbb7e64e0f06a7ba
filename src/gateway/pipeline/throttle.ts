import { accessKeyExpired, StatusError, tooManyRequests, unauthorized } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { type AuthFailureLimiter, keySubject } from '../../http/failure-limiter.ts';
import {
  AccessKeyExpired,
  type AuthenticatedIdentity,
  type AuthenticationFailure,
} from '../../identity/authenticate.ts';
import { keyIdOf } from '../key-authentication.ts';
import type { KeySessions } from '../sessions.ts';
import type { Exchange } from './exchange.ts';

/**
 * The throttle stage: limits on failed authentications (DESIGN.md section 5, 429) and on
 * concurrent long-lived connections per identity (watches, upgraded streams, followed logs), which
 * it also hands to the key sessions (`../sessions.ts`) that cut them when their key stops being
 * valid.
 *
 * Failures are counted per source address (the client, trusted proxies resolved) and per
 * subject (`key:<id>`, the public part of a presented key), by the platform's one failure limiter
 * (`src/http/failure-limiter.ts`, where "limit N" is defined), so that neither one client guessing
 * many keys nor many clients guessing one key's secret get far. Only failing attempts are
 * throttled: a key whose secret verifies is accepted whatever failures others made from its
 * source or with its id (a wrong secret sent with a victim's public id cannot lock the victim
 * out). A caller with recent failures is judged on the caches alone (no apiserver reads for it),
 * and a failure past a limit is answered 429 with `Retry-After` instead of 401.
 */

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

/** The throttle stage's decisions for one gateway. */
export class Throttle {
  private readonly slots: WatchSlots;

  constructor(
    readonly failures: AuthFailureLimiter,
    readonly watches: WatchLimits = DEFAULT_WATCH_LIMITS,
    /** Where long-lived connections are registered to be cut with their key; none: never cut. */
    private readonly sessions?: KeySessions,
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

  /**
   * A long-lived connection of `identity`: one of its watch slots, and its registration to be cut
   * (`cut`) when the key stops being valid. The returned function gives both back (once); 429 when
   * the identity holds all its slots.
   */
  holdLongLived(identity: AuthenticatedIdentity, cut: () => void): (() => void) | StatusError {
    const slot = this.watchSlot(identity.username);
    if (slot instanceof StatusError) return slot;
    const session = this.sessions?.hold(identity, cut);
    return () => {
      slot();
      session?.();
    };
  }
}

/**
 * Whether a request holds its connection open for as long as the client (or the target) wants:
 * a watch, an upgraded connection (exec, attach, port-forward, over SPDY or WebSocket), a followed
 * log (`follow=true`).
 */
export function isLongLived(exchange: Exchange, attributes: RequestAttributes | undefined): boolean {
  if (attributes?.verb === 'watch') return true;
  if (exchange.request.headers.upgrade !== undefined) return true;
  return attributes?.subresource === 'log' && new URLSearchParams(exchange.search).get('follow') === 'true';
}

/**
 * The throttle stage for an authenticated request, management API and access proxy alike: a
 * long-lived request ({@link isLongLived}) holds one of its identity's slots until its answer ends
 * (the returned release, called by encode), and is cut when its key stops being valid: by `cut`,
 * which by default destroys the response (and so the client's connection; the exchange's signal
 * then aborts what it waits on upstream). An upgraded connection passes the cut of its socket.
 * 429 when the identity holds all its slots; undefined when the request holds nothing.
 */
export function holdWatchSlot(
  throttle: Pick<Throttle, 'holdLongLived'>,
  exchange: Exchange,
  held: { readonly identity: AuthenticatedIdentity | undefined; readonly attributes: RequestAttributes },
  cut: () => void = () => exchange.response.destroy(),
): (() => void) | undefined {
  if (held.identity === undefined || !isLongLived(exchange, held.attributes)) return undefined;
  const release = throttle.holdLongLived(held.identity, cut);
  if (release instanceof StatusError) throw release;
  return release;
}
