import {
  AccessKeyDisabled,
  AccessKeyExpired,
  type AuthenticatedIdentity,
  type AuthenticationResult,
  UserDisabled,
} from '../identity/authenticate.ts';
import type { IdentityChange } from '../identity/authenticator.ts';
import type { Clock, Timer } from '../runtime/clock.ts';
import type { GatewayMetrics } from './metrics.ts';

/**
 * Long-lived connections (watches of the management API and through the access proxy, upgraded
 * exec/attach/port-forward sessions, followed logs) end when the access key that opened them stops
 * being valid: disabled, deleted, expired, or its owner removed or disabled. Not at the stream's
 * natural end: within moments of the change reaching the gateway's caches.
 *
 * Event-driven, no polling: the authenticator reports every change of a key, User or Team and of
 * the lifetime limits ({@link KeyAuthority.onIdentityChange}); the connections a change may concern
 * (by key name, or by the owner the key acts as) are judged again by the authentication decision's
 * own checks ({@link KeyAuthority.standing}), and a timer per key fires at its expiry. A connection
 * whose key fails them is cut (its `cut` destroys the client's response or socket: the client sees
 * the stream end, and its next request is refused as any request with that key would be). A change
 * that leaves the key valid (a new label, another team, another key of the same owner) cuts nothing.
 */

/** What the sessions need of the authenticator (`AccessKeyAuthenticator`). */
export interface KeyAuthority {
  /** The decision on the key that authenticated `identity`, now; undefined when the caches hold no such key. */
  standing(identity: AuthenticatedIdentity): AuthenticationResult | undefined;
  onIdentityChange(listener: (change: IdentityChange) => void): void;
}

/** Why a connection was cut: the `reason` label of the cut counter. */
export type CutReason = 'KeyDeleted' | 'KeyDisabled' | 'KeyExpired' | 'OwnerDisabled' | 'OwnerInvalid';

/**
 * Why a connection held by a key must end, from the decision on its key now (`undefined`: the key
 * is no longer in the caches); `undefined` when it may stay.
 */
export function cutReason(standing: AuthenticationResult | undefined): CutReason | undefined {
  if (standing === undefined) return 'KeyDeleted';
  if (standing.ok) return undefined;
  const { failure } = standing;
  if (failure instanceof AccessKeyDisabled) return 'KeyDisabled';
  if (failure instanceof AccessKeyExpired) return 'KeyExpired';
  if (failure instanceof UserDisabled) return 'OwnerDisabled';
  return 'OwnerInvalid';
}

/** The owner object whose changes concern a key's connections (`user:u`, `team:t`); none for a subject. */
function ownerOf(identity: AuthenticatedIdentity): string | undefined {
  if (identity.kind === 'User') return `user:${identity.name}`;
  if (identity.kind === 'Team') return `team:${identity.name}`;
  return undefined;
}

interface Session {
  readonly identity: AuthenticatedIdentity;
  readonly cut: () => void;
}

export interface KeySessionsDeps {
  readonly authority: KeyAuthority;
  readonly clock: Clock;
  /** The held gauge and the cut counter (`gateway_long_lived_connections...`). */
  readonly metrics?: Pick<GatewayMetrics, 'longLived' | 'longLivedCuts'>;
}

/** The long-lived connections each access key holds open, cut when the key stops being valid. */
export class KeySessions {
  /** Sessions by the object name of their key. */
  private readonly byKey = new Map<string, Set<Session>>();
  /** Key names by the owner their keys act as ({@link ownerOf}). */
  private readonly byOwner = new Map<string, Set<string>>();
  /** One timer per key with sessions: its expiry, when it has one. */
  private readonly expiries = new Map<string, Timer>();
  private held = 0;

  constructor(private readonly deps: KeySessionsDeps) {
    deps.authority.onIdentityChange((change) => this.changed(change));
  }

