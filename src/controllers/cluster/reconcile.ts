import type { Cluster } from '../../api/cluster.ts';
import { clientForConnection, readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { probeCluster } from '../../clusters/reachability.ts';
import { patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { type Condition, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import type { KubeApi } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { resources, type Stored } from '../resources.ts';
import { type ClusterAccess, readyCondition, recheckAfter } from './desired.ts';

export interface ClusterReconcilerDeps {
  /** The host cluster (the operator's own). */
  api: KubeApi;
  clock: Clock;
  clusters: Store<Stored<Cluster>>;
  /** How long the reachability probe of a cluster may take. */
  probeTimeoutMs?: number;
  /** A client for a connected cluster (tests may replace it); closed after the probe. */
  clientFor?: (connection: Connection) => KubeApi & { close(): void };
}

/**
 * Reports whether the platform reaches each connected Cluster (`Ready`): a SelfSubjectReview
 * with the credentials of `spec.credentialsSecretRef`, repeated every minute, every 10 s while
 * it fails. Credentials are read with a GET of the Secret on every reconcile (no cache of all
 * Secrets), used for the probe only, and never logged nor kept.
 *
 * No finalizer: the controller creates nothing, in this cluster or the connected one, so a
 * deleted Cluster leaves nothing to clean up.
 */
export function clusterReconciler(deps: ClusterReconcilerDeps) {
  const { api, clusters } = deps;
  const clientFor = deps.clientFor ?? clientForConnection;

  /** Reads the credentials and probes the cluster with them. */
  async function accessOf(cluster: Stored<Cluster>): Promise<ClusterAccess> {
    const ref = cluster.spec.credentialsSecretRef;
    if (!ref) {
      return {
        phase: 'noCredentials',
        reason: 'CredentialsMissing',
        message: 'spec.credentialsSecretRef is not set, so the platform cannot reach the cluster',
      };
    }
    let connection: Connection;
    try {
      const secretName = `${ref.namespace}/${ref.name}`;
      connection = connectionFor(
        cluster.spec,
        secretName,
        await readCredentialsSecret(api, ref.namespace, ref.name),
      );
    } catch (err) {
      if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
      return { phase: 'noCredentials', reason: err.name, message: err.message };
    }
    const client = clientFor(connection);
    try {
      return {
        phase: 'probed',
        reachability: await probeCluster(client, connection.server, deps.probeTimeoutMs),
      };
    } finally {
      client.close();
    }
  }

  return async function reconcile(name: string): Promise<ReconcileResult | undefined> {
    const cluster = clusters.get(name);
    // Deletion first: nothing was created, so there is nothing to undo.
    if (!cluster || cluster.metadata.deletionTimestamp) return undefined;
    const access = await accessOf(cluster);
    const conditions = setCondition(
      (cluster.status?.conditions ?? []) as Condition[],
      readyCondition(access, cluster.metadata.generation),
      new Date(deps.clock.now()),
    );
    // Once per reconcile; patchStatus writes nothing when the status is unchanged.
    await patchStatus(api, resources.clusters, cluster, { ...cluster.status, conditions });
    const after = recheckAfter(access, cluster.spec.credentialsSecretRef !== undefined);
    return after === undefined ? undefined : { requeueAfter: after };
  };
}
