import type { Team, User } from '../../api/identity.ts';
import { patchStatus } from '../../runtime/apply.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { isNotFound } from '../../runtime/errors.ts';
import type { KubeApi } from '../../runtime/kube-client.ts';
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
  users: Store<Stored<User>>;
  teams: Store<Stored<Team>>;
}

/**
 * Keeps `User.status.teams` equal to the Teams whose `spec.users` name the user, so that
 * authentication resolves a user's teams from the User alone, never by scanning every Team.
 */
export function teamMembershipReconciler(deps: TeamMembershipReconcilerDeps) {
  return async function reconcile(name: string): Promise<ReconcileResult | undefined> {
    const user = deps.users.get(name);
    if (!user || user.metadata.deletionTimestamp) return undefined;
    const teams = teamsOfUser(deps.teams.byIndex(BY_MEMBER, name));
    const current = user.status?.teams ?? [];
    if (current.length === teams.length && current.every((team, i) => team === teams[i])) return undefined;
    try {
      await patchStatus(deps.api, resources.users, user, { ...user.status, teams });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return undefined;
  };
}
