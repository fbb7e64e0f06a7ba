import { PLATFORM_ADMIN_CLUSTER_ROLE } from '../api/common.ts';
import type { Team, User } from '../api/identity.ts';
import type { EntityInfo, Project, ProjectMembers } from '../api/project.ts';
import { teamGroup } from './groups.ts';

/**
 * The members of a project (the `projects/<p>/members` virtual resource):
 *
 * - users: the project's direct `User` members, the users of its `Team` members (their
 *   `spec.users`), and its owner user (`spec.owner.user`); a `User` member named `*` means every
 *   user;
 * - teams: its `Team` members and its owner team (`spec.owner.team`);
 * - platform-wide admins are not listed: users holding the cluster role `platform-admin` or in a
 *   team that does (by the user's `status.teams`), and teams holding it;
 * - members that name no existing User or Team are left out; each appears once; both lists are
 *   sorted by name.
 *
 * `info` carries `name`, `displayName`, `icon`, `username`, `email`, `subject` for users and only
 * `name`, `displayName`, `username` for teams (a Team has no icon, email or subject).
 */
export function projectMembers(
  project: Project,
  users: readonly User[],
  teams: readonly Team[],
): Pick<ProjectMembers, 'users' | 'teams'> {
  const usersByName = new Map(users.map((user) => [user.metadata.name ?? '', user]));
  const teamsByName = new Map(teams.map((team) => [team.metadata.name ?? '', team]));
  const holdsAdmin = (holder: User | Team) =>
    (holder.spec.clusterRoles ?? []).some((role) => role.name === PLATFORM_ADMIN_CLUSTER_ROLE);
  const isAdminUser = (user: User) =>
    holdsAdmin(user) ||
    (user.status?.teams ?? []).some((name) => {
      const team = teamsByName.get(name);
      return team !== undefined && holdsAdmin(team);
    });

  const userNames = new Set<string>();
  const teamNames = new Set<string>();
  const members = project.spec.members ?? [];
  if (project.spec.owner?.user) userNames.add(project.spec.owner.user);
  if (project.spec.owner?.team) teamNames.add(project.spec.owner.team);
  for (const member of members) {
    if (member.kind === 'User') {
      if (member.name === '*') for (const name of usersByName.keys()) userNames.add(name);
      else userNames.add(member.name);
    } else {
      teamNames.add(member.name);
    }
  }
  for (const teamName of teamNames) {
    for (const userName of teamsByName.get(teamName)?.spec.users ?? []) userNames.add(userName);
  }

  const memberUsers = [...userNames]
    .map((name) => usersByName.get(name))
    .filter((user): user is User => user !== undefined && !isAdminUser(user))
    .map((user) => ({ info: userInfo(user) }));
  const memberTeams = [...teamNames]
    .map((name) => teamsByName.get(name))
    .filter((team): team is Team => team !== undefined && !holdsAdmin(team))
    .map((team) => ({ info: teamInfo(team) }));
  const byName = (a: { info: EntityInfo }, b: { info: EntityInfo }) =>
    a.info.name < b.info.name ? -1 : a.info.name > b.info.name ? 1 : 0;
  return { users: memberUsers.sort(byName), teams: memberTeams.sort(byName) };
}

function withoutUndefined(info: EntityInfo): EntityInfo {
  return Object.fromEntries(Object.entries(info).filter(([, value]) => value !== undefined)) as EntityInfo;
}

function userInfo(user: User): EntityInfo {
  return withoutUndefined({
    name: user.metadata.name ?? '',
    displayName: user.spec.displayName,
    icon: user.spec.icon,
    username: user.spec.username,
    email: user.spec.email,
    subject: user.spec.subject,
  });
}

function teamInfo(team: Team): EntityInfo {
  return withoutUndefined({
    name: team.metadata.name ?? '',
    displayName: team.spec.displayName,
    username: team.spec.username,
  });
}

/** Who asks whether they belong to a project: the identity a key acts as. */
interface MemberCandidate {
  readonly kind: 'User' | 'Team' | 'Subject';
  readonly name: string;
  /** The identity's groups (`platform:team:<t>` for each of a user's teams). */
  readonly groups: readonly string[];
}

/**
 * Whether `candidate` is one of the project's members as {@link projectMembers} counts them (its
 * owner, a listed user or `*`, a member of a listed or owning team), so members may see who else
 * is. A bare subject is nobody's member.
 */
export function isProjectMember(project: Project, candidate: MemberCandidate): boolean {
  const owner = project.spec.owner;
  const members = project.spec.members ?? [];
  const inTeam = (team: string) =>
    candidate.kind === 'Team' ? candidate.name === team : candidate.groups.includes(teamGroup(team));
  if (candidate.kind === 'Subject') return false;
  if (candidate.kind === 'User' && owner?.user === candidate.name) return true;
  if (owner?.team && inTeam(owner.team)) return true;
  return members.some((member) =>
    member.kind === 'User'
      ? candidate.kind === 'User' && (member.name === '*' || member.name === candidate.name)
      : inTeam(member.name),
  );
}