  /**
   * Registers a long-lived connection opened by `identity`, cut by `cut` (called at most once)
   * when its key stops being valid. Returns the function that unregisters it (once), to be called
   * when the connection ends.
   */
  hold(identity: AuthenticatedIdentity, cut: () => void): () => void {
    const session: Session = { identity, cut };
    const keyName = identity.accessKey.name;
    addTo(this.byKey, keyName, session);
    const owner = ownerOf(identity);
    if (owner) addTo(this.byOwner, owner, keyName);
    this.held++;
    this.deps.metrics?.longLived.inc();
    // The key may have changed between its authentication and now (a read past the caches is
    // awaited): judged once more, unless the caches do not hold it yet (then its events will).
    const standing = this.deps.authority.standing(identity);
    if (standing !== undefined && cutReason(standing) !== undefined) {
      this.deps.clock.setTimer(0, () => this.recheck(keyName));
    } else {
      this.scheduleExpiry(keyName);
    }
    return () => this.drop(session);
  }

  /** Connections held now. */
  count(): number {
    return this.held;
  }

  private changed(change: IdentityChange): void {
    if (change.kind === 'key') this.recheck(change.name);
    else if (change.kind === 'limits') for (const keyName of [...this.byKey.keys()]) this.recheck(keyName);
    else
      for (const keyName of [...(this.byOwner.get(`${change.kind}:${change.name}`) ?? [])])
        this.recheck(keyName);
  }

  /** Judges every connection of the key named `keyName` again: cuts those it no longer allows. */
  private recheck(keyName: string): void {
    for (const session of [...(this.byKey.get(keyName) ?? [])]) {
      const reason = cutReason(this.deps.authority.standing(session.identity));
      if (reason === undefined) continue;
      this.drop(session);
      this.deps.metrics?.longLivedCuts.inc({ reason });
      session.cut();
    }
    this.scheduleExpiry(keyName);
  }

  /** A timer at the earliest expiry of the key's connections (as the decision computes it now). */
  private scheduleExpiry(keyName: string): void {
    this.expiries.get(keyName)?.cancel();
    this.expiries.delete(keyName);
    let earliest: number | undefined;
    for (const session of this.byKey.get(keyName) ?? []) {
      const standing = this.deps.authority.standing(session.identity);
      // Not in the caches yet: the expiry it authenticated with.
      const expiresAt = standing?.ok
        ? standing.identity.accessKey.expiresAt
        : session.identity.accessKey.expiresAt;
      if (expiresAt !== null && (earliest === undefined || expiresAt.getTime() < earliest)) {
        earliest = expiresAt.getTime();
      }
    }
    if (earliest === undefined) return;
    const delay = Math.max(0, earliest - this.deps.clock.now());
    this.expiries.set(
      keyName,
      this.deps.clock.setTimer(delay, () => {
        this.expiries.delete(keyName);
        this.recheck(keyName);
      }),
    );
  }

  private drop(session: Session): void {
    const keyName = session.identity.accessKey.name;
    const sessions = this.byKey.get(keyName);
    if (!sessions?.delete(session)) return;
    this.held--;
    this.deps.metrics?.longLived.dec();
    const owner = ownerOf(session.identity);
    if (owner && ![...sessions].some((other) => ownerOf(other.identity) === owner)) {
      removeFrom(this.byOwner, owner, keyName);
    }
    if (sessions.size > 0) return;
    this.byKey.delete(keyName);
    this.expiries.get(keyName)?.cancel();
    this.expiries.delete(keyName);
  }
}

function addTo<T>(index: Map<string, Set<T>>, name: string, item: T): void {
  const items = index.get(name);
  if (items) items.add(item);
  else index.set(name, new Set([item]));
}

function removeFrom<T>(index: Map<string, Set<T>>, name: string, item: T): void {
  const items = index.get(name);
  if (!items) return;
  items.delete(item);
  if (items.size === 0) index.delete(name);
}
