import type { V1Role, V1RoleBinding } from '@kubernetes/client-node';
import { MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL } from '../../api/labels.ts';
import { API_GROUP, GROUP_VERSION } from '../../api/meta.ts';
import type { SharedSecret, SharedSecretAccess } from '../../api/sharedsecret.ts';
import { teamGroup, userGroup } from '../common.ts';
import { hashedChildName } from '../names.ts';

export interface ProjectedRbac {
  roles: V1Role[];
  roleBindings: V1RoleBinding[];
}

/**
 * The key that identifies an access rule across changes: its `name` when it has a unique one,
 * otherwise its position. A named rule keeps its Role when other rules are added or removed.
 */
export function ruleKeys(access: readonly SharedSecretAccess[]): string[] {
  const counts = new Map<string, number>();
  for (const rule of access) if (rule.name) counts.set(rule.name, (counts.get(rule.name) ?? 0) + 1);
  return access.map((rule, index) =>
    rule.name && counts.get(rule.name) === 1 ? `name:${rule.name}` : `index:${index}`,
  );
}

/** Name of the Role and RoleBinding of one rule: `ss-<secret>-<rule>-<hash of both>`. */
export function projectedName(secretName: string, ruleKey: string): string {
  const rule = ruleKey.replace(/^(name|index):/, '');
  return hashedChildName(`ss-${secretName}-${rule}`, `${secretName}\u0000${ruleKey}`);
}

/** The full verb list of a rule: `*` stands for every verb. */
function verbsOf(rule: SharedSecretAccess): string[] {
  return rule.verbs.includes('*') ? ['*'] : [...new Set(rule.verbs)].sort();
}

/**
 * Desired Roles and RoleBindings for a SharedSecret: one of each per `spec.access` entry, in
 * the secret's namespace, owned by it, granting the rule's verbs on this secret only (and on
 * the listed subresources), bound to the platform groups of the rule's users and teams.
 * Pure: the output depends only on the secret's name, namespace, uid and `spec.access`.
 */
export function desiredRbac(secret: SharedSecret): ProjectedRbac {
  const name = secret.metadata.name!;
  const namespace = secret.metadata.namespace!;
  const uid = secret.metadata.uid!;
  const access = secret.spec.access ?? [];
  const keys = ruleKeys(access);
  const ownerReferences = [
    {
      apiVersion: GROUP_VERSION,
      kind: 'SharedSecret',
      name,
      uid,
      controller: true,
      blockOwnerDeletion: true,
    },
  ];
  const labels = { [OWNER_UID_LABEL]: uid, [MANAGED_BY_LABEL]: MANAGED_BY };

  const roles: V1Role[] = [];
  const roleBindings: V1RoleBinding[] = [];
  access.forEach((rule, index) => {
    const objectName = projectedName(name, keys[index]!);
    const metadata = { name: objectName, namespace, labels, ownerReferences };
    const subresources = [...new Set(rule.subresources ?? [])].sort();
    roles.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata,
      rules: [
        {
          apiGroups: [API_GROUP],
          resources: ['sharedsecrets', ...subresources.map((s) => `sharedsecrets/${s}`)],
          resourceNames: [name],
          verbs: verbsOf(rule),
        },
      ],
    });
    const subjects = [
      ...new Set([
        ...[...(rule.users ?? [])].sort().map(userGroup),
        ...[...(rule.teams ?? [])].sort().map(teamGroup),
      ]),
    ].map((group) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }));
    roleBindings.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: objectName },
      subjects,
    });
  });
  return { roles, roleBindings };
}
