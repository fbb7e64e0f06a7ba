import { GROUP_VERSION } from '../../api/meta.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import type { Scope } from '../../api/scope.ts';
import { badRequest, forbidden, invalid, type StatusCause, type StatusError } from '../../api/status.ts';
import { scopeWithin } from '../../authz/scope-comparison.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { type AccessKeyLifetimeLimits, accessKeyExpiry } from '../../identity/expiry.ts';
import { GROUP_ADMINS } from '../../identity/groups.ts';
import {
  generateAccessKey,
  MalformedAccessKey,
  parseAccessKey,
  type RandomBytes,
} from '../../identity/keys.ts';
import { deepEqual, isJsonObject, ownValue } from '../../runtime/json.ts';
import { redactAccessKey } from '../proxy/redact.ts';

/**
 * `ownedaccesskeys` through the gateway, pure parts. A caller sees and manages only its own keys
 * (the keys whose `spec.user`, `spec.team` or `spec.subject` is the caller, by the kind of
 * identity its key has); platform admins (group `platform:admins`) manage every key, with RBAC
 * deciding as for any other resource.
 *
 * What a non-admin writes is checked on exactly the object that is then stored
 * ({@link checkOwnKeyCreate}, {@link checkOwnKeyChange}): it stays the caller's, of a
 * user-managed type; it never sets or changes `spec.identity` (what a login connector said) or
 * `spec.groups` (extra groups the key acts with); its scope never widens, neither beyond what the
 * key had nor beyond the caller's own key. Every key of the caller's own minted through the
 * gateway ends no later than the key that minted it ({@link capKeyLifetime}); a platform admin
 * creating a key for someone else is not bound by its own key's life.
 */

export const USER_MANAGED_TYPES: readonly string[] = ['', 'User', 'Other'];
export const DEFAULT_KEY_NAME_PREFIX = 'key-';

export const isPlatformAdmin = (identity: AuthenticatedIdentity) => identity.groups.includes(GROUP_ADMINS);

type OwnerField = 'user' | 'team' | 'subject';

/** Which `spec` field names the caller as a key's owner. */
export function ownerField(identity: AuthenticatedIdentity): OwnerField {
  return identity.kind === 'User' ? 'user' : identity.kind === 'Team' ? 'team' : 'subject';
}

/** Whether the key belongs to the caller. */
export function ownsKey(
  identity: AuthenticatedIdentity,
  key: { spec?: Partial<Record<OwnerField, unknown>> },
): boolean {
  const field = ownerField(identity);
  return (
    key.spec?.[field] === identity.name &&
    (['user', 'team', 'subject'] as const).every(
      (other) => other === field || (ownValue(key.spec ?? {}, other) ?? '') === '',
    )
  );
}

/** The field selector that restricts a list or watch to the caller's keys. */
export function ownerFieldSelector(identity: AuthenticatedIdentity, clientSelector: string | null): string {
  const own = `spec.${ownerField(identity)}=${identity.name}`;
  return clientSelector && clientSelector.trim() !== '' ? `${clientSelector},${own}` : own;
}

const specOf = (object: unknown): Record<string, unknown> =>
  isJsonObject(object) && isJsonObject(object.spec) ? object.spec : {};

const isEmpty = (value: unknown) =>
  value === undefined ||
  value === null ||
  (Array.isArray(value) && value.length === 0) ||
  (isJsonObject(value) && Object.keys(value).length === 0);

/**
 * A key a non-admin creates: its own, of a user-managed type, without `spec.identity` or
 * `spec.groups`, and scoped no wider than the caller's own key.
 */
