import type { Team, User, UserStatus } from '../../api/identity.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { ScaffoldStatus } from '../../runtime/scaffold-writes.ts';
import type { Store } from '../../runtime/store.ts';

/** Index of Teams by each user they list in `spec.users`. */
export const BY_MEMBER = 'member-user';
/** Index of Users by each team their `status.teams` lists. */
export const BY_LISTED_TEAM = 'listed-team';
export const membersOf = (team: Team): string[] => [...new Set(team.spec.users ?? [])];
export const listedTeamsOf = (user: User): string[] => [...new Set(user.status?.teams ?? [])];

/** The teams a user belongs to, as `User.status.teams` holds them: sorted, each once. */
export function teamsOfUser(teamsListingUser: readonly Team[]): string[] {
  return [...new Set(teamsListingUser.map((team) => team.metadata.name ?? ''))].filter(Boolean).sort();
}

/** What both controllers of this folder read and write through: the same User and Team caches. */
export interface TeamMembershipReconcilerDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  users: Store<Stored<User>>;
  teams: Store<Stored<Team>>;
}

/**
 * Keeps `User.status.teams` equal to the Teams whose `spec.users` name the user, so that
 * authentication resolves a user's teams from the User alone, never by scanning every Team.
 * `Ready` says the teams are resolved for the user's generation.
 */
export function teamMembershipReconciler(deps: TeamMembershipReconcilerDeps) {
  return objectReconciler<Stored<User>, UserStatus>({
    kind: 'User',
    resource: resources.users,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.users,
    action: 'ResolveTeams',
    statusOf: (user) => ({ teams: teamsOfUser(deps.teams.byIndex(BY_MEMBER, user.metadata.name ?? '')) }),
    apply: async () => ({
      ready: {
        status: 'True',
        reason: 'TeamsResolved',
        message: 'status.teams lists every Team naming the user',
      },
    }),
  });
}

/**
 * Whether a Team's membership is in effect (pure): every User it lists that exists names it in
 * `status.teams` (what authentication reads), and no User names it there that it does not list.
 * The users that lag, by name, sorted; empty when the membership is in effect.
 */
export function membershipLag(
  team: Team,
  user: (name: string) => User | undefined,
  listing: readonly User[],
): { joining: string[]; leaving: string[] } {
  const name = team.metadata.name ?? '';
  const members = membersOf(team);
  const joining = members.filter((member) => {
    const found = user(member);
    return found !== undefined && !listedTeamsOf(found).includes(name);
  });
  const leaving = listing
    .map((listed) => listed.metadata.name ?? '')
    .filter((listed) => listed !== '' && !members.includes(listed));
  return { joining: joining.sort(), leaving: [...new Set(leaving)].sort() };
}

/**
 * A Team's status: `Ready` once its membership is in effect for authentication (every User it
 * lists that exists has it in `status.teams`, which the team membership controller writes, and
 * no other User has), `Unknown` with `Reconciling` (`MembershipPending`) until then, and
 * `observedGeneration`. Users it lists that do not exist yet do not hold it back: they get the
 * team when they are created. Messages depend only on the objects, so nothing is rewritten while
 * nothing changes.
 */
export function teamReconciler(deps: TeamMembershipReconcilerDeps) {
  return objectReconciler<Stored<Team>, ScaffoldStatus>({
    kind: 'Team',
    resource: resources.teams,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.teams,
    action: 'ResolveMembership',
    apply: async (team) => reconcileTeam(deps, team),
  });
}

/** Ready once the team's membership is in effect, MembershipPending (with who lags) until then. */
function reconcileTeam(deps: TeamMembershipReconcilerDeps, team: Stored<Team>): Converged<ScaffoldStatus> {
  const lag = membershipLag(
    team,
    (name) => deps.users.get(name),
    deps.users.byIndex(BY_LISTED_TEAM, team.metadata.name ?? ''),
  );
  if (lag.joining.length === 0 && lag.leaving.length === 0)
    return {
      ready: {
        status: 'True',
        reason: 'MembershipResolved',
        message: 'every User the team lists has it in status.teams, and no other User has',
      },
    };
  const pending = [
    ...(lag.joining.length > 0 ? [`joining: ${lag.joining.join(', ')}`] : []),
    ...(lag.leaving.length > 0 ? [`leaving: ${lag.leaving.join(', ')}`] : []),
  ].join('; ');
  const message = `the users' status.teams do not follow the team yet (${pending})`;
  return {
    ready: { status: 'Unknown', reason: 'MembershipPending', message },
    reconciling: { reason: 'MembershipPending', message },
  };
}
