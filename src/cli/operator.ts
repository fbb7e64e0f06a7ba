import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { Command, Option } from 'commander';
import pino from 'pino';
import { Registry } from 'prom-client';
import { CONTROLLER_NAMES, type ControllerName, controllerSetups } from '../controllers/index.ts';
import { systemClock, systemRandom } from '../runtime/clock.ts';
import { EventRecorder } from '../runtime/events.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { Manager } from '../runtime/manager.ts';

export interface OperatorOptions {
  kubeconfig?: string;
  namespace: string;
  /** Watch only this namespace; all namespaces when absent. */
  watchNamespace?: string;
  controllers: string[];
  disableControllers: string[];
  leaderElect: boolean;
  leaseName: string;
  identity: string;
  healthPort: number;
  healthHost: string;
  maxConcurrentReconciles?: number;
  logLevel: string;
}

const list = (value: string) =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** `platform operator`: the controllers (each can be switched off), leader-elected, with health and metrics. */
export function operatorCommand(): Command {
  return new Command('operator')
    .description('Run the platform controllers against a cluster')
    .option('--kubeconfig <file>', 'kubeconfig of the cluster (default: in-cluster config or $KUBECONFIG)')
    .option('--namespace <ns>', 'namespace of the platform (leases, keys, certificates)', 'platform-system')
    .option('--watch-namespace <ns>', 'watch only this namespace (default: all namespaces)')
    .option(
      '--controllers <names>',
      `controllers to run (${CONTROLLER_NAMES.join(', ')})`,
      list,
      CONTROLLER_NAMES,
    )
    .option('--disable-controllers <names>', 'controllers not to run', list, [])
    .option('--no-leader-elect', 'run without leader election (a single replica only)')
    .option('--lease-name <name>', 'name of the leader election Lease', 'platform-operator')
    .option('--identity <id>', 'leader election identity', `${hostname()}-${randomBytes(3).toString('hex')}`)
    .option('--health-port <port>', 'port of /metrics, /healthz and /readyz (0: any free port)', Number, 8081)
    .option('--health-host <host>', 'address of /metrics, /healthz and /readyz', '0.0.0.0')
    .option('--max-concurrent-reconciles <n>', 'workers per controller', Number)
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['debug', 'info', 'warn', 'error'])
        .default('info'),
    )
    .action(async (options: OperatorOptions) => {
      const manager = createOperator(options);
      manager.handleSignals(() => process.exit(0));
      await manager.start();
    });
}

/** The operator's manager with its controllers registered, not yet started. */
export function createOperator(options: OperatorOptions, logger = operatorLogger(options)): Manager {
  const unknown = [...options.controllers, ...options.disableControllers].filter(
    (name) => !(name in controllerSetups),
  );
  if (unknown.length > 0) throw new Error(`unknown controller(s): ${unknown.join(', ')}`);

  const kubeConfig = new KubeConfig();
  if (options.kubeconfig) kubeConfig.loadFromFile(options.kubeconfig);
  else kubeConfig.loadFromDefault();
  const api = new KubeClient(kubeConfig);
  const manager = new Manager({
    api,
    clock: systemClock,
    random: systemRandom,
    logger,
    registry: new Registry(),
    healthPort: options.healthPort,
    healthHost: options.healthHost,
    ...(options.leaderElect
      ? {
          leaderElection: {
            namespace: options.namespace,
            name: options.leaseName,
            identity: options.identity,
          },
        }
      : {}),
  });
  const events = new EventRecorder({
    api,
    clock: systemClock,
    logger,
    reportingController: 'management.platform/operator',
    reportingInstance: options.identity,
  });
  const enabled = (options.controllers as ControllerName[]).filter(
    (name) => !options.disableControllers.includes(name),
  );
  for (const name of enabled) {
    controllerSetups[name](manager, {
      api,
      clock: systemClock,
      events,
      ...(options.watchNamespace ? { namespace: options.watchNamespace } : {}),
      ...(options.maxConcurrentReconciles
        ? { maxConcurrentReconciles: options.maxConcurrentReconciles }
        : {}),
    });
  }
  logger.info({ controllers: enabled, leaderElection: options.leaderElect }, 'operator configured');
  return manager;
}

function operatorLogger(options: Pick<OperatorOptions, 'logLevel' | 'identity'>) {
  return pino({ level: options.logLevel, base: { component: 'operator', identity: options.identity } });
}

/** The defaults of `platform operator`, for in-process use (tests, `platform dev`). */
export function defaultOperatorOptions(overrides: Partial<OperatorOptions> = {}): OperatorOptions {
  return {
    namespace: 'platform-system',
    controllers: CONTROLLER_NAMES,
    disableControllers: [],
    leaderElect: true,
    leaseName: 'platform-operator',
    identity: `${hostname()}-${randomBytes(3).toString('hex')}`,
    healthPort: 8081,
    healthHost: '0.0.0.0',
    logLevel: 'info',
    ...overrides,
  };
}
