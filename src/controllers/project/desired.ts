import type { V1Namespace, V1ResourceQuota, V1RoleBinding } from '@kubernetes/client-node';
import { MANAGED_BY, MANAGED_BY_LABEL, PROJECT_LABEL } from '../../api/labels.ts';
import { API_GROUP, GROUP_VERSION } from '../../api/meta.ts';
import type { Project } from '../../api/project.ts';
import { teamGroup, userGroup } from '../common.ts';
import { hashedChildName } from '../names.ts';

/** The cluster role a project's owner gets in the project's namespace. */
export const PROJECT_ADMIN_CLUSTER_ROLE = 'platform-project-admin';

/** Name of the RoleBinding of one cluster role in a project namespace. */
export function memberBindingName(clusterRole: string): string {
  return hashedChildName(`project-${clusterRole}`, clusterRole);
}

/** Name of the ResourceQuota carrying a project's `spec.quotas` in its namespace. */
export const PROJECT_QUOTA_NAME = 'platform-project-quota';

/** The quota resource counting VirtualClusterInstances (object count quota of a custom resource). */
export const VIRTUAL_CLUSTER_INSTANCE_COUNT = `count/virtualclusterinstances.${API_GROUP}`;

export interface ProjectChildren {
  namespace: V1Namespace;
  roleBindings: V1RoleBinding[];
  /** Absent when the project sets no quota: then no ResourceQuota of ours is in the namespace. */
  quota?: V1ResourceQuota;
}

const ownerReferencesOf = (project: Project) => [
  {
    apiVersion: GROUP_VERSION,
    kind: 'Project',
    name: project.metadata.name!,
    uid: project.metadata.uid!,
    controller: true,
    blockOwnerDeletion: true,
  },
];

/**
 * The namespace of a project and one RoleBinding per cluster role its members hold there, whose
 * subjects are the platform groups of those members (`platform:user:<u>`, `platform:team:<t>`,
 * `platform:authenticated` for the user `*`); the owner (user or team) holds
 * {@link PROJECT_ADMIN_CLUSTER_ROLE}. Pure, deterministic (sorted subjects, names derived from the
 * role), so an unchanged project needs no write.
 */
export function desiredProjectChildren(project: Project, namespaceName: string): ProjectChildren {
  const name = project.metadata.name!;
  const labels = { [PROJECT_LABEL]: name, [MANAGED_BY_LABEL]: MANAGED_BY };
  const ownerReferences = ownerReferencesOf(project);

  const groupsByRole = new Map<string, Set<string>>();
  const grant = (clusterRole: string, group: string) => {
    const groups = groupsByRole.get(clusterRole) ?? new Set<string>();
    groups.add(group);
    groupsByRole.set(clusterRole, groups);
  };
  for (const member of project.spec.members ?? []) {
    grant(member.clusterRole, member.kind === 'Team' ? teamGroup(member.name) : userGroup(member.name));
  }
  const owner = project.spec.owner;
  if (owner?.user) grant(PROJECT_ADMIN_CLUSTER_ROLE, userGroup(owner.user));
  if (owner?.team) grant(PROJECT_ADMIN_CLUSTER_ROLE, teamGroup(owner.team));

  const roleBindings = [...groupsByRole]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([clusterRole, groups]): V1RoleBinding => ({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: memberBindingName(clusterRole), namespace: namespaceName, labels, ownerReferences },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
        subjects: [...groups]
          .sort()
          .map((group) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group })),
      }),
    );
  const quota = desiredProjectQuota(project, namespaceName);
  return {
    namespace: {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: namespaceName, labels, ownerReferences },
    },
    roleBindings,
    ...(quota ? { quota } : {}),
  };
}

/**
 * The ResourceQuota of a project's `spec.quotas` (pure), or none when it sets no limit. The
 * count is the apiserver's: its quota admission checks and increments the quota's usage in one
 * optimistic write per create, so concurrent creates never exceed it, and members (the project
 * roles grant no write of resourcequotas) cannot lift it.
 */
export function desiredProjectQuota(project: Project, namespaceName: string): V1ResourceQuota | undefined {
  const limit = project.spec.quotas?.virtualClusterInstances;
  if (limit === undefined) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: {
      name: PROJECT_QUOTA_NAME,
      namespace: namespaceName,
      labels: { [PROJECT_LABEL]: project.metadata.name!, [MANAGED_BY_LABEL]: MANAGED_BY },
      ownerReferences: ownerReferencesOf(project),
    },
    spec: { hard: { [VIRTUAL_CLUSTER_INSTANCE_COUNT]: String(limit) } },
  };
}

/** Whether an existing namespace belongs to this project (never adopt someone else's namespace). */
export function namespaceBelongsTo(namespace: V1Namespace, project: Project): boolean {
  return (
    namespace.metadata?.labels?.[PROJECT_LABEL] === project.metadata.name &&
    (namespace.metadata?.ownerReferences ?? []).some((ref) => ref.uid === project.metadata.uid)
  );
}

/** The Project condition telling whether its quotas hold yet; absent when it sets none. */
export const QUOTA_CONDITION = 'QuotaEnforced';

/**
 * `QuotaEnforced` from the project and its ResourceQuota as last seen (pure): True once the
 * cluster's quota controller has counted the instances under the current limit; Unknown before
 * (the apiserver then refuses every new instance of the namespace, 403 "status unknown for
 * quota", so this says why); none when the project sets no quota.
 */
export function quotaCondition(
  project: Project,
  namespaceName: string,
  quota: V1ResourceQuota | undefined,
): { type: string; status: 'True' | 'Unknown'; reason: string; message: string } | undefined {
  const limit = project.spec.quotas?.virtualClusterInstances;
  if (limit === undefined) return undefined;
  const counted =
    quota?.status?.hard?.[VIRTUAL_CLUSTER_INSTANCE_COUNT] === String(limit) &&
    Object.hasOwn(quota.status.used ?? {}, VIRTUAL_CLUSTER_INSTANCE_COUNT);
  const where = `namespace ${namespaceName} (ResourceQuota ${PROJECT_QUOTA_NAME})`;
  return counted
    ? {
        type: QUOTA_CONDITION,
        status: 'True',
        reason: 'Enforced',
        message: `at most ${limit} VirtualClusterInstances in ${where}`,
      }
    : {
        type: QUOTA_CONDITION,
        status: 'Unknown',
        reason: 'NotCounted',
        message: `the cluster's quota controller has not counted the VirtualClusterInstances in ${where} under the limit of ${limit} yet; until it has, the apiserver refuses new ones`,
      };
}
