import type { Team, User } from '../../api/identity.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { Manager } from '../../runtime/manager.ts';
import { anyOf, generationChanged, lifecycleChanged } from '../../runtime/predicates.ts';
import { addController, type ControllerDeps, reconcilerDeps } from '../common.ts';
import {
  BY_LISTED_TEAM,
  BY_MEMBER,
  listedTeamsOf,
  membersOf,
  teamMembershipReconciler,
  teamReconciler,
} from './reconcile.ts';

/**
 * The team membership controller: primary Users; a Team maps to every user it lists (before and
 * after a change, so a user removed from a team is reconciled too). Beside it, the Team status
 * controller (`team`): primary Teams; a User maps to the teams it lists in `status.teams` and the
 * teams that list it (before and after its change), so a Team is Ready once its membership is in
 * effect.
 */
export function setupTeamMembershipController(manager: Manager, deps: ControllerDeps) {
  const users = manager.informer<Stored<User>>(resources.users, {}, { [BY_LISTED_TEAM]: listedTeamsOf });
  const teams = manager.informer<Stored<Team>>(resources.teams, {}, { [BY_MEMBER]: membersOf });
  const reconcile = teamMembershipReconciler({
    ...reconcilerDeps(deps),
    users: users.store,
    teams: teams.store,
  });
  const controller = addController(manager, deps, { name: 'teammembership', workers: 2, reconcile });
  // Users without predicates: status.teams is what authorization reads, so a write of it by
  // anyone else is put right at once. A Team's members change with its spec (or it goes).
  controller.watchPrimary(users).watch(teams, membersOf, { predicates: [generationChanged] });
  const teamController = addController(manager, deps, {
    name: 'team',
    workers: 2,
    reconcile: teamReconciler({ ...reconcilerDeps(deps), users: users.store, teams: teams.store }),
  });
  teamController
    // Its own Ready writes change nothing it decides (spec.users, and the users' status.teams).
    .watchPrimary(teams, { predicates: [anyOf(generationChanged, lifecycleChanged)] })
    .watch(users, (user) => [
      ...listedTeamsOf(user),
      ...teams.store.byIndex(BY_MEMBER, user.metadata.name ?? '').map((team) => team.metadata.name ?? ''),
    ]);
  return { controller, teamController };
}
