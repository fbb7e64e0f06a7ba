import type { AccessKeyType, OwnedAccessKey } from '../api/ownedaccesskey.ts';
import type { Scope } from '../api/scope.ts';
import {
  AccessKeyDisabled,
  AccessKeyExpired,
  type AuthenticationFailure,
  InvalidAccessKey,
} from './authentication-failures.ts';
import {
  type AccessKeyLifetimeLimits,
  AccessKeyWithoutCreationTimestamp,
  accessKeyExpiry,
} from './expiry.ts';
import { type KeyOwner, type OwnerLookups, resolveOwner } from './key-owner.ts';
import {
  accessKeyDigest,
  accessKeyIdOf,
  checksumMatches,
  decodeStoredHash,
  digestMatchesStored,
  MalformedAccessKey,
} from './keys.ts';

/**
 * The authentication decision for a bearer access key, free of HTTP and Kubernetes calls: the
 * gateway and the TokenReview webhook call it with informer-cache lookups.
 *
 * Order (each step only runs when the previous ones passed):
 * 1. parse the token ({@link MalformedAccessKey} for a wrong length or shape: no lookup at all; a
 *    wrong checksum is the same refusal, told once no stored hash matched: a match is the very
 *    text that was hashed, so on the success path the checksum would only cost time);
 * 2. find the keys with that id and verify the secret against their `spec.keyHash`: the key is
 *    the one whose hash matches, whatever order the objects come in (ids are unique at
 *    admission, but a copy of someone's id with another secret must not shadow their key). An
 *    unknown id is verified against a dummy hash, so it costs the same work as a wrong secret,
 *    and both give the same {@link InvalidAccessKey}. Nothing about a key's state is revealed
 *    before this step succeeds;
 * 3. {@link AccessKeyDisabled} (also while the key is being deleted);
 * 4. {@link AccessKeyExpired} when `now >= accessKeyExpiry(...)` (the gateway answers "the access
 *    key expired, log in again");
 * 5. resolve who the key acts as ({@link AccessKeyOwnerInvalid}, {@link UserDisabled}).
 *
 * Identity (DESIGN.md "Identity"):
 * - user key (`spec.user: u`): username = the User's `spec.subject` (the Kubernetes username the
 *   platform acts as for it), or `u` when unset; groups `platform:authenticated`,
 *   `platform:user:u`, `platform:team:t` for each existing team `t` in the User's `status.teams`
 *   (never a scan of all teams), the key's `spec.groups`, and `platform:admins` when the User or one
 *   of those teams holds the cluster role `platform-admin`.
 * - team key (`spec.team: t`) acts as the team, not as any user: username `platform:team:t`
 *   (cannot collide with a user: object names have no `:`), groups `platform:authenticated`,
 *   `platform:team:t`, the key's groups, and `platform:admins` when the team is an admin team.
 * - subject key (`spec.subject: s`): username `s`, groups `platform:authenticated` and the key's.
 * Exactly one of `user`, `team`, `subject` must be set. The `system:` and `platform:` prefixes are
 * reserved: a key whose extra groups or resulting username (other than the team form above) use
 * them is refused, so a key can never claim `platform:admins`, another team, or a Kubernetes
 * system identity, whatever admission let through.
 */

export {
  AccessKeyDisabled,
  AccessKeyExpired,
  type AuthenticationFailure,
  InvalidAccessKey,
} from './authentication-failures.ts';
export { AccessKeyOwnerInvalid, givenToEarlierUser, type KeyOwner, UserDisabled } from './key-owner.ts';

export interface AuthenticatedIdentity extends KeyOwner {
  readonly accessKey: {
    /** Object name of the OwnedAccessKey (for activity records and audit). */
    readonly name: string;
    readonly id: string;
    readonly type: AccessKeyType | undefined;
    readonly scope: Scope | undefined;
    /** When the key stops working, or null for never. */
    readonly expiresAt: Date | null;
    /** Whether its life counts from its last activity (`spec.ttlAfterLastActivity`). */
    readonly ttlAfterLastActivity: boolean;
  };
}

export type AuthenticationResult =
  | {
      readonly ok: true;
      readonly identity: AuthenticatedIdentity;
      /** The record of the key that authenticated (its holder keeps per-key state there). */
      readonly record: KeyRecord;
    }
  | {
      readonly ok: false;
      readonly failure: AuthenticationFailure;
      /** The public key id when the token parsed (for per-key rate limits and logs); never the secret. */
      readonly keyId: string | undefined;
    };

