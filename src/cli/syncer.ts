import { readFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { Command, Option } from 'commander';
import pino, { type Logger } from 'pino';
import { Registry } from 'prom-client';
import { fieldManagers } from '../runtime/field-managers.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { Manager } from '../runtime/manager.ts';
import { RestClientMetrics } from '../runtime/rest-client-metrics.ts';
import { loadSyncConfig } from '../sync/config.ts';
import { type Syncer, startSyncer } from '../sync/controllers/syncer.ts';

export interface SyncerCommandOptions {
  virtualKubeconfig: string;
  /** Default: in-cluster config or $KUBECONFIG. */
  hostKubeconfig?: string;
  hostNamespace: string;
  name: string;
  config: string;
  healthPort: number;
  healthHost: string;
  maxConcurrentReconciles: number;
  logLevel: string;
}

export interface RunningSyncer {
  syncer: Syncer;
  /** The syncer's own manager (the host is its cluster; no leader election). */
  manager: Manager;
  stop(): Promise<void>;
}

/**
 * `platform syncer`: one virtual cluster's syncer on its own, between two kubeconfigs. The
 * operator runs the same syncer for each VirtualClusterInstance; this is for running it beside
 * the virtual cluster instead (or for trying a configuration).
 */
export function syncerCommand(): Command {
  return new Command('syncer')
    .description('Sync a virtual cluster into its host namespace (Services, Endpoints, Secrets, ConfigMaps)')
    .requiredOption('--virtual-kubeconfig <file>', 'kubeconfig of the virtual cluster')
    .option(
      '--host-kubeconfig <file>',
      'kubeconfig of the host cluster (default: in-cluster config or $KUBECONFIG)',
    )
    .requiredOption('--host-namespace <ns>', 'host namespace the virtual cluster runs in')
    .requiredOption('--name <name>', "the virtual cluster's name (suffix of host names, managed-by marker)")
    .requiredOption('--config <file>', 'the virtual cluster configuration (YAML; sync.toHost.*)')
    .option('--health-port <port>', 'port of /metrics, /healthz and /readyz (0: any free port)', Number, 8082)
    .option('--health-host <host>', 'address of /metrics, /healthz and /readyz', '0.0.0.0')
    .option('--max-concurrent-reconciles <n>', 'workers per synced kind', Number, 4)
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['debug', 'info', 'warn', 'error'])
        .default('info'),
    )
    .action(async (options: SyncerCommandOptions) => {
      const running = await runSyncer(options);
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => void running.stop().finally(() => process.exit(0)));
      }
    });
}

function loadKubeConfig(path: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (path) kubeConfig.loadFromFile(path);
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}

/** Starts the syncer and its health server; the configuration is checked before anything runs. */
export async function runSyncer(
  options: SyncerCommandOptions,
  logger: Logger = pino({ level: options.logLevel, base: { component: 'syncer', vcluster: options.name } }),
): Promise<RunningSyncer> {
  const config = loadSyncConfig(await readFile(options.config, 'utf8'));
  const registry = new Registry();
  // Both kubeconfigs are read again as their credentials rotate; requests show in rest_client_*.
  const client = (path: string | undefined) =>
    new KubeClient(loadKubeConfig(path), {
      fieldManager: fieldManagers.syncer,
      metrics: RestClientMetrics.for(registry),
      reload: () => loadKubeConfig(path),
      onCredentialsError: (err) =>
        logger.warn({ err }, 'reading the credentials again failed; keeping the last ones'),
    });
  const virtual = client(options.virtualKubeconfig);
  const host = client(options.hostKubeconfig);
  const manager = new Manager({
    api: host,
    logger,
    registry,
    healthPort: options.healthPort,
    healthHost: options.healthHost,
  });
  const syncer = startSyncer({
    manager,
    virtual,
    host,
    hostNamespace: options.hostNamespace,
    name: options.name,
    config,
    logger,
    readiness: true,
    maxConcurrentReconciles: options.maxConcurrentReconciles,
  });
  try {
    await manager.start();
  } catch (err) {
    await syncer.stop();
    await manager.stop();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    syncer,
    manager,
    stop() {
      stopping ??= (async () => {
        await syncer.stop();
        await manager.stop();
        virtual.close();
        host.close();
      })();
      return stopping;
    },
  };
}
