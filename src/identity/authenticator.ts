import type { ConfigStatus } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources, type Stored } from '../api/resources.ts';
import { platformConfigSource } from '../config/platform-config.ts';
import type { Clock } from '../runtime/clock.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { Informer } from '../runtime/informer.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, type ObjectList, objectPath } from '../runtime/kube-client.ts';
import type { Manager } from '../runtime/manager.ts';
import type { Store } from '../runtime/store.ts';
import { ActivityRecorder, type ActivityRecorderOptions } from './activity.ts';
import { keyActivityWriter } from './activity-writer.ts';
import {
  AccessKeyOwnerInvalid,
  type AuthenticatedIdentity,
  type AuthenticationContext,
  type AuthenticationResult,
  authenticateAccessKey,
  InvalidAccessKey,
  type KeyRecord,
  keyStanding,
  newKeyRecord,
} from './authenticate.ts';
import { accessKeyExpiry } from './expiry.ts';
import { MalformedAccessKey, parseAccessKey } from './keys.ts';
import type { PepperStore } from './pepper.ts';

/** Index of OwnedAccessKeys by `spec.keyId`, the public part of a bearer key. */
export const BY_KEY_ID = 'key-id';

interface AccessKeyAuthenticatorDeps {
  api: KubeApi;
  clock: Clock;
  pepper: PepperStore;
  platformNamespace: string;
  /** Overrides of the activity recorder's timing (tests). */
  activity?: Pick<ActivityRecorderOptions, 'minWriteIntervalMs' | 'tickMs' | 'onWriteError'>;
}

/** How long a read past the caches may take before the key is judged on the caches alone. */
const LIVE_LOOKUP_TIMEOUT_MS = 5000;

/** Objects a caller's key needs that the caches did not have, read from the apiserver. */
interface LiveObjects {
  keys: OwnedAccessKey[];
  user: User | undefined;
}

/**
 * A change in the caches that decide keys: a key, User or Team (by object name) added, changed or
 * deleted, or the platform configuration's key lifetime limits.
 */
export type IdentityChange =
  | { readonly kind: 'key' | 'user' | 'team'; readonly name: string }
  | { readonly kind: 'limits' };

/** The pepper is not loaded yet (the caller answers 503, not 401: the key may well be valid). */
export class AuthenticatorNotReady extends Error {
  override readonly name = 'AuthenticatorNotReady';
  constructor() {
    super('the authenticator is starting');
  }
}

/**
 * Authentication of bearer access keys from informer caches: no apiserver call per request.
 * The informers run in every replica (they are not leader-elected), so every gateway replica
 * answers alone. Successful authentications feed the {@link ActivityRecorder}, which writes
 * `status.lastActivity` in batches.
 *
 * A key created a moment ago may not have reached the caches yet (a CI job creates a key and
 * uses it at once). When the caches know no key with the presented id, or not the key's user,
 * {@link authenticate} reads exactly those objects from the apiserver (a list by the selectable
 * field `spec.keyId`, a get of the user) and decides on them: a fresh key works on its first
 * use, never a 401 that the caller would have to retry through. Concurrent misses for one id
 * share one read; callers that failed recently are kept on the caches alone
 * ({@link authenticateCached}), so bogus ids cannot turn into apiserver load.
 */
export class AccessKeyAuthenticator {
  readonly keys: Store<Stored<OwnedAccessKey>>;
  readonly users: Store<Stored<User>>;
  readonly teams: Store<Stored<Team>>;
  private readonly informers: Informer<never>[];
  /** The current platform configuration (lifetime limits of keys). */
  readonly config: () => ConfigStatus;
  private readonly activity: ActivityRecorder;
  private pepper: Uint8Array | undefined;
  /** Reads past the caches in flight, by key id: concurrent misses share one. */
  private readonly liveReads = new Map<string, Promise<LiveObjects | undefined>>();
  /**
   * The record of each cached key by `spec.keyId` (others with the same id chained through
   * {@link KeyRecord.sameId}), kept by the key informer's events (which run as the cache
   * changes, so the two agree whenever a request is decided). One entry and one object per key:
   * what a request reads beyond the HMAC (bench/auth).
   */
  private readonly records = new Map<string, KeyRecord>();
  /** The same records by key name (OwnedAccessKeys are cluster-scoped: the name is the key). */
  private readonly recordsByName = new Map<string, KeyRecord>();
  /** The platform configuration's access key limits, kept as it changes. */
  private limits: ConfigStatus['auth'];
  private readonly changeListeners: ((change: IdentityChange) => void)[] = [];

