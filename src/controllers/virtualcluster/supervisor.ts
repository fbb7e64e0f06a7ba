import type { Logger } from 'pino';
import type { KubeApi } from '../../runtime/kube-api.ts';
import type { KubeClient } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import { type Syncer, type SyncerOptions, startSyncer } from '../../sync/controllers/syncer.ts';

/** A syncer this replica runs, with what it was started from. */
export interface Running {
  fingerprint: string;
  syncer: Syncer;
  /** The virtual cluster's client (also the reachability probe's). */
  client: KubeClient;
  /** The host client acting as the syncer's own ServiceAccount. */
  hostClient: KubeClient;
}

export interface SyncerFactoryInput {
  key: string;
  virtual: KubeApi;
  /** The host, as the syncer's own ServiceAccount (never the controller's identity). */
  host: KubeApi;
  hostNamespace: string;
  vclusterName: string;
  config: SyncerOptions['config'];
  logger: Logger;
  onStatusChange: () => void;
  /** Called on every change the syncer carries (the instance's activity, for sleep mode). */
  onActivity?: () => void;
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

  start(
    input: Omit<SyncerFactoryInput, 'virtual' | 'host'> & {
      fingerprint: string;
      client: KubeClient;
      hostClient: KubeClient;
    },
  ): Running {
    const syncer = this.create({ ...input, virtual: input.client, host: input.hostClient });
    const entry = {
      fingerprint: input.fingerprint,
      syncer,
      client: input.client,
      hostClient: input.hostClient,
    };
    this.running.set(input.key, entry);
    return entry;
  }

  async stop(key: string): Promise<void> {
    const entry = this.running.get(key);
    if (!entry) return;
    this.running.delete(key);
    await entry.syncer.stop();
    entry.client.close();
    entry.hostClient.close();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.keys().map((key) => this.stop(key)));
  }
}

/** The default syncer factory: the syncers run on the operator's manager, each with its own host client. */
export function syncerFactory(options: { manager: Manager }): (input: SyncerFactoryInput) => Syncer {
  return (input) =>
    startSyncer({
      manager: options.manager,
      virtual: input.virtual,
      host: input.host,
      hostNamespace: input.hostNamespace,
      name: input.vclusterName,
      config: input.config,
      logger: input.logger,
      controllerPrefix: `syncer:${input.key}:`,
      onStatusChange: input.onStatusChange,
      ...(input.onActivity ? { onActivity: input.onActivity } : {}),
    });
}
