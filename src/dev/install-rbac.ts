import { readFileSync } from 'node:fs';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { applyObject, RestMapper } from '../runtime/apply.ts';
import type { KubeApi } from '../runtime/kube-client.ts';

const FIELD_MANAGER = 'platform-dev';

/**
 * The chart's project ClusterRoles and their aggregation (`platform-project-admin`, `-user`,
 * `-viewer` and the `aggregate-to-*` roles that add our kinds): one file, which the chart
 * renders and `platform dev` applies, so local owners can do what installed owners can.
 */
export const PROJECT_ROLES_FILE = new URL('../../charts/platform/files/project-roles.yaml', import.meta.url);

export function projectRoles(text = readFileSync(PROJECT_ROLES_FILE, 'utf8')): KubernetesObject[] {
  return parseAllDocuments(text)
    .map((document) => document.toJS() as KubernetesObject | null)
    .filter((object): object is KubernetesObject => object !== null);
}

/** Applies the project roles (server-side apply: reruns converge, removed rules go). */
export async function installProjectRoles(api: KubeApi): Promise<void> {
  const mapper = new RestMapper(api);
  for (const role of projectRoles())
    await applyObject(api, role, { fieldManager: FIELD_MANAGER, force: true, mapper });
}
