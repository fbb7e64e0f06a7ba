import { createHash } from 'node:crypto';
import type { z } from 'zod';
import type { OidcProviderSchema, SamlProviderSchema } from '../api/config-auth.ts';
import { ownValue } from '../runtime/json.ts';

/**
 * What an identity provider said about the person signing in, in the platform's terms, and the
 * pure mappings from OIDC claims and SAML assertions to it. Refusals are classes whose messages
 * are shown to the person on the error page: they never quote tokens or secrets.
 */

export interface ExternalIdentity {
  /** The connector id (`identity.connector`). */
  readonly connector: string;
  /** Stable subject at the provider (`identity.userId`). */
  readonly userId: string;
  /** The platform username, prefix included (`identity.username`). */
  readonly username: string;
  readonly preferredUsername?: string | undefined;
  readonly email?: string | undefined;
  readonly emailVerified?: boolean | undefined;
  /** Groups as the platform uses them (prefix included). */
  readonly groups: readonly string[];
  readonly extraClaims?: Readonly<Record<string, string[]>> | undefined;
  /** What the connector needs later (a refresh token); stays on the server. */
  readonly connectorData?: string | undefined;
}

/** A sign-in the platform refuses; `message` is for the person signing in. */
export class LoginRefused extends Error {
  override readonly name: string = 'LoginRefused';
  /** HTTP status of the answer. */
  readonly code: number = 403;
}

/** The provider returned no usable username or subject. */
export class IdentityIncomplete extends LoginRefused {
  override readonly name = 'IdentityIncomplete';
  override readonly code = 400;
}

/** The person is in none of the groups the configuration requires. */
export class NotInAllowedGroups extends LoginRefused {
  override readonly name = 'NotInAllowedGroups';
  constructor() {
    super('you are not a member of any group allowed to sign in here');
  }
}

/** The username is to be the email, and the provider says it did not verify it. */
export class EmailNotVerified extends LoginRefused {
  override readonly name = 'EmailNotVerified';
  constructor() {
    super('the identity provider has not verified your email address');
  }
}

/** The username would impersonate a reserved identity (`system:`, `platform:`). */
export class ReservedUsername extends LoginRefused {
  override readonly name = 'ReservedUsername';
  constructor() {
    super('the username given by the identity provider uses a reserved prefix (system: or platform:)');
  }
}

/**
 * Group rules of the connectors (pure): without `required` every group passes; with it the user
 * must be in at least one of them ({@link NotInAllowedGroups} otherwise), and with `keepOnlyRequired`
 * only those enter the identity (a whitelist), else all the user's groups do.
 */
export function requireGroups(
  groups: readonly string[],
  required: readonly string[] | undefined,
  keepOnlyRequired: boolean,
): string[] {
  if (!required || required.length === 0) return [...groups];
  const kept = groups.filter((group) => required.includes(group));
  if (kept.length === 0) throw new NotInAllowedGroups();
  return keepOnlyRequired ? kept : [...groups];
}

const RESERVED = ['system:', 'platform:'];
export const isReservedName = (name: string) => RESERVED.some((prefix) => name.startsWith(prefix));

type OidcConfig = z.output<typeof OidcProviderSchema>;
type SamlConfig = z.output<typeof SamlProviderSchema>;
type Claims = Readonly<Record<string, unknown>>;

const asString = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : typeof value === 'number' ? String(value) : undefined;

/** A claim as a list of strings: a string, or a list whose strings are kept. */
function asStrings(value: unknown): string[] {
  if (typeof value === 'string') return value === '' ? [] : [value];
  if (Array.isArray(value))
    return value.filter((item): item is string => typeof item === 'string' && item !== '');
  return [];
}

/** Claims an `allowedExtraClaims` entry may never name: the ones identity fields already carry or that are protocol plumbing. */
const PROTOCOL_CLAIMS = new Set([
  'iss',
  'aud',
  'exp',
  'iat',
  'nbf',
  'nonce',
  'azp',
  'at_hash',
  'c_hash',
  'auth_time',
  'sid',
  'jti',
]);

