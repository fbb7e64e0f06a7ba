import type { Logger } from 'pino';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import {
  type ClusterAccess,
  clientForConnection,
  RECHECK_MS,
  RETRY_CONNECTION_MS,
  readCredentialsSecret,
} from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { probeCluster } from '../../clusters/reachability.ts';
import { patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { type Condition, removeCondition, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileContext, ReconcileResult } from '../../runtime/controller.ts';
import type { KubeApi, KubeClient } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { Store } from '../../runtime/store.ts';
import { validateSyncConfig } from '../../sync/config.ts';
import { type Syncer, type SyncerOptions, startSyncer } from '../../sync/controllers/syncer.ts';
import { resources, type Stored } from '../resources.ts';
import {
  placementOf,
  readyCondition,
  SYNCING_CONDITION,
  type SyncerState,
  syncerFingerprint,
  syncingCondition,
} from './desired.ts';

interface Running {
  fingerprint: string;
  syncer: Syncer;
  client: KubeClient;
}

export interface SyncerFactoryInput {
  key: string;
  virtual: KubeApi;
  hostNamespace: string;
  vclusterName: string;
  config: SyncerOptions['config'];
  logger: Logger;
  onStatusChange: () => void;
}

/**
 * The syncers this operator replica runs, one per VirtualClusterInstance key. Start, restart and
 * stop happen only inside that key's reconcile (the work queue never runs one key twice at once),
 * or in `stopAll` once the controller stopped.
 */
export class SyncerSupervisor {
  private readonly running = new Map<string, Running>();

  constructor(private readonly create: (input: SyncerFactoryInput) => Syncer) {}

  get(key: string): Running | undefined {
    return this.running.get(key);
  }

  keys(): string[] {
    return [...this.running.keys()];
  }

  start(input: Omit<SyncerFactoryInput, 'virtual'> & { fingerprint: string; client: KubeClient }): Running {
    const syncer = this.create({ ...input, virtual: input.client });
    const entry = { fingerprint: input.fingerprint, syncer, client: input.client };
    this.running.set(input.key, entry);
    return entry;
  }

  async stop(key: string): Promise<void> {
    const entry = this.running.get(key);
    if (!entry) return;
    this.running.delete(key);
    await entry.syncer.stop();
    entry.client.close();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.keys().map((key) => this.stop(key)));
  }
}

export interface VirtualClusterReconcilerDeps {
  /** The host cluster (the operator's own). */
  api: KubeApi;
  clock: Clock;
  instances: Store<Stored<VirtualClusterInstance>>;
  supervisor: SyncerSupervisor;
  /** Enqueues a key of this controller (a syncer's status changed). */
  enqueue: (key: string) => void;
  /** How long the reachability probe of a virtual cluster may take. */
  probeTimeoutMs?: number;
}

/** The default syncer factory: the syncers run on the operator's manager, the host is `host`. */
export function syncerFactory(options: {
  manager: Manager;
  host: KubeApi;
}): (input: SyncerFactoryInput) => Syncer {
  return (input) =>
    startSyncer({
      manager: options.manager,
      virtual: input.virtual,
      host: options.host,
      hostNamespace: input.hostNamespace,
      name: input.vclusterName,
      config: input.config,
      logger: input.logger,
      controllerPrefix: `syncer:${input.key}:`,
      onStatusChange: input.onStatusChange,
    });
}

/**
 * Reports whether the platform reaches each VirtualClusterInstance (`Ready`: a SelfSubjectReview
 * with the credentials of `spec.credentialsSecretRef`, repeated every minute, every 10 s while it
 * fails) and runs one syncer per instance that has `spec.credentialsSecretRef` and
 * `spec.config`, restarts it when anything it was started from changes (configuration,
 * credentials, endpoint, placement), stops it when the instance goes, and reports how it does in
 * the `Syncing` condition. Nothing is written to the virtual cluster or the host here; that is
 * the syncer's job. Credentials are read with a GET on every reconcile (no cache of all Secrets)
 * and never logged; only a digest of them is kept.
 */
