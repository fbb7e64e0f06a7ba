import { GROUP_VERSION } from '../../api/meta.ts';
import {
  LAST_APPLIED_ANNOTATION,
  lastAppliedWithoutKey,
  type OwnedAccessKey,
} from '../../api/ownedaccesskey.ts';
import { badRequest, forbidden, invalid, type StatusCause, type StatusError } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { GROUP_ADMINS } from '../../identity/groups.ts';
import {
  generateAccessKey,
  MalformedAccessKey,
  parseAccessKey,
  type RandomBytes,
} from '../../identity/keys.ts';

/**
 * `ownedaccesskeys` through the gateway, pure parts. A caller sees and manages only its own keys
 * (the keys whose `spec.user`, `spec.team` or `spec.subject` is the caller, by the kind of
 * identity its key has); platform admins (group `platform:admins`) manage every key, with RBAC
 * deciding as for any other resource. A non-admin may not hand a key more than it has: its
 * extra `spec.groups` must be groups the caller already has, and its type is a user-managed one.
 * Creating a key mints it (or takes a supplied `spec.key`), and the answer carries the plaintext
 * exactly once, in `spec.key`; the admission webhook stores only its keyed hash.
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
      (other) => other === field || key.spec?.[other] === undefined || key.spec?.[other] === '',
    )
  );
}

/** The field selector that restricts a list or watch to the caller's keys. */
export function ownerFieldSelector(identity: AuthenticatedIdentity, clientSelector: string | null): string {
  const own = `spec.${ownerField(identity)}=${identity.name}`;
  return clientSelector && clientSelector.trim() !== '' ? `${clientSelector},${own}` : own;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * What a non-admin may write into one of its keys: owned by itself, a user-managed type, extra
 * groups it already has. Returns the refusal, or undefined.
 */
export function checkOwnKeyWrite(
  identity: AuthenticatedIdentity,
  object: Record<string, unknown>,
): StatusError | undefined {
  const spec = isObject(object.spec) ? object.spec : {};
  if (!ownsKey(identity, { spec })) {
    return forbidden(
      `an access key may only be created for or changed by its owner (${ownerField(identity)} "${identity.name}")`,
    );
  }
  const type = spec.type;
  if (type !== undefined && !(typeof type === 'string' && USER_MANAGED_TYPES.includes(type))) {
    return forbidden('only platform admins may manage access keys of a platform-managed type');
  }
  const groups = spec.groups;
  if (groups !== undefined) {
    if (!Array.isArray(groups))
      return invalid('OwnedAccessKey', nameOf(object), [
        { field: 'spec.groups', reason: 'FieldValueInvalid', message: 'must be a list of strings' },
      ]);
    const extra = groups.filter((group) => typeof group !== 'string' || !identity.groups.includes(group));
    if (extra.length > 0) {
      return forbidden('spec.groups may only list groups the caller already has');
    }
  }
  return undefined;
}

const nameOf = (object: Record<string, unknown>) => {
  const metadata = isObject(object.metadata) ? object.metadata : {};
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
  /** The prefix to generate names from, when the body gave no name. */
  readonly generateName: string | undefined;
}

/** Checks a create body and mints the key. */
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
  const metadata = isObject(body.metadata) ? { ...body.metadata } : {};
  if (body.metadata !== undefined && !isObject(body.metadata))
    return badRequest('metadata must be an object');
  if (body.spec !== undefined && !isObject(body.spec)) return badRequest('spec must be an object');
  const spec: Record<string, unknown> = isObject(body.spec) ? { ...body.spec } : {};
  const causes: StatusCause[] = [];
  for (const field of ['keyHash', 'keyId'] as const) {
    if (spec[field] !== undefined) {
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
    (field) => spec[field] !== undefined && spec[field] !== '',
  );
  if (owners.length === 0) spec[ownerField(identity)] = identity.name;
  spec.type ??= 'User';
  spec.key = plaintext;
  const name = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : undefined;
  const generateName = name
    ? undefined
    : typeof metadata.generateName === 'string' && metadata.generateName !== ''
      ? metadata.generateName
      : DEFAULT_KEY_NAME_PREFIX;
  delete metadata.generateName;
  return {
    object: { ...body, apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey', metadata, spec },
    plaintext,
    generateName,
  };
}

/** Removes what never leaves the platform (`spec.identity.connectorData`, a stray `spec.key`) from a key object. */
export function sanitizeKey<T>(key: T): T {
  if (!isObject(key) || !isObject(key.spec)) return key;
  const { key: _key, ...spec } = key.spec;
  if (isObject(spec.identity) && 'connectorData' in spec.identity) {
    const { connectorData: _data, ...identity } = spec.identity;
    spec.identity = identity;
  }
  return { ...key, ...withoutAppliedKey(key.metadata), spec } as T;
}

/** Objects applied before admission cleaned the annotation may still hold a key in it. */
function withoutAppliedKey(metadata: unknown): { metadata?: Record<string, unknown> } {
  if (!isObject(metadata) || !isObject(metadata.annotations)) return {};
  const applied = metadata.annotations[LAST_APPLIED_ANNOTATION];
  if (typeof applied !== 'string') return {};
  const cleaned = lastAppliedWithoutKey(applied);
  if (cleaned === applied) return {};
  const { [LAST_APPLIED_ANNOTATION]: _applied, ...annotations } = metadata.annotations;
  return {
    metadata: {
      ...metadata,
      annotations:
        cleaned === undefined ? annotations : { ...annotations, [LAST_APPLIED_ANNOTATION]: cleaned },
    },
  };
}

/** {@link sanitizeKey} over whatever an apiserver answer holds: an object, a list, a table, a watch event. */
export function sanitizeKeys(value: unknown): unknown {
  if (!isObject(value)) return value;
  if (value.kind === 'OwnedAccessKey') return sanitizeKey(value);
  if (Array.isArray(value.items)) return { ...value, items: value.items.map(sanitizeKeys) };
  if (value.kind === 'Table' && Array.isArray(value.rows)) {
    return {
      ...value,
      rows: value.rows.map((row) => (isObject(row) ? { ...row, object: sanitizeKeys(row.object) } : row)),
    };
  }
  if (typeof value.type === 'string' && isObject(value.object))
    return { ...value, object: sanitizeKeys(value.object) };
  return value;
}

/** `users/<u>/accesskeys` or `teams/<t>/accesskeys`: the owner's keys, sanitized, by name. */
export function ownerAccessKeys(
  kind: 'UserAccessKeys' | 'TeamAccessKeys',
  name: string,
  keys: readonly OwnedAccessKey[],
): Record<string, unknown> {
  const field = kind === 'UserAccessKeys' ? 'user' : 'team';
  const accessKeys = keys
    .filter((key) => key.spec[field] === name)
    .map((key) => sanitizeKey({ ...key, apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey' }))
    .sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
  return { apiVersion: GROUP_VERSION, kind, metadata: { name }, accessKeys };
}
