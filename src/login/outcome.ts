import type { AuthConfig } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import { type ExternalIdentity, LoginRefused, objectNameFor } from './identity.ts';

/**
 * What a successful sign-in changes, decided by pure functions: the User (created on first
 * sign-in unless `disableUserCreation`, its groups kept current), the Teams for new groups
 * (unless `disableTeamCreation`) and the user's memberships in the teams of its groups, and the
 * Login key's identity. The I/O that carries it out is `service.ts`.
 */

/** Annotation binding a User to the connector that first signed it in; other connectors may not use it. */
export const LOGIN_CONNECTOR_ANNOTATION = 'login.management.platform/connector';
/** Label marking Teams the login created for a group. */
export const LOGIN_GROUP_TEAM_LABEL = 'login.management.platform/group-team';

export class UnknownUser extends LoginRefused {
  override readonly name = 'UnknownUser';
  constructor() {
    super(
      'there is no user for this sign-in and this platform does not create users at sign-in (disableUserCreation)',
    );
  }
}

export class UserDisabledAtLogin extends LoginRefused {
  override readonly name = 'UserDisabledAtLogin';
  constructor() {
    super('this user is disabled');
  }
}

export class UserBoundElsewhere extends LoginRefused {
  override readonly name = 'UserBoundElsewhere';
  constructor() {
    super('this user signs in through another sign-in method');
  }
}

/**
 * An existing User no sign-in method is bound to (made by an admin, or by `platform dev`): a
 * single sign-on does not take it over, since the username is the provider's to give (anyone may
 * register a free login at a public provider). An admin binds it with the annotation.
 */
export class UserNotBound extends LoginRefused {
  override readonly name = 'UserNotBound';
  constructor(connector: string) {
    super(
      `a user of this name exists and is not bound to this sign-in method; an admin binds it by annotating it ${LOGIN_CONNECTOR_ANNOTATION}=${connector}`,
    );
  }
}

export const userNameFor = (username: string) => objectNameFor(username);
export const teamNameFor = (group: string) => objectNameFor(group);

/** The groups `groupsFilters` lets into the User (all of them without filters); sorted, each once. */
export function filterGroups(groups: readonly string[], filters: readonly string[] | undefined): string[] {
  const patterns = (filters ?? []).map((pattern) => new RegExp(pattern, 'u'));
  const kept = patterns.length === 0 ? groups : groups.filter((group) => patterns.some((p) => p.test(group)));
  return [...new Set(kept)].sort();
}

export interface UserPlan {
  readonly name: string;
  /** The User to create, or undefined when it exists. */
  readonly create: User | undefined;
  /** Changes to an existing User's spec (undefined: none). */
  readonly update: { spec: Partial<User['spec']> } | undefined;
}

/**
 * The User a single-sign-on identity maps to (named from the username): refused when it does not
 * exist and users are not created, when it is disabled, when another connector signed it in
 * first, or when it exists unbound (made by an admin: bound by annotation only, see
 * {@link UserNotBound}).
 */
export function planUser(identity: ExternalIdentity, auth: AuthConfig, existing: User | undefined): UserPlan {
  const name = userNameFor(identity.username);
  const groups = filterGroups(identity.groups, auth.groupsFilters);
  if (!existing) {
    if (auth.disableUserCreation === true) throw new UnknownUser();
    return {
      name,
      update: undefined,
      create: {
        apiVersion: 'management.platform/v1',
        kind: 'User',
        metadata: { name, annotations: { [LOGIN_CONNECTOR_ANNOTATION]: identity.connector } },
        spec: {
          username: identity.username,
          subject: identity.username,
          displayName: identity.preferredUsername ?? identity.username,
          ...(identity.email ? { email: identity.email } : {}),
          groups,
        },
      },
    };
  }
  if (existing.spec.disabled === true) throw new UserDisabledAtLogin();
  const bound = existing.metadata.annotations?.[LOGIN_CONNECTOR_ANNOTATION];
  if (bound === undefined) throw new UserNotBound(identity.connector);
  if (bound !== identity.connector) throw new UserBoundElsewhere();
  const spec: Partial<User['spec']> = {};
  const current = existing.spec.groups ?? [];
  if (current.length !== groups.length || current.some((group, i) => group !== groups[i]))
    spec.groups = groups;
  if (identity.email && existing.spec.email !== identity.email) spec.email = identity.email;
  return {
    name,
    create: undefined,
    update: Object.keys(spec).length > 0 ? { spec } : undefined,
  };
}

/** Teams to create for groups that have none (none with `disableTeamCreation`). */
export function teamsToCreate(
  groups: readonly string[],
  auth: AuthConfig,
  existing: ReadonlySet<string>,
): Team[] {
  if (auth.disableTeamCreation === true) return [];
  return groups
    .filter((group) => !existing.has(teamNameFor(group)))
    .map((group) => ({
      apiVersion: 'management.platform/v1',
      kind: 'Team',
      metadata: { name: teamNameFor(group), labels: { [LOGIN_GROUP_TEAM_LABEL]: 'true' } },
      spec: { displayName: group, groups: [group] },
    }));
}

/**
 * The membership change for one Team: the user joins when one of its groups is in the Team's
 * `spec.groups`, and leaves when it is listed, no longer has any of them, and had one before
 * (memberships an admin gave without a group are never taken away). Undefined when nothing changes.
 */
export function membershipChange(
  team: Team,
  user: string,
  groups: readonly string[],
  previousGroups: readonly string[],
): string[] | undefined {
  const teamGroups = team.spec.groups ?? [];
  const users = team.spec.users ?? [];
  const member = users.includes(user);
  const entitled = teamGroups.some((group) => groups.includes(group));
  const wasEntitled = teamGroups.some((group) => previousGroups.includes(group));
  if (entitled && !member) return [...users, user];
  if (!entitled && member && wasEntitled) return users.filter((name) => name !== user);
  return undefined;
}

/** `spec.identity` of the Login key: what the connector returned, connectorData included (the API strips it). */
export function keyIdentity(identity: ExternalIdentity): SsoIdentity {
  return {
    userId: identity.userId,
    username: identity.username,
    ...(identity.preferredUsername ? { preferredUsername: identity.preferredUsername } : {}),
    ...(identity.email ? { email: identity.email } : {}),
    ...(identity.emailVerified !== undefined ? { emailVerified: identity.emailVerified } : {}),
    ...(identity.extraClaims ? { extraClaims: { ...identity.extraClaims } } : {}),
    groups: [...identity.groups],
    connector: identity.connector,
    ...(identity.connectorData ? { connectorData: identity.connectorData } : {}),
  };
}
