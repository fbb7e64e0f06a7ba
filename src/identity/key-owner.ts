import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import type { Team, User } from '../api/identity.ts';
import { API_GROUP } from '../api/meta.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import {
  GROUP_ADMINS,
  GROUP_AUTHENTICATED,
  isReservedName,
  teamGroup,
  teamUsername,
  userGroup,
} from './groups.ts';

/**
 * Who an access key acts as (step 5 of the authentication decision, `authenticate.ts`, whose
 * module comment states the rules): its user, team or subject, with the Kubernetes username and
 * groups, or why it names no usable owner.
 */

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

export interface KeyOwner {
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
}

/** Where the owner's objects are read (informer caches, or objects read past them). */
export interface OwnerLookups {
  readonly lookupUser: (name: string) => User | undefined;
  readonly lookupTeam: (name: string) => Team | undefined;
}

const isAdmin = (holder: { spec: { clusterRoles?: { name: string }[] | undefined } }) =>
  (holder.spec.clusterRoles ?? []).some((role) => role.name === PLATFORM_ADMIN_CLUSTER_ROLE);

const sortedUnique = (items: readonly string[]) => [...new Set(items)].sort();

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

export function resolveOwner(
  key: OwnedAccessKey,
  context: OwnerLookups,
): KeyOwner | AccessKeyOwnerInvalid | UserDisabled {
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