export function virtualClusterReconciler(deps: VirtualClusterReconcilerDeps) {
  const { api, instances, supervisor } = deps;

  /** Writes `Ready` and `Syncing` at once (nothing when both are unchanged). */
  async function writeConditions(
    vci: Stored<VirtualClusterInstance>,
    access: ClusterAccess,
    state: SyncerState,
  ): Promise<void> {
    const generation = vci.metadata.generation;
    const syncing = syncingCondition(state, generation);
    const now = new Date(deps.clock.now());
    let conditions = (vci.status?.conditions ?? []) as Condition[];
    conditions =
      syncing === null
        ? removeCondition(conditions, SYNCING_CONDITION)
        : setCondition(conditions, syncing, now);
    conditions = setCondition(conditions, readyCondition(access, syncing, generation), now);
    // patchStatus writes nothing when the status is unchanged.
    await patchStatus(api, resources.virtualClusterInstances, vci, { ...vci.status, conditions });
  }

  return async function reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const vci = instances.get(key);
    if (!vci || vci.metadata.deletionTimestamp) {
      await supervisor.stop(key);
      return undefined;
    }
    const { spec } = vci;
    const namespace = vci.metadata.namespace ?? '';

    let connection: Connection | undefined;
    let access: ClusterAccess;
    if (!spec.credentialsSecretRef) {
      access = {
        phase: 'noCredentials',
        reason: 'CredentialsMissing',
        message: 'spec.credentialsSecretRef is not set, so the platform cannot reach the virtual cluster',
      };
    } else {
      const secretName = spec.credentialsSecretRef.name;
      try {
        connection = connectionFor(spec, secretName, await readCredentialsSecret(api, namespace, secretName));
        access = { phase: 'probed', reachability: { reachable: true, username: '' } };
      } catch (err) {
        if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
        access = { phase: 'noCredentials', reason: err.name, message: err.message };
      }
    }

    // The syncer's side: what it would be started from, and whether the running one still fits.
    const validated = spec.config === undefined ? undefined : validateSyncConfig(spec.config);
    const { hostNamespace, vclusterName } = placementOf(vci);
    const fingerprint =
      connection && spec.config !== undefined
        ? syncerFingerprint({ connection, config: spec.config, hostNamespace, vclusterName })
        : undefined;
    let running = supervisor.get(key);
    if (running && (fingerprint === undefined || running.fingerprint !== fingerprint || !validated?.config)) {
      await supervisor.stop(key);
      running = undefined;
    }

    // Reachability, with the running syncer's client when there is one.
    let probeClient: KubeClient | undefined;
    if (connection) {
      probeClient = running?.client ?? clientForConnection(connection);
      access = {
        phase: 'probed',
        reachability: await probeCluster(probeClient, connection.server, deps.probeTimeoutMs),
      };
    }
    const reachable = access.phase === 'probed' && access.reachability.reachable;

    let state: SyncerState;
    if (spec.config === undefined || !spec.credentialsSecretRef) state = { phase: 'notConfigured' };
    else if (!validated?.config)
      // Admission rejects such configurations; this covers objects written without it.
      state = { phase: 'invalidConfig', errors: validated?.errors ?? [] };
    else if (access.phase === 'noCredentials')
      state = { phase: 'noConnection', reason: access.reason, message: access.message };
    else if (!access.reachability.reachable)
      state = {
        phase: 'noConnection',
        reason: 'Unreachable',
        message: access.reachability.message,
      };
    else {
      if (!running && connection && probeClient && fingerprint) {
        ctx.logger.info({ hostNamespace, vclusterName }, 'starting the syncer');
        running = supervisor.start({
          key,
          fingerprint,
          client: probeClient,
          hostNamespace,
          vclusterName,
          config: validated.config,
          logger: ctx.logger.child({ vcluster: `${hostNamespace}/${vclusterName}` }),
          onStatusChange: () => deps.enqueue(key),
        });
      }
      state = running ? { phase: 'running', status: running.syncer.status() } : { phase: 'notConfigured' };
    }
    // A probe client the syncer did not take over is closed.
    if (probeClient && probeClient !== supervisor.get(key)?.client) probeClient.close();

    await writeConditions(vci, access, state);
    if (access.phase === 'noCredentials' && !spec.credentialsSecretRef) return undefined;
    return { requeueAfter: reachable ? RECHECK_MS : RETRY_CONNECTION_MS };
  };
}
