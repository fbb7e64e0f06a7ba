import type { Team, User } from '../../api/identity.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { ControllerDeps } from '../common.ts';
import { resources, type Stored } from '../resources.ts';
import { BY_MEMBER, membersOf, teamMembershipReconciler } from './reconcile.ts';

/**
 * The team membership controller: primary Users; a Team maps to every user it lists (before and
 * after a change, so a user removed from a team is reconciled too).
 */
export function setupTeamMembershipController(manager: Manager, deps: ControllerDeps) {
  const users = manager.informer<Stored<User>>(resources.users);
  const teams = manager.informer<Stored<Team>>(resources.teams, {}, { [BY_MEMBER]: membersOf });
  const controller = manager.controller({
    name: 'teammembership',
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? 2,
    reconcile: teamMembershipReconciler({
      api: deps.api,
      clock: deps.clock,
      events: deps.events,
      users: users.store,
      teams: teams.store,
    }),
  });
  controller.watchPrimary(users).watch(teams, membersOf);
  return { controller };
}