/**
 * A claim `allowedExtraClaims` may name but that is never passed on: `__proto__` cannot be kept as
 * a key of the key object's `extraClaims` (every zod reader of the object would drop it without a
 * word), so it is left out as the protocol claims are.
 */
const UNKEEPABLE_CLAIM = '__proto__';

/**
 * The claims `allowed` names that the provider sent, as lists of strings. Claim names are data: a
 * claim named `constructor` or `toString` is passed on when sent and absent when not, never read
 * from `Object.prototype`.
 */
export function extraClaimsOf(
  claims: Claims,
  allowed: readonly string[] | undefined,
): Record<string, string[]> | undefined {
  const extra: [string, string[]][] = [];
  for (const name of new Set(allowed ?? [])) {
    if (PROTOCOL_CLAIMS.has(name) || name === UNKEEPABLE_CLAIM) continue;
    const claim = ownValue(claims, name);
    const values = asStrings(claim);
    const scalar = asString(claim);
    const kept =
      values.length > 0
        ? values
        : scalar !== undefined
          ? [scalar]
          : typeof claim === 'boolean'
            ? [String(claim)]
            : [];
    if (kept.length > 0) extra.push([name, kept]);
  }
  return extra.length > 0 ? Object.fromEntries(extra) : undefined;
}

/**
 * The identity an OIDC provider's claims (ID token, merged with UserInfo when `getUserInfo`)
 * give under the connector's configuration:
 * - `userId` from `usernameClaim` (the user id; default `sub`);
 * - `username` from `platformUsernameClaim` (default `preferred_username`, then `email` when
 *   `email_verified` is true, then the user id: an address the provider did not verify is anyone's
 *   to type, as kube-apiserver and the web-identity connector hold), with `usernamePrefix` in front;
 *   a `platformUsernameClaim` naming the email claim is refused when `email_verified` is false
 *   ({@link EmailNotVerified}, as kube-apiserver does for `claim: email`);
 * - `preferredUsername` from the claim `preferredUsername` names (default `preferred_username`);
 * - `email` from `emailClaim` (default `email`) and `email_verified`;
 * - groups from `groupsClaim` (default `groups`), a string or a list of strings, checked against
 *   `groups` (at least one required when non-empty; compared before the prefix) and then
 *   prefixed with `groupsPrefix`;
 * - `extraClaims`: only the claims `allowedExtraClaims` names.
 */
export function identityFromClaims(connector: string, claims: Claims, config: OidcConfig): ExternalIdentity {
  // Claim names come from the configuration, their values from the provider: an absent claim is
  // absent whatever its name (`constructor`, `toString`), never a member of Object.prototype.
  const claim = (name: string) => ownValue(claims, name);
  const userId = asString(claim(config.usernameClaim || 'sub'));
  if (userId === undefined)
    throw new IdentityIncomplete(`the identity provider sent no "${config.usernameClaim || 'sub'}" claim`);
  const emailClaim = config.emailClaim || 'email';
  const verified = claim('email_verified');
  const emailVerified = typeof verified === 'boolean' ? verified : undefined;
  if (config.platformUsernameClaim === emailClaim && emailVerified === false) throw new EmailNotVerified();
  const name = config.platformUsernameClaim
    ? asString(claim(config.platformUsernameClaim))
    : (asString(claim('preferred_username')) ??
      (emailVerified === true ? asString(claim(emailClaim)) : undefined) ??
      userId);
  if (name === undefined)
    throw new IdentityIncomplete(`the identity provider sent no "${config.platformUsernameClaim}" claim`);
  const username = `${config.usernamePrefix ?? ''}${name}`;
  if (isReservedName(username)) throw new ReservedUsername();
  const rawGroups = requireGroups(asStrings(claim(config.groupsClaim || 'groups')), config.groups, false);
  return {
    connector,
    userId,
    username,
    preferredUsername: asString(claim(config.preferredUsername || 'preferred_username')),
    email: asString(claim(emailClaim)),
    emailVerified,
    groups: rawGroups.map((group) => `${config.groupsPrefix ?? ''}${group}`),
    extraClaims: extraClaimsOf(claims, config.allowedExtraClaims),
  };
}