  constructor(
    manager: Manager,
    private readonly deps: AccessKeyAuthenticatorDeps,
  ) {
    const keys = manager.informer<Stored<OwnedAccessKey>>(
      resources.ownedAccessKeys,
      {},
      { [BY_KEY_ID]: (key) => (key.spec?.keyId ? [key.spec.keyId] : []) },
    );
    const users = manager.informer<Stored<User>>(resources.users);
    const teams = manager.informer<Stored<Team>>(resources.teams);
    const config = platformConfigSource(manager, deps.platformNamespace);
    this.keys = keys.store;
    this.users = users.store;
    this.teams = teams.store;
    this.informers = [keys, users, teams, config.informer] as unknown as Informer<never>[];
    this.config = () => config.current();
    this.limits = config.current().auth;
    config.onChange((current) => {
      if (current.auth === this.limits) return;
      this.limits = current.auth;
      this.changed({ kind: 'limits' });
    });
    keys.addEventHandler({
      onAdd: (key) => this.file(key),
      onUpdate: (_previous, key) => this.file(key),
      onDelete: (key) => this.unfile(key.metadata?.name ?? ''),
    });
    onEachChange(keys, (name) => this.changed({ kind: 'key', name }));
    onEachChange(users, (name) => this.changed({ kind: 'user', name }));
    onEachChange(teams, (name) => this.changed({ kind: 'team', name }));
    const now = () => new Date(deps.clock.now());
    this.activity = new ActivityRecorder({
      ...deps.activity,
      now,
      writer: keyActivityWriter(deps.api, (name) => this.keys.get(name)),
      timers: {
        setTimeout: (callback, ms) => deps.clock.setTimer(ms, callback),
        clearTimeout: (handle) => (handle as { cancel(): void }).cancel(),
      },
    });
  }

  /** Files the record of a key object in place of the record of its previous version. */
  private file(key: OwnedAccessKey): void {
    const name = key.metadata?.name ?? '';
    this.unfile(name);
    const id = key.spec?.keyId;
    if (!id) return;
    const record = newKeyRecord(key);
    this.recordsByName.set(name, record);
    record.sameId = this.records.get(id);
    this.records.set(id, record);
  }

  /** Removes the record filed for the key named `name`, under whatever id it was filed. */
  private unfile(name: string): void {
    const record = this.recordsByName.get(name);
    if (!record) return;
    this.recordsByName.delete(name);
    const id = record.keyId ?? '';
    const first = this.records.get(id);
    if (first === record) {
      if (record.sameId) this.records.set(id, record.sameId);
      else this.records.delete(id);
      return;
    }
    for (let filed = first; filed; filed = filed.sameId) {
      if (filed.sameId === record) {
        filed.sameId = record.sameId;
        return;
      }
    }
  }

  /** Loads the pepper (waiting for it to exist) and starts writing activity. Call after `manager.start()`. */
  async start(signal?: AbortSignal): Promise<void> {
    this.activity.start();
    while (!this.pepper && !signal?.aborted) {
      this.pepper = await this.deps.pepper.load().catch(() => undefined);
      if (!this.pepper)
        await new Promise((resolve) => this.deps.clock.setTimer(1000, () => resolve(undefined)));
    }
  }

  /** Writes what activity is pending; throws when some of it could not be written. */
  stop(): Promise<void> {
    return this.activity.stop();
  }

