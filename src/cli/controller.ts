import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Command } from 'commander';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { CONTROLLER_NAMES, type ControllerName, controllerSetups } from '../controllers/index.ts';
import { loginIdentityProviders } from '../login/identity-refresh.ts';
import { EventRecorder } from '../runtime/events.ts';
import { asFieldManager, fieldManagers } from '../runtime/field-managers.ts';
import { Manager } from '../runtime/manager.ts';
import {
  apiClient,
  type CommonOptions,
  componentLogger,
  list,
  loadKubeConfig,
  parseDuration,
  stopOnSignals,
  withCommonOptions,
} from './common.ts';
import { createProvisioner, type ProvisionerOptions, withProvisionerOptions } from './provisioner.ts';

export interface ControllerOptions extends CommonOptions, ProvisionerOptions {
  /** Watch only this namespace; all namespaces when absent. */
  watchNamespace?: string;
  controllers: string[];
  disableControllers: string[];
  leaderElect: boolean;
  leaseName: string;
  identity: string;
  /** Leader election timings in ms (`--lease-duration`, `--renew-deadline`, `--retry-period`); 15 s, 10 s, 2 s when absent. */
  leaseDuration?: number;
  renewDeadline?: number;
  retryPeriod?: number;
  maxConcurrentReconciles?: number;
}

/** The lease the controllers are elected on (one leader whether they run alone or in `platform operator`). */
export const DEFAULT_LEASE_NAME = 'platform-operator';

/** The controller flags, shared by `platform controller` and `platform operator`. */
export function withControllerOptions(command: Command): Command {
  return withProvisionerOptions(command)
    .option('--watch-namespace <ns>', 'watch only this namespace (default: all namespaces)')
    .option(
      '--controllers <names>',
      `controllers to run (${CONTROLLER_NAMES.join(', ')})`,
      list,
      CONTROLLER_NAMES,
    )
    .option('--disable-controllers <names>', 'controllers not to run', list, [])
    .option('--no-leader-elect', 'run without leader election (a single replica only)')
    .option('--lease-name <name>', 'name of the leader election Lease', DEFAULT_LEASE_NAME)
    .option('--identity <id>', 'leader election identity', `${hostname()}-${randomBytes(3).toString('hex')}`)
    .option(
      '--lease-duration <duration>',
      'how long an unrenewed lease blocks other candidates (15s)',
      parseDuration,
    )
    .option(
      '--renew-deadline <duration>',
      'a leader that could not renew for this long stops leading (10s)',
      parseDuration,
    )
    .option('--retry-period <duration>', 'time between lease renewals and attempts (2s)', parseDuration)
    .option('--max-concurrent-reconciles <n>', 'workers per controller', Number);
}

/**
 * `platform controller`: the controllers alone (leader-elected), as their own identity. They
 * write the platform's children (Roles, RoleBindings, namespaces, statuses, Secret sync) and run
 * the virtual clusters' syncers, each of which acts as its own ServiceAccount.
 */
export function controllerCommand(): Command {
  return withControllerOptions(
    withCommonOptions(
      new Command('controller').description('Run the platform controllers (leader-elected)'),
      8081,
    ),
  ).action(async (options: ControllerOptions) => {
    const manager = createControllerManager(options);
    await manager.start();
    stopOnSignals(manager);
  });
}

/** The controllers' manager with its controllers registered, not yet started. */
export function createControllerManager(
  options: ControllerOptions,
  logger: Logger = componentLogger('controller', options),
): Manager {
  const unknown = [...options.controllers, ...options.disableControllers].filter(
    (name) => !Object.hasOwn(controllerSetups, name),
  );
  if (unknown.length > 0) throw new Error(`unknown controller(s): ${unknown.join(', ')}`);

  const kubeConfig = loadKubeConfig(options.kubeconfig);
  const registry = new Registry();
  const api = apiClient(options, registry, logger, fieldManagers.controller);
  const manager = new Manager({
    api,
    logger,
    registry,
    healthPort: options.healthPort,
    healthHost: options.healthHost,
    ...(options.leaderElect
      ? {
          leaderElection: {
            namespace: options.namespace,
            name: options.leaseName,
            identity: options.identity,
            ...(options.leaseDuration !== undefined ? { leaseDurationMs: options.leaseDuration } : {}),
            ...(options.renewDeadline !== undefined ? { renewDeadlineMs: options.renewDeadline } : {}),
            ...(options.retryPeriod !== undefined ? { retryPeriodMs: options.retryPeriod } : {}),
          },
        }
      : {}),
  });
  // Controllers, their Events and the syncers they run write through the leader fence: nothing
  // is sent, and nothing in flight completes, once this replica stopped leading.
  const writer = asFieldManager(manager.leaderApi(api), fieldManagers.controller);
  const events = new EventRecorder({
    api: writer,
    clock: manager.clock,
    logger,
    reportingController: 'management.platform/operator',
    reportingInstance: options.identity,
  });
  const enabled = (options.controllers as ControllerName[]).filter(
    (name) => !options.disableControllers.includes(name),
  );
  // Unfenced by leadership: with shared virtual clusters the replica holding an instance (leader
  // or not) provisions it, and only inside that instance's reconcile.
  const provisioner = enabled.includes('virtualcluster')
    ? createProvisioner(options, asFieldManager(api, fieldManagers.virtualCluster), logger)
    : undefined;
  if (provisioner?.close) {
    // The control planes this process runs end after the controllers (their state stays).
    const close = provisioner.close.bind(provisioner);
    const stopManager = manager.stop.bind(manager);
    manager.stop = async () => {
      await stopManager();
      await close();
    };
  }
  for (const name of enabled) {
    controllerSetups[name](manager, {
      api: writer,
      clock: manager.clock,
      events,
      kubeConfig,
      identityProviders: loginIdentityProviders(),
      ...(provisioner ? { provisioner } : {}),
      platformNamespace: options.namespace,
      ...(options.watchNamespace ? { namespace: options.watchNamespace } : {}),
      ...(options.maxConcurrentReconciles
        ? { maxConcurrentReconciles: options.maxConcurrentReconciles }
        : {}),
    });
  }
  logger.info(
    { controllers: enabled, leaderElection: options.leaderElect, provisioner: options.provisioner ?? 'none' },
    'controllers configured',
  );
  return manager;
}
