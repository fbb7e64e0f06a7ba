import { beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Hole 8 of issue 16: project members could not list their project's members (the endpoint asked
 * RBAC for `get` on the Project, which nothing grants them; the e2e test even asserted 403 for the
 * owner). Members, the owner included, list them; outsiders get 403, for projects that exist and
 * for those that do not alike.
 */
describe('security: project members list their project, outsiders do not', () => {
  const env = useGatewayEnv();
  const project = uniqueName('web');
  const names = {
    owner: uniqueName('olga'),
    member: uniqueName('mia'),
    teamMate: uniqueName('tom'),
    outsider: uniqueName('otto'),
  };
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    for (const [role, name] of Object.entries(names)) tokens[role] = await env().user(name);
    const team = uniqueName('devs');
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'teams',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Team',
        metadata: { name: team },
        spec: { users: [names.teamMate] },
      },
    });
    // The team membership controller does not run here: record tom's team as it would.
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: `/apis/${GROUP_VERSION}/users/${names.teamMate}/status`,
      contentType: 'application/merge-patch+json',
      body: { status: { teams: [team] } },
    });
    tokens.teamMate = await env().key({ user: names.teamMate });
    await env().accepted(tokens.teamMate);
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: project },
        spec: {
          owner: { user: names.owner },
          members: [
            { kind: 'User', name: names.member, clusterRole: 'viewer' },
            { kind: 'Team', name: team, clusterRole: 'editor' },
          ],
        },
      },
    });
  });

  const members = (token: string, name = project) => call(`${env().api}/projects/${name}/members`, { token });

  test('the owner, a member and a member of a member team list the members', async () => {
    for (const role of ['owner', 'member', 'teamMate']) {
      const answer = await members(tokens[role]!);
      expect(answer.status, `${role}: ${answer.text}`).toBe(200);
      expect(answer.json.users.map((user: { info: { name: string } }) => user.info.name).sort()).toEqual(
        [names.owner, names.member, names.teamMate].sort(),
      );
    }
  });

  test('an outsider gets 403, whether the project exists or not', async () => {
    for (const name of [project, uniqueName('nowhere')]) {
      const answer = await members(tokens.outsider!, name);
      expect(answer.status).toBe(403);
      expect(answer.json.kind).toBe('Status');
      expect(answer.text).not.toContain(names.owner);
    }
  });
});
