import { PatchStrategy } from '@kubernetes/client-node';
import type { ConfigStatus } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import type { Project } from '../api/project.ts';
import { resources } from '../api/resources.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../runtime/kube-client.ts';
import type { ExternalIdentity } from './identity.ts';
import {
  filterGroups,
  membershipChange,
  planUser,
  teamNameFor,
  teamsNamedByProjects,
  teamsToCreate,
  UnknownUser,
  userNameFor,
} from './outcome.ts';

/**
 * What a single sign-on (or a refresh of one) does to the platform's accounts, carried out
 * against the apiserver with the gateway's (or operator's) identity: the User made or updated as
 * `planUser` decides, Teams created for new groups, and the user moved in and out of the Teams of
 * its groups. The decisions are the pure functions of `outcome.ts`.
 */

const MAX_WRITE_ATTEMPTS = 5;

export class LoginAccounts {
  constructor(
    private readonly api: KubeApi,
    private readonly config: () => ConfigStatus,
  ) {}

  async getUser(name: string): Promise<User | undefined> {
    try {
      return await this.api.request<User>({
        method: 'GET',
        path: objectPath(resources.users, undefined, name),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Brings the User of `identity` (and its teams) in line with what the provider said; returns
   * the User's name and uid (the uid a Login key records, see `givenToEarlierUser`). Without `createUser` (a refresh) a missing User is {@link UnknownUser}, never
   * made again, and a User bound by the legacy annotation only is still refreshed (see `planUser`).
   */
  async applyIdentity(
    identity: ExternalIdentity,
    options: { createUser: boolean },
  ): Promise<{ name: string; uid: string | undefined }> {
    const auth = this.config().auth;
    const name = userNameFor(identity.username);
    let previousGroups: readonly string[] = [];
    let uid: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const existing = await this.getUser(name);
      if (!existing && !options.createUser) throw new UnknownUser();
      const plan = planUser(identity, auth, existing, options.createUser ? 'sign-in' : 'refresh');
      previousGroups = existing?.spec.groups ?? [];
      try {
        uid = existing?.metadata.uid;
        if (plan.create) {
          const created = await this.api.request<User>({
            method: 'POST',
            path: collectionPath(resources.users),
            body: plan.create,
          });
          uid = created.metadata.uid;
        } else if (plan.update) {
          await this.api.request({
            method: 'PATCH',
            path: objectPath(resources.users, undefined, name),
            contentType: PatchStrategy.MergePatch,
            body: {
              metadata: { resourceVersion: existing?.metadata.resourceVersion },
              spec: plan.update.spec,
            },
          });
        }
        break;
      } catch (err) {
        if (!(isAlreadyExists(err) || isConflict(err)) || attempt >= MAX_WRITE_ATTEMPTS) throw err;
      }
    }
    await this.syncTeams(name, filterGroups(identity.groups, auth.groupsFilters), previousGroups);
    return { name, uid };
  }

  /** Creates Teams for new groups and moves the user in and out of the teams of its groups. */
  private async syncTeams(
    user: string,
    groups: readonly string[],
    previousGroups: readonly string[],
  ): Promise<void> {
    const auth = this.config().auth;
    const list = await this.api.request<{ items: Team[] }>({
      method: 'GET',
      path: collectionPath(resources.teams),
    });
    const existing = new Set(list.items.map((team) => team.metadata.name ?? ''));
    const missing = groups.filter((group) => !existing.has(teamNameFor(group)));
    const reserved =
      missing.length > 0 && auth.disableTeamCreation !== true
        ? teamsNamedByProjects(
            (
              await this.api.request<{ items: Project[] }>({
                method: 'GET',
                path: collectionPath(resources.projects),
              })
            ).items,
          )
        : new Set<string>();
    const created = teamsToCreate(groups, auth, existing, reserved);
    for (const team of created) {
      try {
        await this.api.request({ method: 'POST', path: collectionPath(resources.teams), body: team });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
    }
    const relevant = new Set([...groups, ...previousGroups]);
    const candidates = [...existing, ...created.map((team) => team.metadata.name ?? '')];
    for (const teamName of new Set(candidates)) {
      for (let attempt = 0; ; attempt++) {
        let team: Team;
        try {
          team = await this.api.request<Team>({
            method: 'GET',
            path: objectPath(resources.teams, undefined, teamName),
          });
        } catch (err) {
          if (isNotFound(err)) break;
          throw err;
        }
        if (!(team.spec.groups ?? []).some((group) => relevant.has(group))) break;
        const users = membershipChange(team, user, groups, previousGroups);
        if (users === undefined) break;
        try {
          await this.api.request({
            method: 'PUT',
            path: objectPath(resources.teams, undefined, teamName),
            body: { ...team, spec: { ...team.spec, users } },
          });
          break;
        } catch (err) {
          if (!isConflict(err) || attempt >= MAX_WRITE_ATTEMPTS) throw err;
        }
      }
    }
  }
}
