import type { Cluster } from '../../api/cluster.ts';
import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { provisionedAdminSecretName } from '../../clusters/provisioned-connection.ts';
import type { ProxyTarget } from './target.ts';

/**
 * The access proxy's view of a Cluster or a project's VirtualClusterInstance: how it is cached
 * (a key per object, a version that changes with it) and what it says about reaching it.
 */

/** What a Cluster or VirtualClusterInstance says about reaching it. */
export interface ManagedTarget {
  /** The cache key: `Cluster/<name>` or `VirtualClusterInstance/<namespace>/<name>`. */
  readonly key: string;
  readonly description: string;
  /** uid and resourceVersion: a different one means the object changed. */
  readonly version: string;
  readonly spec: { readonly endpoint?: string | undefined; readonly caData?: string | undefined };
  readonly secret: { readonly namespace: string; readonly name: string } | undefined;
  /**
   * A VirtualClusterInstance the platform provisioned (no `spec.endpoint`): `secret` is its admin
   * Secret, which the provisioner writes (`provisionedConnection` reads it), not one its spec names.
   */
  readonly provisioned?: { readonly instanceName: string };
}

/** The cache key of a Cluster or VirtualClusterInstance target (not a space: those share the host's). */
export function targetKey(
  target: Exclude<ProxyTarget, { kind: 'ProjectSpace' }>,
  projectNamespace: (project: string) => string,
): string {
  return target.kind === 'Cluster'
    ? `Cluster/${target.cluster}`
    : `VirtualClusterInstance/${projectNamespace(target.project)}/${target.virtualCluster}`;
}

export const clusterKey = (cluster: Stored<Cluster>) => `Cluster/${cluster.metadata.name}`;
export const instanceKey = (vci: Stored<VirtualClusterInstance>) =>
  `VirtualClusterInstance/${vci.metadata.namespace}/${vci.metadata.name}`;
const versionOf = (object: { metadata: { uid?: string; resourceVersion?: string } }) =>
  `${object.metadata.uid ?? ''}/${object.metadata.resourceVersion ?? ''}`;

export function clusterTarget(cluster: Stored<Cluster>): ManagedTarget {
  return {
    key: clusterKey(cluster),
    description: `cluster "${cluster.metadata.name}"`,
    version: versionOf(cluster),
    spec: cluster.spec,
    secret: cluster.spec.credentialsSecretRef,
  };
}

export function instanceTarget(vci: Stored<VirtualClusterInstance>, project: string): ManagedTarget {
  const namespace = vci.metadata.namespace ?? '';
  const common = {
    key: instanceKey(vci),
    description: `virtual cluster "${project}/${vci.metadata.name}"`,
    version: versionOf(vci),
    spec: vci.spec,
  };
  if (isProvisioned(vci)) {
    const instanceName = vci.metadata.name ?? '';
    return {
      ...common,
      secret: { namespace, name: provisionedAdminSecretName(instanceName) },
      provisioned: { instanceName },
    };
  }
  const secretName = vci.spec.credentialsSecretRef?.name;
  return { ...common, secret: secretName ? { namespace, name: secretName } : undefined };
}

/** The platform makes this instance (it names a template, no endpoint): see the VirtualClusterInstance schema. */
export function isProvisioned(vci: Pick<VirtualClusterInstance, 'spec'>): boolean {
  return vci.spec.endpoint === undefined && vci.spec.templateRef !== undefined;
}
