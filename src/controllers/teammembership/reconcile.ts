import type { Team, User, UserStatus } from '../../api/identity.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import type { KubeApi } from '../../runtime/kube-client.ts';
import { objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { resources, type Stored } from '../resources.ts';

/** Index of Teams by each user they list in `spec.users`. */
export const BY_MEMBER = 'member-user';
export const membersOf = (team: Team): string[] => [...new Set(team.spec.users ?? [])];

/** The teams a user belongs to, as `User.status.teams` holds them: sorted, each once. */
export function teamsOfUser(teamsListingUser: readonly Team[]): string[] {
  return [...new Set(teamsListingUser.map((team) => team.metadata.name ?? ''))].filter(Boolean).sort();
}

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
