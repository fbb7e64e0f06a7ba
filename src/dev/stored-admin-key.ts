import type { V1Secret } from '@kubernetes/client-node';
import { PLATFORM_CONFIG_SECRET } from '../api/config.ts';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources } from '../api/resources.ts';
import { PlatformConfigReader } from '../config/platform-config.ts';
import { type AuthenticationContext, authenticateAccessKey } from '../identity/authenticate.ts';
import { GROUP_ADMINS } from '../identity/groups.ts';
import { MalformedAccessKey, parseAccessKey } from '../identity/keys.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, type ObjectList, objectPath } from '../runtime/kube-client.ts';

/**
 * Whether the admin key a restart of `platform dev` finds in admin.kubeconfig may stay: judged
 * by the gateway's own authentication decision, over what the apiserver holds now.
 */

export type StoredKeyVerdict = { readonly keep: true } | { readonly keep: false; readonly reason: string };

/**
 * Whether the key stored in admin.kubeconfig can be kept: exactly when the gateway would accept
 * it now (the same {@link authenticateAccessKey} decision: well-formed, its OwnedAccessKey exists
 * and matches, not disabled or being deleted, not expired, its user exists and is enabled) and
 * it acts as a platform admin. The reason names no secret. Pure.
 */
export function storedKeyVerdict(
  accessKey: string | undefined,
  context: AuthenticationContext,
): StoredKeyVerdict {
  if (accessKey === undefined) return { keep: false, reason: 'no admin key is stored yet' };
  const result = authenticateAccessKey(accessKey, context);
  if (!result.ok) return { keep: false, reason: `the stored one is refused: ${result.failure.message}` };
  if (!result.identity.groups.includes(GROUP_ADMINS))
    return { keep: false, reason: 'the stored one does not act as a platform admin' };
  return { keep: true };
}

async function getOrUndefined<T>(api: KubeApi, path: string): Promise<T | undefined> {
  try {
    return await api.request<T>({ method: 'GET', path });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * What {@link storedKeyVerdict} needs, read from the apiserver: the key object with the stored
 * key's id, its user or team (and the user's teams), and the lifetime limits of the platform
 * configuration.
 */
export async function authenticationContextFromApi(
  api: KubeApi,
  platformNamespace: string,
  accessKey: string,
  pepper: Uint8Array,
  now: () => Date,
): Promise<AuthenticationContext> {
  const parsed = parseAccessKey(accessKey);
  const keys =
    parsed instanceof MalformedAccessKey
      ? []
      : (
          await api.request<ObjectList<OwnedAccessKey>>({
            method: 'GET',
            path: collectionPath(resources.ownedAccessKeys),
            query: { fieldSelector: `spec.keyId=${parsed.id}` },
          })
        ).items;
  const users = new Map<string, User>();
  const teams = new Map<string, Team>();
  const readTeam = async (name: string) => {
    const team = await getOrUndefined<Team>(api, objectPath(resources.teams, undefined, name));
    if (team) teams.set(name, team);
  };
  for (const key of keys) {
    if (key.spec.user) {
      const user = await getOrUndefined<User>(api, objectPath(resources.users, undefined, key.spec.user));
      if (user) users.set(key.spec.user, user);
      for (const team of user?.status?.teams ?? []) await readTeam(team);
    }
    if (key.spec.team) await readTeam(key.spec.team);
  }
  const configSecret = await getOrUndefined<V1Secret>(
    api,
    objectPath(resources.secrets, platformNamespace, PLATFORM_CONFIG_SECRET),
  );
  return {
    lookupKey: (id) => keys.filter((key) => key.spec.keyId === id),
    lookupUser: (name) => users.get(name),
    lookupTeam: (name) => teams.get(name),
    pepper,
    now,
    limits: new PlatformConfigReader().of(configSecret).auth,
  };
}

/** The context of a start with no stored key: nothing to look up. */
export function emptyContext(pepper: Uint8Array, now: () => Date): AuthenticationContext {
  return {
    lookupKey: () => [],
    lookupUser: () => undefined,
    lookupTeam: () => undefined,
    pepper,
    now,
    limits: {},
  };
}