export interface AuthenticationContext extends OwnerLookups {
  /** The key objects whose `spec.keyId` is `id` (an informer-cache index): normally one or none. */
  readonly lookupKey: (id: string) => readonly OwnedAccessKey[];
  /**
   * The same keys as their {@link KeyRecord}s, when the caller keeps them (the authenticator,
   * beside its cache): the first record filed under `id`, the others (normally none) chained
   * through {@link KeyRecord.sameId}. One lookup, and what the decision reads of a key in one
   * object, instead of the objects and their records found one by one (or an array per id): at
   * ten thousand keys each further object a request touches is a likely cache miss, most of the
   * decision's cost beyond the HMAC (bench/auth).
   */
  readonly lookupRecord?: (id: string) => KeyRecord | undefined;
  /** The HMAC key of `spec.keyHash`. */
  readonly pepper: Uint8Array | string;
  readonly now: () => Date;
  /** `Config.status.auth` lifetime limits. */
  readonly limits: AccessKeyLifetimeLimits;
  /**
   * A number that changes whenever what `lookupUser` or `lookupTeam` answer may have changed (the
   * caches' versions). With it, the owner resolved for a key object is reused while it is the
   * same, instead of being checked lookup by lookup on every request.
   */
  readonly ownersVersion?: () => number; // never returns to an earlier value
  /** Activity seen but maybe not written yet (ActivityRecorder.lastActivityOf), for ttlAfterLastActivity keys. */
  readonly recentActivity?: (keyName: string) => Date | undefined;
}

const fail = (failure: AuthenticationFailure, keyId?: string): AuthenticationResult => ({
  ok: false,
  failure,
  keyId,
});

/**
 * Per key object (informers replace objects, never change them): what the decision reads of it,
 * made once (its decoded `spec.keyHash`, whether it is refused outright), and what it last
 * derived from it: the owner last resolved with the lookups that resolution made. The owner is
 * reused while the caches' version ({@link AuthenticationContext.ownersVersion}) is the one it was
 * resolved at, or, when that changed or is not given, while every one of those lookups still
 * returns the very same object; so a changed User or Team (a new object in the cache) resolves
 * again, and the answer is always the one a fresh resolution would give, without its work on
 * every request.
 */
export interface KeyRecord {
  readonly key: OwnedAccessKey;
  readonly keyId: string | undefined;
  readonly name: string;
  /** The decoded `spec.keyHash`, in the record's own memory (see {@link storedHashOf}). */
  readonly storedHash: Uint8Array | undefined;
  /** Disabled, or being deleted. */
  readonly disabled: boolean;
  /** Its life counts from its activity (`spec.ttlAfterLastActivity`). */
  readonly activityBased: boolean;
  // What the decision derived from the key, kept on the record itself (not in objects of their
  // own: at ten thousand keys every further object a request reads is a likely cache miss).
  /**
   * For a key whose life does not count from its activity: its expiry (`expiresAt`) under one
   * `limits` object (the platform config's, kept while the config is unchanged).
   */
  expiryLimits: AccessKeyLifetimeLimits | undefined;
  expiresAt: Date | null;
  /** The owner last resolved, the lookups that resolution made, and the caches' version then. */
  owner: KeyOwner | undefined;
  ownerLookups: readonly Lookup[];
  ownerVersion: number | undefined;
  /**
   * The last answer (for a key whose life does not count from its activity), handed out again
   * while its owner and expiry hold (the same identity object also keeps what is derived from it
   * per identity, such as the impersonation headers).
   */
  answer: AuthenticationResult | undefined;
  answerOwner: KeyOwner | undefined;
  /** The second of the last activity its holder recorded for it (the authenticator's, once per second). */
  activitySecond: number;
  /**
   * The next record its holder filed under the same key id ({@link AuthenticationContext.lookupRecord}):
   * ids are unique at admission, so normally none.
   */
  sameId: KeyRecord | undefined;
}
type Lookup = readonly ['user' | 'team', string, unknown];

/** A new record of a key object (a holder of records makes one per object it caches). */
export function newKeyRecord(key: OwnedAccessKey): KeyRecord {
  return {
    key,
    keyId: key.spec?.keyId,
    name: key.metadata?.name ?? '',
    storedHash: storedHashOf(key.spec?.keyHash ?? ''),
    disabled: key.spec?.disabled === true || Boolean(key.metadata?.deletionTimestamp),
    activityBased: key.spec?.ttlAfterLastActivity === true,
    expiryLimits: undefined,
    expiresAt: null,
    owner: undefined,
    ownerLookups: [],
    ownerVersion: undefined,
    answer: undefined,
    answerOwner: undefined,
    activitySecond: Number.NaN,
    sameId: undefined,
  };
}

/**
 * The decoded stored hash as a typed array of its own: 32 bytes are allocated inside the V8 heap
 * beside the array object, where a Buffer decoded from hex is a view on a shared off-heap pool
 * (two more objects, elsewhere in memory, to reach on every request).
 */
function storedHashOf(keyHash: string): Uint8Array | undefined {
  const decoded = decodeStoredHash(keyHash);
  return decoded ? new Uint8Array(decoded) : undefined;
}

