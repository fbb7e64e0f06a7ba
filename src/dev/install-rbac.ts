import { readFileSync } from 'node:fs';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { applyObject, RestMapper } from '../runtime/apply.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';

const FIELD_MANAGER = fieldManagers.dev;

/**
 * The chart's project ClusterRoles and their aggregation (`platform-project-admin`, `-user`,
 * `-viewer` and the `aggregate-to-*` roles that add our kinds): one file, which the chart
 * renders and `platform dev` applies, so local owners can do what installed owners can.
 */
export const PROJECT_ROLES_FILE = new URL('../../charts/platform/files/project-roles.yaml', import.meta.url);

/**
 * The ClusterRoles a virtual cluster's syncer is bound to in its host namespace (one per synced
 * kind); the chart renders the same file, so a local syncer has what an installed one has.
 */
export const SYNCER_ROLES_FILE = new URL('../../charts/platform/files/syncer-roles.yaml', import.meta.url);

/** The objects of a multi-document YAML file (empty documents dropped). */
export function manifests(file: URL): KubernetesObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((document) => document.toJS() as KubernetesObject | null)
    .filter((object): object is KubernetesObject => object !== null);
}

export function projectRoles(): KubernetesObject[] {
  return manifests(PROJECT_ROLES_FILE);
}

/** Applies the project roles and the syncer roles (server-side apply: reruns converge, removed rules go). */
export async function installPlatformRoles(api: KubeApi): Promise<void> {
  const mapper = new RestMapper(api);
  for (const role of [...projectRoles(), ...manifests(SYNCER_ROLES_FILE)])
    await applyObject(api, role, { fieldManager: FIELD_MANAGER, force: true, mapper });
}
