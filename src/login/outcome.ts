import type { AuthConfig } from '../api/config-auth.ts';
import type { Team, User } from '../api/identity.ts';
import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import type { Project } from '../api/project.ts';
import { type ExternalIdentity, LoginRefused, objectNameFor } from './identity.ts';

/**
 * What a successful sign-in changes, decided by pure functions: the User (created on first
 * sign-in unless `disableUserCreation`, its groups kept current), the Teams for new groups
 * (unless `disableTeamCreation`) and the user's memberships in the teams of its groups, and the
 * Login key's identity. The I/O that carries it out is `service.ts`.
 */

/**
 * Annotation that bound a User to a connector by name only, before sign-ins recorded the account
 * (`spec.ssoIdentity`). Still read: such a User is refused at sign-in until an admin records its
 * account, and its Login keys keep refreshing (docs/login.md, "Users bound before subjects").
 */
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
 * register a free login at a public provider). An admin binds it by setting `spec.ssoIdentity`.
 */
export class UserNotBound extends LoginRefused {
  override readonly name = 'UserNotBound';
  constructor() {
    super(
      'a user of this name exists and is not bound to this sign-in method; an admin binds it by setting its spec.ssoIdentity (the connector and your account at the provider)',
    );
  }
}

/**
 * The User of this username is another account at the provider (another subject): a renamed,
 * recycled or self-chosen username never reaches someone else's User.
 */
export class AnotherAccount extends LoginRefused {
  override readonly name = 'AnotherAccount';
  constructor() {
    super('the user of this name belongs to another account at the identity provider');
  }
}

/**
 * A User bound to the connector by name only (the legacy annotation, no `spec.ssoIdentity`): whose
 * account it is was never recorded, so no sign-in may claim it until an admin records it.
 */
export class AccountNotRecorded extends LoginRefused {
  override readonly name = 'AccountNotRecorded';
  constructor() {
    super(
      'this user was bound to this sign-in method before accounts were recorded; an admin records your account (spec.ssoIdentity) before you sign in again',
    );
  }
}

/**
 * Users and Teams are named from the username and the group, one-to-one ({@link objectNameFor}).
 * Not from (connector, subject): the Kubernetes username a User acts as is the provider's username
 * (`spec.subject`, with `usernamePrefix`, as kube-apiserver's OIDC authenticator names users), so
 * one User per username is what keeps RoleBindings naming that username and the User in
 * agreement, and kube-apiserver's name uniqueness enforces it without a racy lookup. Which account
 * may use the User is `spec.ssoIdentity`, checked by {@link planUser}.
 */
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

/** Why the identity is applied: a sign-in, or a refresh of a key signed in before. */
export type IdentityPurpose = 'sign-in' | 'refresh';

/**
 * The User a single-sign-on identity maps to (named from the username, {@link userNameFor}):
 * created bound to the identity's connector and subject (`spec.ssoIdentity`) unless
 * `disableUserCreation`; an existing one is used only when it is bound to that very account.
 * Refused when it is disabled, bound to another connector ({@link UserBoundElsewhere}) or another
 * subject ({@link AnotherAccount}), unbound ({@link UserNotBound}: made by an admin), or bound by
 * the legacy annotation only ({@link AccountNotRecorded}; a refresh of a key it already has
 * goes on, since the key was given to that User before).
 */
export function planUser(
  identity: ExternalIdentity,
  auth: AuthConfig,
  existing: User | undefined,
  purpose: IdentityPurpose = 'sign-in',
): UserPlan {
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
        metadata: { name },
        spec: {
          username: identity.username,
          subject: identity.username,
          displayName: identity.preferredUsername ?? identity.username,
          ...(identity.email ? { email: identity.email } : {}),
          ssoIdentity: { connector: identity.connector, userId: identity.userId },
          groups,
        },
      },
    };
  }
  if (existing.spec.disabled === true) throw new UserDisabledAtLogin();
  const binding = existing.spec.ssoIdentity;
  if (binding) {
    if (binding.connector !== identity.connector) throw new UserBoundElsewhere();
    if (binding.userId !== identity.userId) throw new AnotherAccount();
  } else {
    const boundByName = existing.metadata.annotations?.[LOGIN_CONNECTOR_ANNOTATION];
    if (boundByName === undefined) throw new UserNotBound();
    if (boundByName !== identity.connector) throw new UserBoundElsewhere();
    if (purpose === 'sign-in') throw new AccountNotRecorded();
  }
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

/**
 * Teams to create for groups that have none (none with `disableTeamCreation`). Never one whose
 * name is `reserved`: the Teams Projects name as members, which an admin meant for a Team of their
 * own making (a group named like it, in any directory its members can create groups in, would
 * otherwise make that Team and join it, and with it the Projects).
 */
export function teamsToCreate(
  groups: readonly string[],
  auth: AuthConfig,
  existing: ReadonlySet<string>,
  reserved: ReadonlySet<string> = new Set(),
): Team[] {
  if (auth.disableTeamCreation === true) return [];
  return groups
    .filter((group) => !existing.has(teamNameFor(group)) && !reserved.has(teamNameFor(group)))
    .map((group) => ({
      apiVersion: 'management.platform/v1',
      kind: 'Team',
      metadata: { name: teamNameFor(group), labels: { [LOGIN_GROUP_TEAM_LABEL]: 'true' } },
      spec: { displayName: group, groups: [group] },
    }));
}

/** Names of the Teams the Projects name (members, owner): login never creates them ({@link teamsToCreate}). */
export function teamsNamedByProjects(projects: readonly Project[]): Set<string> {
  return new Set(
    projects.flatMap((project) => [
      ...(project.spec.members ?? []).filter((member) => member.kind === 'Team').map((member) => member.name),
      ...(project.spec.owner?.team ? [project.spec.owner.team] : []),
    ]),
  );
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
