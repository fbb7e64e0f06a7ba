import type { KubernetesObject } from '@kubernetes/client-node';
import type { ResourceRef } from '../runtime/kube-client.ts';
import {
  API_GROUP,
  API_VERSION,
  CLUSTER,
  OWNED_ACCESS_KEY,
  PROJECT,
  SHARED_SECRET,
  type StoredKind,
  TEAM,
  USER,
  VIRTUAL_CLUSTER_INSTANCE,
  VIRTUAL_CLUSTER_TEMPLATE,
} from './registry.ts';

/**
 * One of our kinds as the runtime sees it. Our zod types and client-node's describe the same
 * JSON, but client-node types timestamps as Date where the wire (and our caches) hold strings;
 * the intersection satisfies both without copying.
 */
export type Stored<T> = T & KubernetesObject;

/** Where the API client finds a stored kind of ours: its plural and scope come from the registry. */
function resourceOf(kind: StoredKind): ResourceRef {
  return {
    group: API_GROUP,
    version: API_VERSION,
    plural: kind.plural,
    namespaced: kind.scope === 'Namespaced',
  };
}

/** The resources the platform reads and writes: its stored kinds and the built-in ones it uses. */
export const resources = {
  sharedSecrets: resourceOf(SHARED_SECRET),
  ownedAccessKeys: resourceOf(OWNED_ACCESS_KEY),
  users: resourceOf(USER),
  teams: resourceOf(TEAM),
  projects: resourceOf(PROJECT),
  clusters: resourceOf(CLUSTER),
  virtualClusterInstances: resourceOf(VIRTUAL_CLUSTER_INSTANCE),
  virtualClusterTemplates: resourceOf(VIRTUAL_CLUSTER_TEMPLATE),
  roles: { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', namespaced: true },
  roleBindings: {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'rolebindings',
    namespaced: true,
  },
  secrets: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  serviceAccounts: { group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true },
  namespaces: { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
  resourceQuotas: { group: '', version: 'v1', plural: 'resourcequotas', namespaced: true },
} as const satisfies Record<string, ResourceRef>;
