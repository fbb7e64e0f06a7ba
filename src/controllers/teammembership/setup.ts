import type { Team, User } from '../../api/identity.ts';
import type { Manager } from '../../runtime/manager.ts';
import { addController, type ControllerDeps, reconcilerDeps } from '../common.ts';
import { resources, type Stored } from '../resources.ts';
import { BY_MEMBER, membersOf, teamMembershipReconciler } from './reconcile.ts';

/**
 * The team membership controller: primary Users; a Team maps to every user it lists (before and
 * after a change, so a user removed from a team is reconciled too).
 */
export function setupTeamMembershipController(manager: Manager, deps: ControllerDeps) {
  const users = manager.informer<Stored<User>>(resources.users);
  const teams = manager.informer<Stored<Team>>(resources.teams, {}, { [BY_MEMBER]: membersOf });
  const reconcile = teamMembershipReconciler({
    ...reconcilerDeps(deps),
    users: users.store,
    teams: teams.store,
  });
  const controller = addController(manager, deps, { name: 'teammembership', workers: 2, reconcile });
  controller.watchPrimary(users).watch(teams, membersOf);
  return { controller };
}