export function checkOwnKeyCreate(
  identity: AuthenticatedIdentity,
  object: Record<string, unknown>,
): StatusError | undefined {
  const spec = specOf(object);
  if (!ownsKey(identity, { spec })) {
    return forbidden(
      `an access key may only be created for or changed by its owner (${ownerField(identity)} "${identity.name}")`,
    );
  }
  if (spec.type !== undefined && !(typeof spec.type === 'string' && USER_MANAGED_TYPES.includes(spec.type))) {
    return forbidden('only platform admins may manage access keys of a platform-managed type');
  }
  if (!isEmpty(spec.identity))
    return forbidden('spec.identity is set by the platform at login, never by the key owner');
  if (!isEmpty(spec.groups))
    return forbidden('only platform admins may give an access key extra groups (spec.groups)');
  if (!scopeWithin(spec.scope as Scope | undefined, identity.accessKey.scope)) {
    return forbidden('the scope of a new key may only narrow the scope of the key that creates it');
  }
  return undefined;
}

/**
 * A non-admin's change of one of its keys, judged on the object as it would be stored (`next`)
 * against the stored one (`current`), compared as JSON documents (a key holding `undefined` is
 * absent, as once stored): still its own and of a user-managed type; `spec.identity`
 * and `spec.groups` unchanged; a changed scope within both the key's current scope and the
 * caller's; a changed lifetime ending no later than the caller's key.
 */
export function checkOwnKeyChange(
  identity: AuthenticatedIdentity,
  current: Record<string, unknown>,
  next: Record<string, unknown>,
  limits: AccessKeyLifetimeLimits,
): StatusError | undefined {
  const before = specOf(current);
  const after = specOf(next);
  if (!ownsKey(identity, { spec: after })) {
    return forbidden(
      `an access key may only be created for or changed by its owner (${ownerField(identity)} "${identity.name}")`,
    );
  }
  if (
    after.type !== undefined &&
    !(typeof after.type === 'string' && USER_MANAGED_TYPES.includes(after.type))
  ) {
    return forbidden('only platform admins may manage access keys of a platform-managed type');
  }
  if (!deepEqual(before.identity, after.identity)) {
    return forbidden('spec.identity is set by the platform at login, never by the key owner');
  }
  if (!deepEqual(before.groups ?? [], after.groups ?? [])) {
    return forbidden('only platform admins may change the extra groups of an access key (spec.groups)');
  }
  if (!deepEqual(before.scope, after.scope)) {
    const scope = after.scope as Scope | undefined;
    if (
      !scopeWithin(scope, before.scope as Scope | undefined) ||
      !scopeWithin(scope, identity.accessKey.scope)
    ) {
      return forbidden(
        'the scope of a key may only narrow, never beyond the scope of the key that changes it',
      );
    }
  }
  const callerEnds = identity.accessKey.expiresAt;
  const lifetimeChanged =
    before.ttl !== after.ttl || before.ttlAfterLastActivity !== after.ttlAfterLastActivity;
  if (lifetimeChanged && callerEnds !== null) {
    const ends = safeExpiry(next, limits);
    if (after.ttlAfterLastActivity === true || ends === undefined || ends === null || ends > callerEnds) {
      return forbidden(
        `a key's lifetime may only be changed to end no later than the key that changes it (${callerEnds.toISOString()})`,
      );
    }
  }
  return undefined;
}

function safeExpiry(
  object: Record<string, unknown>,
  limits: AccessKeyLifetimeLimits,
): Date | null | undefined {
  try {
    return accessKeyExpiry(object as unknown as OwnedAccessKey, limits);
  } catch {
    return undefined;
  }
}

/**
 * Every key minted through the gateway ends no later than the key of the caller that minted it:
 * when the caller's key expires, the new key's `ttl` (seconds from its creation) is cut to what
 * is left of the caller's, and its life cannot be stretched by activity. The warning says so.
 */
export function capKeyLifetime(
  spec: Record<string, unknown>,
  callerEnds: Date | null,
  now: number,
): { spec: Record<string, unknown>; warning: string | undefined } {
  if (callerEnds === null) return { spec, warning: undefined };
  const left = Math.max(1, Math.floor((callerEnds.getTime() - now) / 1000));
  const requested = typeof spec.ttl === 'number' && spec.ttl > 0 ? spec.ttl : undefined;
  if (requested !== undefined && requested <= left && spec.ttlAfterLastActivity !== true) {
    return { spec, warning: undefined };
  }
  return {
    spec: { ...spec, ttl: Math.min(requested ?? left, left), ttlAfterLastActivity: false },
    warning: `spec.ttl set to ${Math.min(requested ?? left, left)} seconds: a key ends no later than the key that created it`,
  };
}