/** A SAML profile as node-saml returns it: NameID and attributes (single values or lists). */
export interface SamlProfile {
  readonly nameID?: string | undefined;
  readonly attributes?: Readonly<Record<string, unknown>> | undefined;
}

/**
 * The identity of a validated SAML assertion: the NameID is the user id (`sub`); `usernameAttr`
 * (default: the NameID) the username, `emailAttr` the email, `groupsAttr` the groups (split on
 * `groupsDelim` when set), which must meet `allowedGroups` when non-empty and are cut down to
 * those with `filterGroups`.
 */
export function identityFromSaml(
  connector: string,
  profile: SamlProfile,
  config: SamlConfig,
): ExternalIdentity {
  const userId = asString(profile.nameID);
  if (userId === undefined) throw new IdentityIncomplete('the SAML assertion has no NameID');
  // Attribute names are data: an attribute the assertion lacks is absent whatever its name.
  const attribute = (name: string | undefined) =>
    name && profile.attributes ? ownValue(profile.attributes, name) : undefined;
  const username = config.usernameAttr ? asStrings(attribute(config.usernameAttr))[0] : userId;
  if (username === undefined)
    throw new IdentityIncomplete(`the SAML assertion has no "${config.usernameAttr}" attribute`);
  if (isReservedName(username)) throw new ReservedUsername();
  let groups = asStrings(attribute(config.groupsAttr));
  if (config.groupsDelim)
    groups = groups.flatMap((value) => value.split(config.groupsDelim as string)).filter(Boolean);
  groups = requireGroups(groups, config.allowedGroups, config.filterGroups === true);
  return {
    connector,
    userId,
    username,
    email: config.emailAttr ? asStrings(attribute(config.emailAttr))[0] : undefined,
    groups,
  };
}

/** A Kubernetes object name as kube-apiserver checks it (DNS-1123 subdomain). */
const DNS_SUBDOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;
/** Hex digits of the SHA-256 digest that names a text which is not already an object name (128 bits). */
const DIGEST_HEX_LENGTH = 32;
const DIGEST_SUFFIX = new RegExp(`-[0-9a-f]{${DIGEST_HEX_LENGTH}}$`);

/**
 * The object name (DNS subdomain) for a username or group, one-to-one: two different texts never
 * get one name, so a provider's username can never land on the User of another username.
 *
 * - A text that is already an object name is its own name (`alice`, `alice.smith`), unless it
 *   ends like a digest below.
 * - Any other text (`Alice`, `alice@example.com`, `oidc:alice`, one that ends like a digest) is
 *   named `<readable part>-<first 128 bits of its SHA-256, hex>`: the readable part (lower-cased,
 *   other characters as `-`) is only for people; the digest makes the name the text's alone (a
 *   second text with the same name is a SHA-256 second preimage). Names of the first kind never
 *   end with such a digest, so the two kinds never meet.
 *
 * The earlier mapping appended 32 bits of digest only when the text changed, so `Alice-Smith`
 * and the valid name `alice-smith-2ca78191` shared a User (issue 32).
 */
export function objectNameFor(text: string, maxLength = 253): string {
  if (text.length <= maxLength && DNS_SUBDOMAIN.test(text) && !DIGEST_SUFFIX.test(text)) return text;
  const digest = createHash('sha256').update(text, 'utf8').digest('hex').slice(0, DIGEST_HEX_LENGTH);
  const readable = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '')
    .slice(0, maxLength - DIGEST_HEX_LENGTH - 1)
    .replace(/-+$/, '');
  return `${readable === '' ? 'x' : readable}-${digest}`;
}
