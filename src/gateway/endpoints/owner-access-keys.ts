import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import type { Stored } from '../../api/resources.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { GROUP_ADMINS, teamGroup } from '../../identity/groups.ts';
import type { Store } from '../../runtime/store.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import type { Upstream } from '../proxy/upstream.ts';
import { ownerAccessKeys } from './access-key-rules.ts';
import type { GatewayEndpoint } from './endpoint.ts';
import { rbacForbidden } from './rbac.ts';

/**
 * `users/<u>/accesskeys` and `teams/<t>/accesskeys`: an owner's keys, redacted, from the cache.
 * A user sees their own, a team's members (and the team's keys) the team's; anyone else needs
 * RBAC (`get` on the subresource: platform admins).
 */

export interface OwnerAccessKeysDeps {
  readonly upstream: Upstream;
  readonly keys: Store<Stored<OwnedAccessKey>>;
}

export function ownerAccessKeysEndpoints(deps: OwnerAccessKeysDeps): GatewayEndpoint[] {
  return (['users', 'teams'] as const).map((resource) => ({
    name: `${resource} access keys`,
    route: { kind: 'resource', resource, subresource: 'accesskeys', verbs: ['get'] },
    authentication: 'key',
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      const { attributes, signal } = request;
      const team = resource === 'teams';
      const self = team
        ? (identity.kind === 'Team' && identity.name === attributes.name) ||
          identity.groups.includes(teamGroup(attributes.name))
        : identity.kind === 'User' && identity.name === attributes.name;
      if (
        !self &&
        !identity.groups.includes(GROUP_ADMINS) &&
        !(await subjectAccessAllowed(deps.upstream, identity, attributes, signal))
      ) {
        throw rbacForbidden(identity.username, attributes);
      }
      return {
        code: 200,
        object: ownerAccessKeys(
          team ? 'TeamAccessKeys' : 'UserAccessKeys',
          attributes.name,
          deps.keys.list(),
        ),
      };
    },
  }));
}