  /**
   * Calls `listener` after each {@link IdentityChange}, once the caches and the key records hold
   * it (a key's record is filed before its listeners run).
   */
  onIdentityChange(listener: (change: IdentityChange) => void): void {
    this.changeListeners.push(listener);
  }

  private changed(change: IdentityChange): void {
    for (const listener of this.changeListeners) listener(change);
  }

  /**
   * Whether the key that authenticated `identity` would be accepted now, judged on the caches by
   * the decision's own checks ({@link keyStanding}: disabled, expired, owner), without its secret:
   * what a connection it opened lives by. `undefined` when the caches hold no key of that name and
   * id: deleted (or replaced), or one read past the caches that they do not hold yet.
   */
  standing(identity: AuthenticatedIdentity): AuthenticationResult | undefined {
    const { name, id } = identity.accessKey;
    const record = this.recordsByName.get(name);
    if (!record || record.keyId !== id) return undefined;
    return keyStanding(record, id, this.cachedContext);
  }

  /** Caches synced and pepper loaded: until then nothing can be decided. */
  ready(): boolean {
    return this.pepper !== undefined && this.informers.every((informer) => informer.hasSynced());
  }

  /** Who the token is, from the caches alone; records the key's activity when it authenticates. */
  authenticateCached(token: string): AuthenticationResult {
    const pepper = this.pepper;
    if (!pepper) throw new AuthenticatorNotReady();
    return this.accepted(this.decide(token, pepper, undefined, { key: false, user: false }));
  }

  /**
   * Who the token is. From the caches when they know the key; otherwise (see the class comment)
   * a promise that reads the missing objects from the apiserver first. Records the key's
   * activity when it authenticates.
   */
  authenticate(token: string): AuthenticationResult | Promise<AuthenticationResult> {
    const pepper = this.pepper;
    if (!pepper) throw new AuthenticatorNotReady();
    const misses = { key: false, user: false };
    const result = this.decide(token, pepper, undefined, misses);
    if (result.ok || !(misses.key || misses.user)) return this.accepted(result);
    if (!(result.failure instanceof InvalidAccessKey || result.failure instanceof AccessKeyOwnerInvalid)) {
      return result;
    }
    const parsed = parseAccessKey(token);
    if (parsed instanceof MalformedAccessKey) return result;
    return this.readLive(parsed.id).then((live) =>
      live ? this.accepted(this.decide(token, pepper, live, misses)) : result,
    );
  }

  /** What the last decision on the caches alone did not find there (read by {@link decide}). */
  private readonly cacheMisses = { key: false, user: false };
  /**
   * The context of a decision on the caches alone, made once: every request pays for it, and
   * closures and an object per request are measurable at this rate (bench/auth).
   */
  private readonly cachedContext: AuthenticationContext = (() => {
    const self = this;
    return {
      lookupKey: (id: string) => self.keys.byIndex(BY_KEY_ID, id),
      lookupRecord: (id: string) => {
        const filed = self.records.get(id);
        if (!filed) self.cacheMisses.key = true;
        return filed;
      },
      lookupUser: (name: string) => {
        const cached = self.users.get(name);
        if (!cached) self.cacheMisses.user = true;
        return cached;
      },
      lookupTeam: (name: string) => self.teams.get(name),
      ownersVersion: () => self.users.version + self.teams.version,
      get pepper() {
        return self.pepper as Uint8Array;
      },
      now: () => new Date(self.deps.clock.now()),
      get limits() {
        return self.limits;
      },
      recentActivity: (keyName: string) => self.activity.lastActivityOf(keyName),
    };
  })();

