import type { KubernetesObject } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION } from '../api/meta.ts';
import type { ResourceRef } from '../runtime/kube-client.ts';

/**
 * One of our kinds as the runtime sees it. Our zod types and client-node's describe the same
 * JSON, but client-node types timestamps as Date where the wire (and our caches) hold strings;
 * the intersection satisfies both without copying.
 */
export type Stored<T> = T & KubernetesObject;

/** The resources our controllers read and write. */
export const resources = {
  sharedSecrets: { group: API_GROUP, version: API_VERSION, plural: 'sharedsecrets', namespaced: true },
  ownedAccessKeys: { group: API_GROUP, version: API_VERSION, plural: 'ownedaccesskeys', namespaced: false },
  users: { group: API_GROUP, version: API_VERSION, plural: 'users', namespaced: false },
  teams: { group: API_GROUP, version: API_VERSION, plural: 'teams', namespaced: false },
  projects: { group: API_GROUP, version: API_VERSION, plural: 'projects', namespaced: false },
  clusters: { group: API_GROUP, version: API_VERSION, plural: 'clusters', namespaced: false },
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
  virtualClusterInstances: {
    group: API_GROUP,
    version: API_VERSION,
    plural: 'virtualclusterinstances',
    namespaced: true,
  },
} as const satisfies Record<string, ResourceRef>;

/** Field managers: one per component, so server-side apply tells their intents apart. */
export { fieldManagers } from '../runtime/field-managers.ts';
