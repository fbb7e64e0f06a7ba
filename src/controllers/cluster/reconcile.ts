import type { Cluster, ClusterStatus } from '../../api/cluster.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { clientForConnection, readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { probeCluster } from '../../clusters/reachability.ts';
import type { Clock } from '../../runtime/clock.ts';
import { errorReason, TerminalError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { PROGRESSING_WITH_RETRY } from '../../runtime/reconcile-conditions.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { type ClusterAccess, readyCondition, recheckAfter } from './desired.ts';

export interface ClusterReconcilerDeps {
  /** The host cluster (the operator's own). */
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
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
 * deleted Cluster leaves nothing to clean up. Without `spec.credentialsSecretRef` the Cluster is
 * Stalled: nothing changes that until its spec does.
 */
export function clusterReconciler(deps: ClusterReconcilerDeps) {
  return objectReconciler<Stored<Cluster>, ClusterStatus>({
    kind: 'Cluster',
    resource: resources.clusters,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.clusters,
    action: 'ProbeCluster',
    apply: (cluster) => reconcileCluster(deps, cluster),
  });
}

/** Probes the cluster with its credentials; `Ready` says whether it answered, and when to probe again. */
async function reconcileCluster(
  deps: ClusterReconcilerDeps,
  cluster: Stored<Cluster>,
): Promise<Converged<ClusterStatus>> {
  const ref = cluster.spec.credentialsSecretRef;
  if (!ref) {
    // Nothing to look at until the spec changes, which is an event of its own.
    throw new CredentialsNotConfigured(
      'spec.credentialsSecretRef is not set, so the platform cannot reach the cluster',
    );
  }
  const access = await accessOf(deps, cluster, ref);
  const ready = readyCondition(access, cluster.metadata.generation);
  const after = recheckAfter(access, true);
  return {
    ready,
    // Not reachable yet: probed again shortly (the Secret is not watched).
    ...(ready.status === 'True'
      ? {}
      : {
          reconciling: { reason: PROGRESSING_WITH_RETRY, message: `probing again in ${after! / 1000} s` },
        }),
    ...(after !== undefined ? { requeueAfter: after } : {}),
  };
}

/** Reads the credentials and probes the cluster with them. */
async function accessOf(
  deps: ClusterReconcilerDeps,
  cluster: Stored<Cluster>,
  ref: NonNullable<Cluster['spec']['credentialsSecretRef']>,
): Promise<ClusterAccess> {
  let connection: Connection;
  try {
    const secretName = `${ref.namespace}/${ref.name}`;
    connection = connectionFor(
      cluster.spec,
      secretName,
      await readCredentialsSecret(deps.api, ref.namespace, ref.name),
    );
  } catch (err) {
    if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
    return { phase: 'noCredentials', reason: errorReason(err), message: err.message };
  }
  const client = (deps.clientFor ?? defaultClientFor)(connection);
  try {
    return {
      phase: 'probed',
      reachability: await probeCluster(client, connection.server, deps.probeTimeoutMs),
    };
  } finally {
    client.close();
  }
}

const defaultClientFor = (connection: Connection) =>
  clientForConnection(connection, fieldManagers.controller);

/** A Cluster without `spec.credentialsSecretRef`: it stays unreachable until its spec changes. */
export class CredentialsNotConfigured extends TerminalError {}
