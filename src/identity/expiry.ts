import type { AuthConfig } from '../api/config-auth.ts';
import { DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS } from '../api/config-auth.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';

/** The parts of an OwnedAccessKey its lifetime depends on. */
export type AccessKeyLifetimeFields = {
  metadata?: Pick<NonNullable<OwnedAccessKey['metadata']>, 'creationTimestamp'>;
  spec?: Pick<NonNullable<OwnedAccessKey['spec']>, 'ttl' | 'ttlAfterLastActivity' | 'type'>;
  status?: Pick<NonNullable<OwnedAccessKey['status']>, 'lastActivity'>;
};

/** The global limits of `Config.status.auth` that bound every key's lifetime. */
export type AccessKeyLifetimeLimits = Partial<
  Pick<AuthConfig, 'accessKeyMaxTTLSeconds' | 'loginAccessKeyTTLSeconds'>
>;

/**
 * The key has a lifetime limit but no (valid) creation timestamp to count it from. Kubernetes
 * always sets one on stored objects, so this means a broken object; callers treat the key as
 * expired (fail closed) rather than as eternal.
 */
export class AccessKeyWithoutCreationTimestamp extends Error {
  override readonly name = 'AccessKeyWithoutCreationTimestamp';
  constructor() {
    super('the access key has a lifetime limit but no valid creation timestamp');
  }
}

function timestamp(text: string | Date | null | undefined): number | undefined {
  if (text === undefined || text === null) return undefined;
  const millis = text instanceof Date ? text.getTime() : Date.parse(text);
  return Number.isFinite(millis) ? millis : undefined;
}

/** Seconds of ttl that apply to the key itself (not the global maximum), or undefined for none. */
function effectiveTTLSeconds(
  key: AccessKeyLifetimeFields,
  limits: AccessKeyLifetimeLimits,
): number | undefined {
  const own = key.spec?.ttl;
  if (own !== undefined && own > 0) return own;
  if (key.spec?.type === 'Login') {
    const login = limits.loginAccessKeyTTLSeconds ?? DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS;
    return login > 0 ? login : undefined;
  }
  return undefined;
}

/**
 * The instant a key stops working, or `null` when nothing limits its life. A key is expired at
 * any `now >= expiry` (the deadline itself is already too late). The expiry is the earliest of:
 *
 * - the key's ttl counted from its anchor: the creation timestamp, or with `ttlAfterLastActivity`
 *   the last activity (`status.lastActivity`, or the later `recentActivity` the gateway has seen but
 *   not written yet; falling back to creation, and never earlier than creation). The ttl is
 *   `spec.ttl` when positive; a `Login` key without one gets `loginAccessKeyTTLSeconds` (20 days
 *   when unset, none when 0). `ttl` 0 or absent means no ttl of its own (the Go API's `omitempty`).
 * - creation + `accessKeyMaxTTLSeconds` when that is set and non-zero, whatever the key's own
 *   ttl and activity: activity never extends a key past the global maximum.
 *
 * Throws {@link AccessKeyWithoutCreationTimestamp} when a limit applies but the creation time is
 * missing.
 */
export function accessKeyExpiry(
  key: AccessKeyLifetimeFields,
  limits: AccessKeyLifetimeLimits,
  recentActivity?: Date,
): Date | null {
  const ttl = effectiveTTLSeconds(key, limits);
  const max = limits.accessKeyMaxTTLSeconds;
  const maxTTL = max !== undefined && max > 0 ? max : undefined;
  if (ttl === undefined && maxTTL === undefined) return null;

  const created = timestamp(key.metadata?.creationTimestamp);
  if (created === undefined) throw new AccessKeyWithoutCreationTimestamp();

  const deadlines: number[] = [];
  if (ttl !== undefined) {
    let anchor = created;
    if (key.spec?.ttlAfterLastActivity === true) {
      const stored = timestamp(key.status?.lastActivity) ?? created;
      const recent = timestamp(recentActivity) ?? created;
      anchor = Math.max(created, stored, recent);
    }
    deadlines.push(anchor + ttl * 1000);
  }
  if (maxTTL !== undefined) deadlines.push(created + maxTTL * 1000);
  return new Date(Math.min(...deadlines));
}