const nameOf = (object: Record<string, unknown>) => {
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  return typeof metadata.name === 'string'
    ? metadata.name
    : typeof metadata.generateName === 'string'
      ? metadata.generateName
      : '';
};

export interface PreparedKeyCreate {
  /** The object to send to kube-apiserver (with `spec.key`, which admission turns into its hash). */
  readonly object: Record<string, unknown>;
  /** The plaintext key, for the answer only. */
  readonly plaintext: string;
}

/** Checks a create body and mints the key (or takes the supplied `spec.key`); names come from `generateName`. */
export function prepareKeyCreate(
  body: Record<string, unknown>,
  identity: AuthenticatedIdentity,
  random: RandomBytes,
): PreparedKeyCreate | StatusError {
  if (body.apiVersion !== undefined && body.apiVersion !== GROUP_VERSION) {
    return badRequest(`the API version in the data does not match the expected API version ${GROUP_VERSION}`);
  }
  if (body.kind !== undefined && body.kind !== 'OwnedAccessKey') {
    return badRequest('the kind in the data does not match the expected kind OwnedAccessKey');
  }
  const metadata = isJsonObject(body.metadata) ? { ...body.metadata } : {};
  if (body.metadata !== undefined && !isJsonObject(body.metadata))
    return badRequest('metadata must be an object');
  if (body.spec !== undefined && !isJsonObject(body.spec)) return badRequest('spec must be an object');
  const spec: Record<string, unknown> = isJsonObject(body.spec) ? { ...body.spec } : {};
  const causes: StatusCause[] = [];
  for (const field of ['keyHash', 'keyId'] as const) {
    if (ownValue(spec, field) !== undefined) {
      causes.push({ field: `spec.${field}`, reason: 'FieldValueForbidden', message: 'set by the platform' });
    }
  }
  let plaintext: string;
  if (spec.key !== undefined) {
    const parsed = typeof spec.key === 'string' ? parseAccessKey(spec.key) : new MalformedAccessKey('shape');
    if (parsed instanceof MalformedAccessKey) {
      causes.push({
        field: 'spec.key',
        reason: 'FieldValueInvalid',
        message: `${parsed.message}; leave spec.key empty to have a key generated`,
      });
    }
    plaintext = typeof spec.key === 'string' ? spec.key : '';
  } else {
    plaintext = generateAccessKey(random).key;
  }
  if (causes.length > 0) return invalid('OwnedAccessKey', nameOf({ metadata }), causes);

  const owners = (['user', 'team', 'subject'] as const).filter(
    (field) => (ownValue(spec, field) ?? '') !== '',
  );
  if (owners.length === 0) spec[ownerField(identity)] = identity.name;
  spec.type ??= 'User';
  spec.key = plaintext;
  const hasName = typeof metadata.name === 'string' && metadata.name !== '';
  if (!hasName && !(typeof metadata.generateName === 'string' && metadata.generateName !== '')) {
    metadata.generateName = DEFAULT_KEY_NAME_PREFIX;
  }
  return {
    object: { ...body, apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey', metadata, spec },
    plaintext,
  };
}

/** `users/<u>/accesskeys` or `teams/<t>/accesskeys`: the owner's keys, redacted, by name. */
export function ownerAccessKeys(
  kind: 'UserAccessKeys' | 'TeamAccessKeys',
  name: string,
  keys: readonly OwnedAccessKey[],
): Record<string, unknown> {
  const field = kind === 'UserAccessKeys' ? 'user' : 'team';
  const accessKeys = keys
    .filter((key) => key.spec[field] === name)
    .map((key) => redactAccessKey({ ...key, apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey' }))
    .sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
  return { apiVersion: GROUP_VERSION, kind, metadata: { name }, accessKeys };
}
