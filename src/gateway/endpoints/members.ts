import type { Team, User } from '../../api/identity.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import type { Project } from '../../api/project.ts';
import type { Stored } from '../../api/resources.ts';
import { failureStatus, reasonForCode, serviceUnavailable } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { GROUP_ADMINS } from '../../identity/groups.ts';
import { isProjectMember, projectMembers } from '../../identity/members.ts';
import type { Store } from '../../runtime/store.ts';
import { upstreamPath } from '../paths.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import { type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import type { GatewayEndpoint } from './endpoint.ts';
import { rbacForbidden } from './rbac.ts';

/**
 * `projects/<p>/members`: the project's members. The project's own members (its owner included)
 * may list them; so may anyone RBAC allows `get` on `projects/members` (platform admins).
 * Everybody else gets 403, also for a project that does not exist, so the answer does not tell
 * outsiders which projects exist. The Project is read as the gateway: members hold no `get` on
 * it (their project roles are in the project's namespace).
 */

export interface MembersDeps {
  readonly upstream: Upstream;
  readonly users: Store<Stored<User>>;
  readonly teams: Store<Stored<Team>>;
}

export function membersEndpoint(deps: MembersDeps): GatewayEndpoint {
  return {
    name: 'project members',
    route: { kind: 'resource', resource: 'projects', subresource: 'members', verbs: ['get'] },
    authentication: 'key',
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      const { attributes, signal } = request;
      const answer = await deps.upstream
        .json<Project>({ method: 'GET', path: upstreamPath({ ...attributes, subresource: '' }), signal })
        .catch((error: unknown) => {
          throw upstreamFailure(error, signal);
        });
      if (answer.statusCode !== 200 && answer.statusCode !== 404) {
        throw serviceUnavailable('the project could not be read');
      }
      const project = answer.statusCode === 200 ? answer.body : undefined;
      const member = project !== undefined && isProjectMember(project, identity);
      const allowed =
        member ||
        identity.groups.includes(GROUP_ADMINS) ||
        (await subjectAccessAllowed(deps.upstream, identity, attributes, signal));
      if (!allowed) throw rbacForbidden(identity.username, attributes);
      if (!project) {
        return {
          code: 404,
          object: failureStatus(
            404,
            reasonForCode(404),
            `projects.management.platform "${attributes.name}" not found`,
            {
              name: attributes.name,
              group: 'management.platform',
              kind: 'projects',
            },
          ),
        };
      }
      return {
        code: 200,
        object: {
          apiVersion: GROUP_VERSION,
          kind: 'ProjectMembers',
          metadata: { name: attributes.name },
          ...projectMembers(project, deps.users.list(), deps.teams.list()),
        },
      };
    },
  };
}