  private decide(
    token: string,
    pepper: Uint8Array,
    live: LiveObjects | undefined,
    misses: { key: boolean; user: boolean },
  ): AuthenticationResult {
    if (!live) {
      this.cacheMisses.key = false;
      this.cacheMisses.user = false;
      const result = authenticateAccessKey(token, this.cachedContext);
      misses.key ||= this.cacheMisses.key;
      misses.user ||= this.cacheMisses.user;
      return result;
    }
    const context: AuthenticationContext = {
      lookupKey: (id) => {
        const cached = this.keys.byIndex(BY_KEY_ID, id);
        if (cached.length === 0) misses.key = true;
        return cached.length > 0 ? cached : live.keys;
      },
      lookupUser: (name) => {
        const cached = this.users.get(name);
        if (!cached) misses.user = true;
        return cached ?? (live.user?.metadata.name === name ? live.user : undefined);
      },
      lookupTeam: (name) => this.teams.get(name),
      // Live objects are not in the caches: their owner is checked lookup by lookup.
      pepper,
      now: () => new Date(this.deps.clock.now()),
      limits: this.limits,
      recentActivity: (keyName) => this.activity.lastActivityOf(keyName),
    };
    return authenticateAccessKey(token, context);
  }

  /**
   * Records the activity of an accepted key. Activity is stored in whole seconds, so a key whose
   * life does not count from its activity is recorded once per second (its record keeps the
   * second): the stored value is the same, and the other uses of that second cost a comparison
   * here instead of the recorder's maps.
   */
  private accepted(result: AuthenticationResult): AuthenticationResult {
    if (!result.ok) return result;
    const { record } = result;
    const now = this.deps.clock.now();
    if (!record.activityBased) {
      const second = Math.floor(now / 1000);
      if (record.activitySecond === second) return result;
      record.activitySecond = second;
      this.activity.recordMillis(record.name, now);
      return result;
    }
    // For a key whose life counts from its activity, the deadline others see is the stored one.
    const key = this.keys.get(record.name); // not cached yet: none
    const storedDeadline = key ? (accessKeyExpiry(key, this.limits) ?? undefined) : undefined;
    this.activity.recordMillis(record.name, now, storedDeadline);
    return result;
  }

  /** The keys with this id and their user, from the apiserver; undefined when that read failed. */
  private readLive(id: string): Promise<LiveObjects | undefined> {
    const inFlight = this.liveReads.get(id);
    if (inFlight) return inFlight;
    const read = (async (): Promise<LiveObjects | undefined> => {
      try {
        const list = await this.deps.api.request<ObjectList<OwnedAccessKey>>({
          method: 'GET',
          path: collectionPath(resources.ownedAccessKeys),
          query: { fieldSelector: `spec.keyId=${id}` },
          timeoutMs: LIVE_LOOKUP_TIMEOUT_MS,
        });
        const keys = list.items;
        const userName = keys.find((key) => key.spec.user)?.spec.user;
        const cachedUser = userName ? this.users.get(userName) : undefined;
        const user =
          userName && !cachedUser
            ? await this.deps.api
                .request<User>({
                  method: 'GET',
                  path: objectPath(resources.users, undefined, userName),
                  timeoutMs: LIVE_LOOKUP_TIMEOUT_MS,
                })
                .catch((error: unknown) => {
                  if (isNotFound(error)) return undefined;
                  throw error;
                })
            : cachedUser;
        return { keys, user };
      } catch {
        return undefined; // judged on the caches alone
      } finally {
        this.liveReads.delete(id);
      }
    })();
    this.liveReads.set(id, read);
    return read;
  }
}

type Named = { readonly metadata?: { readonly name?: string } };

/** Calls `changed` with the name of each object the informer adds, changes or deletes. */
function onEachChange<T extends Named>(informer: Informer<T>, changed: (name: string) => void): void {
  const name = (object: T) => changed(object.metadata?.name ?? '');
  informer.addEventHandler({ onAdd: name, onUpdate: (_previous, object) => name(object), onDelete: name });
}

export function setupAccessKeyAuthenticator(
  manager: Manager,
  deps: AccessKeyAuthenticatorDeps,
): AccessKeyAuthenticator {
  return new AccessKeyAuthenticator(manager, deps);
}
