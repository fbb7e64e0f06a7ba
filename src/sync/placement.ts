import type { VirtualClusterInstance } from '../api/virtualclusterinstance.ts';
import { NAME_PLACEHOLDER, type SyncConfig } from './config.ts';

/**
 * Where an instance's syncer may write, pure. A syncer acts in its instance's own namespace, or
 * in another namespace of the same project (a namespace labelled with the same project as the
 * instance's own); nowhere else: not `kube-system`, not the platform's namespace, not another
 * project's, not an unnamed namespace a pattern would reach. Admission refuses any other
 * placement (with the field that names it), and the controller does not start a syncer for one
 * admitted before these rules (or whose namespaces changed project since).
 */

/**
 * The name `spec.clusterRef.cluster` gives the cluster the platform runs in: the only one a
 * syncer writes into until syncing into connected clusters is supported.
 */
export const HOST_CLUSTER_NAME = 'local';

/** Where the syncer writes and what it calls the virtual cluster. */
export function placementOf(vci: Pick<VirtualClusterInstance, 'metadata' | 'spec'>): {
  hostNamespace: string;
  vclusterName: string;
} {
  return {
    hostNamespace: vci.spec.clusterRef?.namespace ?? vci.metadata.namespace ?? '',
    vclusterName: vci.spec.clusterRef?.virtualCluster ?? vci.metadata.name ?? '',
  };
}

/** One host namespace an instance names, and where it is named. */
export interface NamedHostNamespace {
  namespace: string;
  /** The field of the instance (`spec.clusterRef.namespace`, `spec.config`). */
  field: string;
  /** Inside `spec.config`: the mapping that names it. */
  path?: string;
}

export interface PlacementProblem {
  field: string;
  reason: 'FieldValueNotSupported' | 'FieldValueForbidden';
  message: string;
}

type Instance = Pick<VirtualClusterInstance, 'metadata' | 'spec'>;

const mappingPath = (virtual: string) => `sync.toHost.namespaces.mappings.byName[${JSON.stringify(virtual)}]`;

/** The host namespaces a placement writes into (the host namespace, literal mapping targets). */
export function namedHostNamespaces(vci: Instance, config: SyncConfig | null): NamedHostNamespace[] {
  const { hostNamespace, vclusterName } = placementOf(vci);
  const named: NamedHostNamespace[] = [
    {
      namespace: hostNamespace,
      field: vci.spec.clusterRef ? 'spec.clusterRef.namespace' : 'metadata.namespace',
    },
  ];
  const namespaces = config?.sync.toHost.namespaces;
  if (namespaces?.enabled) {
    for (const [virtual, host] of Object.entries(namespaces.mappings.byName)) {
      if (host.includes('*')) continue;
      named.push({
        namespace: host.replaceAll(NAME_PLACEHOLDER, vclusterName),
        field: 'spec.config',
        path: mappingPath(virtual),
      });
    }
  }
  return named;
}

/**
 * Everything wrong with an instance's placement. `projectOf(namespace)` is the project label of
 * a host namespace (undefined: none, or the namespace does not exist); the instance's own
 * namespace is always allowed.
 */
export function placementProblems(
  vci: Instance,
  config: SyncConfig | null,
  projectOf: (namespace: string) => string | undefined,
): PlacementProblem[] {
  const problems: PlacementProblem[] = [];
  const cluster = vci.spec.clusterRef?.cluster;
  if (cluster !== undefined && cluster !== HOST_CLUSTER_NAME) {
    problems.push({
      field: 'spec.clusterRef.cluster',
      reason: 'FieldValueNotSupported',
      message: `virtual clusters run in the cluster the platform runs in, "${HOST_CLUSTER_NAME}"; syncing into another cluster is not supported`,
    });
  }
  const namespaces = config?.sync.toHost.namespaces;
  if (namespaces?.enabled) {
    for (const [virtual, host] of Object.entries(namespaces.mappings.byName)) {
      if (!host.includes('*')) continue;
      problems.push({
        field: 'spec.config',
        reason: 'FieldValueForbidden',
        message: `${mappingPath(virtual)}: a pattern would reach namespaces outside the project; name each host namespace`,
      });
    }
  }
  const own = vci.metadata.namespace ?? '';
  const ownProject = projectOf(own);
  for (const named of namedHostNamespaces(vci, config)) {
    if (named.namespace === own) continue;
    if (ownProject !== undefined && projectOf(named.namespace) === ownProject) continue;
    const where = named.path ? `${named.path}: ` : '';
    problems.push({
      field: named.field,
      reason: 'FieldValueForbidden',
      message: `${where}namespace ${JSON.stringify(named.namespace)} is not ${ownProject === undefined ? "this instance's namespace" : `a namespace of project ${JSON.stringify(ownProject)}`}; a virtual cluster syncs only into its own project's namespaces`,
    });
  }
  return problems;
}

/**
 * One syncer per placement: two instances syncing into the same host namespace under the same
 * virtual cluster name would each take the other's host objects for its own and overwrite them
 * forever. The instance created first keeps the placement; any other is refused until it goes.
 */
export function placementClaims(
  vci: Instance,
  placedInSameNamespace: readonly Instance[],
): PlacementProblem[] {
  const { hostNamespace, vclusterName } = placementOf(vci);
  const order = (other: Instance) =>
    `${other.metadata.creationTimestamp ?? ''}\u0000${other.metadata.namespace ?? ''}\u0000${other.metadata.name ?? ''}`;
  const holder = placedInSameNamespace.find(
    (other) =>
      other.metadata.uid !== vci.metadata.uid &&
      other.spec.config !== undefined &&
      other.spec.credentialsSecretRef !== undefined &&
      !other.metadata.deletionTimestamp &&
      placementOf(other).hostNamespace === hostNamespace &&
      placementOf(other).vclusterName === vclusterName &&
      order(other) < order(vci),
  );
  if (!holder) return [];
  return [
    {
      field: vci.spec.clusterRef ? 'spec.clusterRef.virtualCluster' : 'metadata.name',
      reason: 'FieldValueForbidden',
      message: `VirtualClusterInstance ${holder.metadata.namespace}/${holder.metadata.name} already syncs virtual cluster ${JSON.stringify(vclusterName)} into namespace ${JSON.stringify(hostNamespace)}`,
    },
  ];
}
