import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { type Condition, removeCondition, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileContext, ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, isNotFound } from '../../runtime/errors.ts';
import { type KubeApi, KubeClient, objectPath } from '../../runtime/kube-client.ts';
import type { RuntimeMetrics } from '../../runtime/metrics.ts';
import type { Store } from '../../runtime/store.ts';
import { validateSyncConfig } from '../../sync/config.ts';
import { type Syncer, type SyncerOptions, startSyncer } from '../../sync/controllers/syncer.ts';
import { resources, type Stored } from '../resources.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
  kubeConfigOptions,
  placementOf,
  SYNCING_CONDITION,
  type SyncerState,
  syncerFingerprint,
  syncingCondition,
} from './desired.ts';

/** How long to wait before looking again at missing credentials or an unreachable cluster. */
export const RETRY_CONNECTION_MS = 10_000;
/** Credentials are read on every reconcile; this makes a rotation effective within a minute. */
export const RECHECK_MS = 60_000;

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

/** The default syncer factory: the host is `host`, metrics go to the operator's registry. */
export function syncerFactory(options: {
  host: KubeApi;
  registry?: Registry;
  runtimeMetrics?: RuntimeMetrics;
  clock: Clock;
}): (input: SyncerFactoryInput) => Syncer {
  return (input) =>
    startSyncer({
      virtual: input.virtual,
      host: options.host,
      hostNamespace: input.hostNamespace,
      name: input.vclusterName,
      config: input.config,
      logger: input.logger,
      clock: options.clock,
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.runtimeMetrics ? { runtimeMetrics: options.runtimeMetrics } : {}),
      controllerPrefix: `syncer:${input.key}:`,
      onStatusChange: input.onStatusChange,
    });
}

/**
 * Runs one syncer per VirtualClusterInstance that has `spec.credentialsSecretRef` and
 * `spec.config`, restarts it when anything it was started from changes (configuration,
 * credentials, endpoint, placement), stops it when the instance goes, and reports how it does in
 * the `Syncing` condition. Nothing is written to the virtual cluster or the host here; that is
 * the syncer's job. Credentials are read with a GET on every reconcile (no cache of all Secrets)
 * and never logged; only a digest of them is kept.
 */
export function virtualClusterReconciler(deps: VirtualClusterReconcilerDeps) {
  const { api, instances, supervisor } = deps;

  async function readSecretData(namespace: string, name: string): Promise<Record<string, string> | null> {
    try {
      const secret = await api.request<{ data?: Record<string, string> }>({
        method: 'GET',
        path: objectPath(resources.secrets, namespace, name),
      });
      return secret.data ?? {};
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async function writeCondition(vci: Stored<VirtualClusterInstance>, state: SyncerState): Promise<void> {
    const condition = syncingCondition(state, vci.metadata.generation);
    const current = (vci.status?.conditions ?? []) as Condition[];
    if (condition === null && !current.some((c) => c.type === SYNCING_CONDITION)) return;
    const conditions =
      condition === null
        ? removeCondition(current, SYNCING_CONDITION)
        : setCondition(current, condition, new Date(deps.clock.now()));
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
    if (!spec.credentialsSecretRef || spec.config === undefined) {
      await supervisor.stop(key);
      await writeCondition(vci, { phase: 'notConfigured' });
      return undefined;
    }
    const { config, errors } = validateSyncConfig(spec.config);
    if (config === null) {
      // Admission rejects such configurations; this covers objects written without it.
      await supervisor.stop(key);
      await writeCondition(vci, { phase: 'invalidConfig', errors });
      return undefined;
    }
    const namespace = vci.metadata.namespace ?? '';
    const secretName = spec.credentialsSecretRef.name;
    let connection: Connection;
    try {
      connection = connectionFor(vci, secretName, await readSecretData(namespace, secretName));
    } catch (err) {
      if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
      await supervisor.stop(key);
      await writeCondition(vci, { phase: 'noConnection', reason: err.name, message: err.message });
      return { requeueAfter: RETRY_CONNECTION_MS };
    }
    const { hostNamespace, vclusterName } = placementOf(vci);
    const fingerprint = syncerFingerprint({ connection, config: spec.config, hostNamespace, vclusterName });

    let running = supervisor.get(key);
    if (running?.fingerprint !== fingerprint) {
      await supervisor.stop(key);
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromOptions(kubeConfigOptions(connection));
      const client = new KubeClient(kubeConfig);
      try {
        await client.request({ method: 'GET', path: '/version', timeoutMs: deps.probeTimeoutMs ?? 5_000 });
      } catch (err) {
        client.close();
        const reason = errorReason(err);
        await writeCondition(vci, {
          phase: 'noConnection',
          reason: 'Unreachable',
          message: `cannot reach the virtual cluster at ${connection.server}: ${reason}${
            err instanceof Error && reason !== err.message ? ` (${err.message})` : ''
          }`,
        });
        return { requeueAfter: RETRY_CONNECTION_MS };
      }
      ctx.logger.info({ hostNamespace, vclusterName }, 'starting the syncer');
      running = supervisor.start({
        key,
        fingerprint,
        client,
        hostNamespace,
        vclusterName,
        config,
        logger: ctx.logger.child({ vcluster: `${hostNamespace}/${vclusterName}` }),
        onStatusChange: () => deps.enqueue(key),
      });
    }
    await writeCondition(vci, { phase: 'running', status: running.syncer.status() });
    return { requeueAfter: RECHECK_MS };
  };
}
