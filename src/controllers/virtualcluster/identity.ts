import type { V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import {
  INSTANCE_ANNOTATION,
  INSTANCE_UID_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  SYNCER_SERVICE_ACCOUNT_PREFIX,
} from '../../api/labels.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { deepEqual } from '../../runtime/json.ts';
import type { SyncedKind } from '../../sync/translate.ts';
import { hashedChildName } from '../names.ts';

/**
 * The identity a VirtualClusterInstance's syncer acts as on the host, pure: a ServiceAccount of
 * its own in its host namespace, and one RoleBinding there per kind it syncs, to the ClusterRole
 * that allows exactly the syncer's verbs on that kind (`charts/platform/files/syncer-roles.yaml`).
 * A RoleBinding confines the ClusterRole to the host namespace, so the syncer can touch nothing
 * else: no other namespace, no other kind, no RBAC, no SharedSecret. Every verb it holds is one
 * the project's `edit` role holds too, so the syncer is never stronger than the tenants who
 * configure it.
 */

/** The label `app.kubernetes.io/component` of the same objects. */
export const SYNCER_COMPONENT = 'vcluster-syncer';

/** The ClusterRole a syncer of `kind` is bound to in its host namespace (fixed names, one install per cluster). */
export const SYNCER_CLUSTER_ROLES: Readonly<Record<SyncedKind, string>> = {
  Service: 'platform-vcluster-syncer-services',
  Endpoints: 'platform-vcluster-syncer-endpoints',
  Secret: 'platform-vcluster-syncer-secrets',
  ConfigMap: 'platform-vcluster-syncer-configmaps',
};

export interface SyncerIdentity {
  serviceAccount: V1ServiceAccount;
  roleBindings: V1RoleBinding[];
}

type InstanceRef = Pick<VirtualClusterInstance, 'metadata'>;

const identityOf = (vci: InstanceRef) => `${vci.metadata.namespace ?? ''}/${vci.metadata.name ?? ''}`;

/** The syncer's ServiceAccount name: readable, unique per instance even beside other projects' instances. */
export function syncerServiceAccountName(vci: InstanceRef): string {
  return hashedChildName(`${SYNCER_SERVICE_ACCOUNT_PREFIX}${vci.metadata.name ?? ''}`, identityOf(vci));
}

/**
 * The ServiceAccount (in `hostNamespace`) and RoleBindings of an instance's syncer that syncs
 * `kinds` into `namespaces` (the host namespace, and those its namespace mappings name).
 */
export function desiredSyncerIdentity(
  vci: InstanceRef,
  hostNamespace: string,
  kinds: readonly SyncedKind[],
  namespaces: readonly string[] = [hostNamespace],
): SyncerIdentity {
  const serviceAccountName = syncerServiceAccountName(vci);
  const metadata = (name: string, namespace = hostNamespace) => ({
    name,
    namespace,
    labels: {
      [INSTANCE_UID_LABEL]: vci.metadata.uid ?? '',
      [MANAGED_BY_LABEL]: MANAGED_BY,
      'app.kubernetes.io/component': SYNCER_COMPONENT,
    },
    annotations: { [INSTANCE_ANNOTATION]: identityOf(vci) },
  });
  const roleBindings = [...new Set(namespaces)].flatMap((namespace) =>
    [...new Set(kinds)].sort().map(
      (kind): V1RoleBinding => ({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: metadata(
          hashedChildName(
            `${SYNCER_SERVICE_ACCOUNT_PREFIX}${vci.metadata.name ?? ''}-${kind}`,
            `${identityOf(vci)}/${kind}`,
          ),
          namespace,
        ),
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: SYNCER_CLUSTER_ROLES[kind],
        },
        subjects: [{ kind: 'ServiceAccount', name: serviceAccountName, namespace: hostNamespace }],
      }),
    ),
  );
  return {
    serviceAccount: {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: metadata(serviceAccountName),
      // Nothing runs as it: no pod in the namespace gets its token mounted by default.
      automountServiceAccountToken: false,
    },
    roleBindings,
  };
}

/** The instance key (`namespace/name`) a syncer identity object belongs to, from its annotation. */
export function instanceKeyOf(obj: { metadata?: { annotations?: Record<string, string> } }): string[] {
  const key = obj.metadata?.annotations?.[INSTANCE_ANNOTATION];
  return key && /^[^/]+\/[^/]+$/.test(key) ? [key] : [];
}

const labelsAndAnnotationsHeld = (
  existing: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } },
  desired: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } },
) =>
  Object.entries(desired.metadata?.labels ?? {}).every(([k, v]) => existing.metadata?.labels?.[k] === v) &&
  Object.entries(desired.metadata?.annotations ?? {}).every(
    ([k, v]) => existing.metadata?.annotations?.[k] === v,
  );

/** Whether the cached ServiceAccount carries everything the desired one says (others may add more). */
export function serviceAccountMatches(
  existing: V1ServiceAccount | undefined,
  desired: V1ServiceAccount,
): boolean {
  return (
    existing !== undefined &&
    labelsAndAnnotationsHeld(existing, desired) &&
    existing.automountServiceAccountToken === desired.automountServiceAccountToken
  );
}

/** Whether the cached RoleBinding grants exactly what the desired one does. */
export function roleBindingMatches(existing: V1RoleBinding | undefined, desired: V1RoleBinding): boolean {
  return (
    existing !== undefined &&
    labelsAndAnnotationsHeld(existing, desired) &&
    deepEqual(existing.roleRef, desired.roleRef) &&
    deepEqual(existing.subjects ?? [], desired.subjects ?? [])
  );
}