/** The record of a key object, for callers that do not keep records themselves. */
const records = new WeakMap<OwnedAccessKey, KeyRecord>();
function recordOf(key: OwnedAccessKey): KeyRecord {
  let record = records.get(key);
  if (!record) {
    record = newKeyRecord(key);
    records.set(key, record);
  }
  return record;
}

function ownerOf(record: KeyRecord, context: AuthenticationContext): KeyOwner | AuthenticationFailure {
  const cached = record.owner;
  const version = context.ownersVersion?.();
  if (cached && version !== undefined && record.ownerVersion === version) return cached;
  if (cached && record.ownerLookups.every(([kind, name, found]) => lookup(context, kind, name) === found)) {
    record.ownerVersion = version;
    return cached;
  }
  const lookups: Lookup[] = [];
  const recording: AuthenticationContext = {
    ...context,
    lookupUser: (name) => {
      const found = context.lookupUser(name);
      lookups.push(['user', name, found]);
      return found;
    },
    lookupTeam: (name) => {
      const found = context.lookupTeam(name);
      lookups.push(['team', name, found]);
      return found;
    },
  };
  const owner = resolveOwner(record.key, recording);
  record.owner = owner instanceof Error ? undefined : owner;
  record.ownerLookups = lookups;
  record.ownerVersion = version;
  return owner;
}

const lookup = (context: AuthenticationContext, kind: 'user' | 'team', name: string): unknown =>
  kind === 'user' ? context.lookupUser(name) : context.lookupTeam(name);

/** Decides who a bearer token is, or why it is nobody. See the module comment for the rules. */
export function authenticateAccessKey(token: string, context: AuthenticationContext): AuthenticationResult {
  const id = accessKeyIdOf(token);
  if (id instanceof MalformedAccessKey) return fail(id);

  // Always one HMAC and at least one constant-time comparison, found or not.
  const digest = accessKeyDigest(token, context.pepper);
  let record: KeyRecord | undefined;
  let compared = false;
  if (context.lookupRecord) {
    for (let candidate = context.lookupRecord(id); candidate; candidate = candidate.sameId) {
      if (candidate.keyId !== id) continue;
      compared = true;
      if (digestMatchesStored(digest, candidate.storedHash)) record = candidate;
    }
  } else {
    for (const key of context.lookupKey(id)) {
      const candidate = recordOf(key);
      if (candidate.keyId !== id) continue;
      compared = true;
      if (digestMatchesStored(digest, candidate.storedHash)) record = candidate;
    }
  }
  if (!compared) digestMatchesStored(digest, undefined);
  if (!record) {
    return checksumMatches(token)
      ? fail(new InvalidAccessKey(), id)
      : fail(new MalformedAccessKey('checksum'));
  }
  return keyStanding(record, id, context);
}

/**
 * Steps 3 to 5 of the decision (see the module comment) for the key of `record`, whose secret
 * verified: whether it is disabled or expired now, and who it acts as. A holder of records asks
 * it again for a key that authenticated earlier (a connection it opened is still open): the
 * same checks, so a connection lives exactly as long as its key would still authenticate.
 */
export function keyStanding(
  record: KeyRecord,
  id: string,
  context: AuthenticationContext,
): AuthenticationResult {
  if (record.disabled) return fail(new AccessKeyDisabled(), id);

  const { activityBased } = record;
  let expiresAt: Date | null;
  if (!activityBased && record.expiryLimits === context.limits) {
    expiresAt = record.expiresAt;
  } else {
    try {
      expiresAt = accessKeyExpiry(
        record.key,
        context.limits,
        activityBased ? context.recentActivity?.(record.name) : undefined,
      );
    } catch (error) {
      // A lifetime limit without a creation time: fail closed.
      if (error instanceof AccessKeyWithoutCreationTimestamp)
        return fail(new AccessKeyExpired(undefined), id);
      throw error;
    }
    if (!activityBased) {
      record.expiryLimits = context.limits;
      record.expiresAt = expiresAt;
      record.answer = undefined; // made with the expiry under other limits
    }
  }
  if (expiresAt !== null && context.now().getTime() >= expiresAt.getTime()) {
    return fail(new AccessKeyExpired(expiresAt), id);
  }

  const owner = ownerOf(record, context);
  if (owner instanceof Error) return fail(owner, id);
  // The answer was made with the expiry above (a new one drops it) and is kept with its owner.
  if (!activityBased && record.answer !== undefined && record.answerOwner === owner) return record.answer;
  const { key } = record;
  const result: AuthenticationResult = {
    ok: true,
    identity: {
      ...owner,
      accessKey: {
        name: record.name,
        id,
        type: key.spec.type,
        scope: key.spec.scope,
        expiresAt,
        ttlAfterLastActivity: activityBased,
      },
    },
    record,
  };
  if (!activityBased) {
    record.answer = result;
    record.answerOwner = owner;
  }
  return result;
}
