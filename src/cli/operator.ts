import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Command } from 'commander';
import type { Logger } from 'pino';
import { CONTROLLER_NAMES } from '../controllers/index.ts';
import type { Gateway } from '../gateway/index.ts';
import type { GatewayServer } from '../gateway/server.ts';
import type { Manager } from '../runtime/manager.ts';
import type { AdmissionWebhooks } from '../webhooks/index.ts';
import { componentLogger, stopOnSignals, withCommonOptions } from './common.ts';
import {
  type ControllerOptions,
  createControllerManager,
  DEFAULT_LEASE_NAME,
  withControllerOptions,
} from './controller.ts';
import { type GatewayOptions, setupGatewayComponent, withGatewayOptions } from './gateway.ts';
import { startAdmissionComponent, type WebhookOptions, withWebhookOptions } from './webhook.ts';

export { parseDuration } from './common.ts';
export { parseWebhookEndpoint } from './webhook.ts';

/**
 * `platform operator`: every component in one process, as one identity (small installs, local
 * use): the controllers (leader-elected), the admission webhooks and the management gateway,
 * each switchable. That identity needs what all of them need together; the chart runs each as
 * its own Deployment and ServiceAccount instead (`platform controller`, `platform webhook`,
 * `platform gateway`), so that no component holds another's permissions.
 */
export interface OperatorOptions
  extends ControllerOptions,
    Omit<WebhookOptions, keyof ControllerOptions>,
    Partial<Omit<GatewayOptions, keyof ControllerOptions>> {
  /** Serve the admission webhooks (every replica, no leader needed). */
  webhooks: boolean;
  /** Serve the management gateway (every replica, no leader needed). */
  gateway?: boolean;
}

export function operatorCommand(): Command {
  const command = withCommonOptions(
    new Command('operator').description(
      'Run every platform component in one process: controllers, admission webhooks, management gateway',
    ),
    8081,
  );
  withControllerOptions(command).option('--no-webhooks', 'do not serve the admission webhooks');
  withWebhookOptions(command).option('--no-gateway', 'do not serve the management gateway');
  return withGatewayOptions(command).action(async (options: OperatorOptions) => {
    stopOnSignals(await startOperator(options));
  });
}

/** The operator's manager with its controllers registered, not yet started (the controllers alone). */
export function createOperator(options: OperatorOptions, logger: Logger = operatorLogger(options)): Manager {
  return createControllerManager(options, logger);
}

export interface RunningOperator {
  manager: Manager;
  webhooks: AdmissionWebhooks | undefined;
  /** The management gateway and its server, when served. */
  gateway?: { gateway: Gateway; server: GatewayServer } | undefined;
  /** Graceful: stop admitting (configurations stay, so writes fail closed), drain, release the lease. */
  stop(): Promise<void>;
}

/** Starts the admission webhooks (unless switched off), the controllers and the gateway (unless switched off). */
export async function startOperator(
  options: OperatorOptions,
  logger: Logger = operatorLogger(options),
): Promise<RunningOperator> {
  // Webhooks first: after a restart the registered configurations may point at our old port, and
  // the controllers' own writes to our kinds go through admission.
  const admission = options.webhooks
    ? await startAdmissionComponent(
        {
          ...options,
          // The operator's manager serves /metrics, /healthz and /readyz for every component.
          healthPort: undefined,
        },
        logger.child({ component: 'webhooks' }),
      )
    : undefined;
  const manager = createOperator(options, logger);
  // The gateway's caches join the controllers' manager (one process, one identity, one cache).
  const gateway = options.gateway
    ? setupGatewayComponent(
        {
          ...options,
          gatewayHost: options.gatewayHost ?? '0.0.0.0',
          gatewayPort: options.gatewayPort ?? 8443,
        },
        logger.child({ component: 'gateway' }),
        manager,
      )
    : undefined;
  await manager.start();
  const running = await gateway?.start();
  return {
    manager,
    webhooks: admission?.webhooks,
    ...(running ? { gateway: { gateway: running.gateway, server: running.server } } : {}),
    stop: async () => {
      await running?.stop();
      await admission?.stop();
      await manager.stop();
    },
  };
}

function operatorLogger(options: Pick<OperatorOptions, 'logLevel' | 'identity'>) {
  return componentLogger('operator', options);
}

/** The defaults of `platform operator`, for in-process use (tests, `platform dev`). */
export function defaultOperatorOptions(overrides: Partial<OperatorOptions> = {}): OperatorOptions {
  return {
    namespace: 'platform-system',
    controllers: CONTROLLER_NAMES,
    disableControllers: [],
    leaderElect: true,
    leaseName: DEFAULT_LEASE_NAME,
    identity: `${hostname()}-${randomBytes(3).toString('hex')}`,
    healthPort: 8081,
    healthHost: '0.0.0.0',
    logLevel: 'info',
    webhooks: true,
    webhookHost: '0.0.0.0',
    webhookPort: 9443,
    webhookEndpoint: 'local',
    gateway: true,
    gatewayHost: '0.0.0.0',
    gatewayPort: 8443,
    ...overrides,
  };
}
