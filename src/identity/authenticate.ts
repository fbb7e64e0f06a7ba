import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import type { Team, User } from '../api/identity.ts';
import { API_GROUP } from '../api/meta.ts';
import type { AccessKeyType, OwnedAccessKey } from '../api/ownedaccesskey.ts';
import type { Scope } from '../api/scope.ts';
import {
  type AccessKeyLifetimeLimits,
  AccessKeyWithoutCreationTimestamp,
  accessKeyExpiry,
} from './expiry.ts';
import {
  GROUP_ADMINS,
  GROUP_AUTHENTICATED,
  isReservedName,
  teamGroup,
  teamUsername,
  userGroup,
} from './groups.ts';
import {
  accessKeyDigest,
  checksumMatches,
  decodeStoredHash,
  digestMatchesStored,
  MalformedAccessKey,
  parseAccessKeyShape,
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

/** Unknown key id or wrong secret; deliberately one class with one message for both. */
export class InvalidAccessKey extends Error {
  override readonly name = 'InvalidAccessKey';
  constructor() {
    super('access key not found or invalid');
  }
}

export class AccessKeyDisabled extends Error {
  override readonly name = 'AccessKeyDisabled';
  constructor() {
    super('access key is disabled');
  }
}

export class AccessKeyExpired extends Error {
  override readonly name = 'AccessKeyExpired';
  constructor(readonly expiredAt: Date | undefined) {
    super('access key expired, log in again');
  }
}

/** The key names no usable owner: none or several of user/team/subject, a missing user or team, or a reserved name. */
export class AccessKeyOwnerInvalid extends Error {
  override readonly name = 'AccessKeyOwnerInvalid';
}

export class UserDisabled extends Error {
  override readonly name = 'UserDisabled';
  constructor() {
    super("the access key's user is disabled");
  }
}

export type AuthenticationFailure =
  | MalformedAccessKey
  | InvalidAccessKey
  | AccessKeyDisabled
  | AccessKeyExpired
  | AccessKeyOwnerInvalid
  | UserDisabled;

export interface AuthenticatedIdentity {
  /** Who the key acts as: a user, a team or a bare subject. */
  readonly kind: 'User' | 'Team' | 'Subject';
  /** The User or Team object name, or the subject. */
  readonly name: string;
  /** Kubernetes username to impersonate. */
  readonly username: string;
  /** Kubernetes groups to impersonate; sorted, without duplicates. */
  readonly groups: readonly string[];
  /** UID of the User or Team object, when there is one. */
  readonly uid: string | undefined;
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

export interface AuthenticationContext {
  /** The key objects whose `spec.keyId` is `id` (an informer-cache index): normally one or none. */
  readonly lookupKey: (id: string) => readonly OwnedAccessKey[];
  /**
   * The same keys as their {@link KeyRecord}s, when the caller keeps them (the authenticator,
   * beside its cache): one lookup, and what the decision reads of a key in one place, instead of
   * the objects and their records found one by one. At ten thousand keys the memory a decision
   * touches is most of its cost (bench/auth).
   */
  readonly lookupRecords?: (id: string) => readonly KeyRecord[];
  readonly lookupUser: (name: string) => User | undefined;
  readonly lookupTeam: (name: string) => Team | undefined;
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

const isAdmin = (holder: { spec: { clusterRoles?: { name: string }[] | undefined } }) =>
  (holder.spec.clusterRoles ?? []).some((role) => role.name === PLATFORM_ADMIN_CLUSTER_ROLE);

const sortedUnique = (items: readonly string[]) => [...new Set(items)].sort();

type Owner = Omit<AuthenticatedIdentity, 'accessKey'>;

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
  readonly storedHash: Buffer | undefined;
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
  owner: Owner | undefined;
  ownerLookups: readonly Lookup[];
  ownerVersion: number | undefined;
  /**
   * The last answer (for a key whose life does not count from its activity), handed out again
   * while its owner and expiry hold (the same identity object also keeps what is derived from it
   * per identity, such as the impersonation headers).
   */
  answer: AuthenticationResult | undefined;
  answerOwner: Owner | undefined;
  /** The second of the last activity its holder recorded for it (the authenticator's, once per second). */
  activitySecond: number;
}
type Lookup = readonly ['user' | 'team', string, unknown];

/** A new record of a key object (a holder of records makes one per object it caches). */
export function newKeyRecord(key: OwnedAccessKey): KeyRecord {
  return {
    key,
    keyId: key.spec?.keyId,
    name: key.metadata?.name ?? '',
    storedHash: decodeStoredHash(key.spec?.keyHash ?? ''),
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
  };
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

function ownerOf(record: KeyRecord, context: AuthenticationContext): Owner | AuthenticationFailure {
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

/**
 * Whether a user key was given to an earlier User of the same name, deleted since (a User made
 * again, say for another person with that username, must not inherit its keys), as kube-apiserver
 * checks a service-account token against the uid of the account it was issued for:
 * - a key that records its User (an owner reference of kind User with that name, as Login keys
 *   get at sign-in) belongs to the User of that uid only;
 * - a Login key created before its User was (the apiserver's creation timestamps) was given to an
 *   earlier one: login mints a key only for a User that exists, so this holds for Login keys made
 *   before keys recorded the uid, and for any whose owner reference was removed since.
 * Other keys without the record (made by an admin or by the person) are bound by name only.
 */
export function givenToEarlierUser(key: OwnedAccessKey, user: User): boolean {
  const recorded = (key.metadata.ownerReferences ?? []).find(
    (owner) =>
      owner.kind === 'User' &&
      owner.apiVersion.startsWith(`${API_GROUP}/`) &&
      owner.name === user.metadata.name,
  );
  if (recorded && recorded.uid !== user.metadata.uid) return true;
  if (key.spec.type !== 'Login') return false;
  const keyCreated = Date.parse(key.metadata.creationTimestamp ?? '');
  const userCreated = Date.parse(user.metadata.creationTimestamp ?? '');
  return keyCreated < userCreated;
}

function resolveOwner(key: OwnedAccessKey, context: AuthenticationContext): Owner | AuthenticationFailure {
  const { user: userName, team: teamName, subject } = key.spec;
  const extraGroups = key.spec.groups ?? [];
  const set = [userName, teamName, subject].filter((value) => value !== undefined && value !== '');
  if (set.length !== 1)
    return new AccessKeyOwnerInvalid('the access key must name exactly one user, team or subject');
  if (extraGroups.some(isReservedName)) {
    return new AccessKeyOwnerInvalid('the access key claims a reserved group (system: or platform: prefix)');
  }

  if (userName) {
    const user = context.lookupUser(userName);
    if (!user) return new AccessKeyOwnerInvalid("the access key's user does not exist");
    if (givenToEarlierUser(key, user))
      return new AccessKeyOwnerInvalid('the access key belongs to an earlier user of this name');
    if (user.spec.disabled === true) return new UserDisabled();
    const username = user.spec.subject || userName;
    if (isReservedName(username))
      return new AccessKeyOwnerInvalid("the access key's user has a reserved username");
    const teams = (user.status?.teams ?? [])
      .map((name) => context.lookupTeam(name))
      .filter((team): team is Team => team !== undefined);
    const admin = isAdmin(user) || teams.some(isAdmin);
    return {
      kind: 'User',
      name: userName,
      username,
      uid: user.metadata.uid,
      groups: sortedUnique([
        GROUP_AUTHENTICATED,
        userGroup(userName),
        ...teams.map((team) => teamGroup(team.metadata.name ?? '')),
        ...extraGroups,
        ...(admin ? [GROUP_ADMINS] : []),
      ]),
    };
  }

  if (teamName) {
    const team = context.lookupTeam(teamName);
    if (!team) return new AccessKeyOwnerInvalid("the access key's team does not exist");
    return {
      kind: 'Team',
      name: teamName,
      username: teamUsername(teamName),
      uid: team.metadata.uid,
      groups: sortedUnique([
        GROUP_AUTHENTICATED,
        teamGroup(teamName),
        ...extraGroups,
        ...(isAdmin(team) ? [GROUP_ADMINS] : []),
      ]),
    };
  }

  const name = subject ?? '';
  if (isReservedName(name)) return new AccessKeyOwnerInvalid('the access key claims a reserved subject');
  return {
    kind: 'Subject',
    name,
    username: name,
    uid: undefined,
    groups: sortedUnique([GROUP_AUTHENTICATED, ...extraGroups]),
  };
}

/** Decides who a bearer token is, or why it is nobody. See the module comment for the rules. */
export function authenticateAccessKey(token: string, context: AuthenticationContext): AuthenticationResult {
  const parsed = parseAccessKeyShape(token);
  if (parsed instanceof MalformedAccessKey) return fail(parsed);
  const { id } = parsed;

  const candidates = context.lookupRecords ? context.lookupRecords(id) : context.lookupKey(id).map(recordOf);
  // Always one HMAC and at least one constant-time comparison, found or not.
  const digest = accessKeyDigest(token, context.pepper);
  let record: KeyRecord | undefined;
  let compared = false;
  for (const candidate of candidates) {
    if (candidate.keyId !== id) continue;
    compared = true;
    if (digestMatchesStored(digest, candidate.storedHash)) record = candidate;
  }
  if (!compared) digestMatchesStored(digest, undefined);
  if (!record) {
    return checksumMatches(token)
      ? fail(new InvalidAccessKey(), id)
      : fail(new MalformedAccessKey('checksum'));
  }

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
