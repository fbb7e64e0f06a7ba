import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import pino, { type Logger } from 'pino';
import { Registry } from 'prom-client';
import { CONTROLLER_NAMES, type ControllerName, controllerSetups } from '../controllers/index.ts';
import { type Gateway, setupGateway } from '../gateway/index.ts';
import type { GatewayServer } from '../gateway/server.ts';
import { systemClock, systemRandom } from '../runtime/clock.ts';
import { EventRecorder } from '../runtime/events.ts';
import { DEFAULT_BURST, DEFAULT_QPS, DEFAULT_TIMEOUT_MS, KubeClient } from '../runtime/kube-client.ts';
import { Manager } from '../runtime/manager.ts';
import { RestClientMetrics } from '../runtime/rest-client-metrics.ts';
import type { WebhookEndpoint } from '../webhooks/configurations.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../webhooks/index.ts';

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
  /** Leader election timings in ms (`--lease-duration`, `--renew-deadline`, `--retry-period`); 15 s, 10 s, 2 s when absent. */
  leaseDuration?: number;
  renewDeadline?: number;
  retryPeriod?: number;
  healthPort: number;
  healthHost: string;
  maxConcurrentReconciles?: number;
  logLevel: string;
  /** Serve the admission webhooks (every replica, no leader needed). */
  webhooks: boolean;
  webhookHost: string;
  webhookPort: number;
  /** `local` (https://127.0.0.1:<port>), `service:<namespace>/<name>` or an https URL. */
  webhookEndpoint: string;
  /** A directory with tls.crt, tls.key and ca.crt (cert-manager); self-managed certificates when absent. */
  webhookCertDir?: string;
  /** Serve the management gateway (every replica, no leader needed). */
  gateway?: boolean;
  gatewayHost?: string;
  /** 0 picks a free port. */
  gatewayPort?: number;
  /** A directory with tls.crt and tls.key: HTTPS; plain HTTP (behind an ingress) when absent. */
  gatewayCertDir?: string;
  /** The external URL of the gateway, the issuer of direct cluster endpoint tokens; default: the URL it listens on. */
  issuerUrl?: string;
  /** Client-side rate limit of every client of the apiserver (`--kube-api-qps`, `--kube-api-burst`); <= 0: none. */
  kubeApiQps?: number;
  kubeApiBurst?: number;
  /** Timeout of every apiserver request but watches (`--kube-api-timeout`), in ms. */
  kubeApiTimeout?: number;
}

/** `15s`, `500ms`, `1m` or a plain number of seconds, as milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!match) throw new InvalidArgumentError(`not a duration: ${JSON.stringify(text)} (e.g. 15s, 500ms)`);
  const unit = match[2] ?? 's';
  return Math.round(Number(match[1]) * (unit === 'ms' ? 1 : unit === 'm' ? 60_000 : 1000));
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
    .option('--health-port <port>', 'port of /metrics, /healthz and /readyz (0: any free port)', Number, 8081)
    .option('--health-host <host>', 'address of /metrics, /healthz and /readyz', '0.0.0.0')
    .option('--max-concurrent-reconciles <n>', 'workers per controller', Number)
    .option(
      '--kube-api-qps <n>',
      `client-side limit of requests per second to the apiserver, per client (<= 0: none; ${DEFAULT_QPS})`,
      Number,
    )
    .option('--kube-api-burst <n>', `requests allowed at once above the qps (${DEFAULT_BURST})`, Number)
    .option(
      '--kube-api-timeout <duration>',
      `timeout of every apiserver request but watches (${DEFAULT_TIMEOUT_MS / 1000}s)`,
      parseDuration,
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['debug', 'info', 'warn', 'error'])
        .default('info'),
    )
    .option('--no-webhooks', 'do not serve the admission webhooks')
    .option('--webhook-host <host>', 'address of the admission webhook server', '0.0.0.0')
    .option('--webhook-port <port>', 'port of the admission webhook server (0: any free port)', Number, 9443)
    .option(
      '--webhook-endpoint <endpoint>',
      'how the apiserver reaches us: local, service:<ns>/<name> or an https URL',
      'local',
    )
    .option(
      '--webhook-cert-dir <dir>',
      'mounted serving certificate (tls.crt, tls.key, ca.crt); default: self-managed',
    )
    .option('--no-gateway', 'do not serve the management gateway')
    .option('--gateway-host <host>', 'address of the management gateway', '0.0.0.0')
    .option('--gateway-port <port>', 'port of the management gateway (0: any free port)', Number, 8443)
    .option(
      '--gateway-cert-dir <dir>',
      'serving certificate of the gateway (tls.crt, tls.key); plain HTTP behind an ingress when absent',
    )
    .option(
      '--issuer-url <url>',
      "the gateway's external URL: issuer of direct cluster endpoint tokens, serving /.well-known/openid-configuration (default: the URL it listens on)",
    )
    .action(async (options: OperatorOptions) => {
      const operator = await startOperator(options);
      for (const signal of ['SIGTERM', 'SIGINT'] as const)
        process.once(signal, () => void operator.stop().finally(() => process.exit(0)));
    });
}

/** The operator's manager with its controllers registered, not yet started. */
export function createOperator(options: OperatorOptions, logger = operatorLogger(options)): Manager {
  const unknown = [...options.controllers, ...options.disableControllers].filter(
    (name) => !(name in controllerSetups),
  );
  if (unknown.length > 0) throw new Error(`unknown controller(s): ${unknown.join(', ')}`);

  const kubeConfig = loadKubeConfig(options.kubeconfig);
  const registry = new Registry();
  const api = apiClient(options, kubeConfig, registry, logger);
  const manager = new Manager({
    api,
    clock: systemClock,
    random: systemRandom,
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
  const writer = manager.leaderApi(api);
  const events = new EventRecorder({
    api: writer,
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
      api: writer,
      clock: systemClock,
      events,
      kubeConfig,
      platformNamespace: options.namespace,
      ...(options.watchNamespace ? { namespace: options.watchNamespace } : {}),
      ...(options.maxConcurrentReconciles
        ? { maxConcurrentReconciles: options.maxConcurrentReconciles }
        : {}),
    });
  }
  logger.info({ controllers: enabled, leaderElection: options.leaderElect }, 'operator configured');
  return manager;
}

export interface RunningOperator {
  manager: Manager;
  webhooks: AdmissionWebhooks | undefined;
  /** The management gateway and its server, when served. */
  gateway?: { gateway: Gateway; server: GatewayServer } | undefined;
  /** Graceful: stop admitting (configurations stay, so writes fail closed), drain, release the lease. */
  stop(): Promise<void>;
}

/** Starts the controllers and, unless switched off, the admission webhooks. */
export async function startOperator(
  options: OperatorOptions,
  logger = operatorLogger(options),
): Promise<RunningOperator> {
  // Webhooks first: after a restart the registered configurations may point at our old port, and
  // the controllers' own writes to our kinds go through admission.
  let webhooks: AdmissionWebhooks | undefined;
  if (options.webhooks) {
    const kubeConfig = loadKubeConfig(options.kubeconfig);
    webhooks = await startAdmissionWebhooks({
      kubeConfig,
      host: options.webhookHost,
      port: options.webhookPort,
      platformNamespace: options.namespace,
      endpoint: parseWebhookEndpoint(options.webhookEndpoint),
      certificates: options.webhookCertDir
        ? { mode: 'mounted', directory: options.webhookCertDir }
        : { mode: 'self-managed' },
      logger: logger.child({ component: 'webhooks' }),
    });
    logger.info({ port: webhooks.server.port }, 'admission webhooks serving');
  }
  const manager = createOperator(options, logger);
  const gateway = options.gateway
    ? (() => {
        const kubeConfig = loadKubeConfig(options.kubeconfig);
        return setupGateway(manager, {
          kubeConfig,
          api: apiClient(options, kubeConfig, manager.registry, logger),
          platformNamespace: options.namespace,
          host: options.gatewayHost ?? '0.0.0.0',
          port: options.gatewayPort ?? 8443,
          ...(options.gatewayCertDir ? { certDir: options.gatewayCertDir } : {}),
          ...(options.issuerUrl ? { issuer: options.issuerUrl } : {}),
          logger: logger.child({ component: 'gateway' }),
        });
      })()
    : undefined;
  await manager.start();
  const gatewayServer = await gateway?.start();
  return {
    manager,
    webhooks,
    ...(gateway && gatewayServer ? { gateway: { gateway, server: gatewayServer } } : {}),
    stop: async () => {
      await gateway?.stop();
      await webhooks?.stop();
      await manager.stop();
    },
  };
}

/**
 * A client of the operator's apiserver: rate limit and timeout from the flags, `rest_client_*`
 * metrics on the operator's registry, the kubeconfig read again as credentials rotate.
 */
function apiClient(
  options: OperatorOptions,
  kubeConfig: KubeConfig,
  registry: Registry,
  logger: Logger,
): KubeClient {
  return new KubeClient(kubeConfig, {
    ...(options.kubeApiQps !== undefined ? { qps: options.kubeApiQps } : {}),
    ...(options.kubeApiBurst !== undefined ? { burst: options.kubeApiBurst } : {}),
    ...(options.kubeApiTimeout !== undefined ? { timeoutMs: options.kubeApiTimeout } : {}),
    metrics: RestClientMetrics.for(registry),
    reload: () => loadKubeConfig(options.kubeconfig),
    onCredentialsError: (err) =>
      logger.warn({ err }, 'reading the credentials again failed; keeping the last ones'),
  });
}

export function parseWebhookEndpoint(text: string): WebhookEndpoint | 'local' {
  if (text === 'local') return 'local';
  const service = /^service:([a-z0-9-]+)\/([a-z0-9-]+)$/.exec(text);
  if (service) return { service: { namespace: service[1]!, name: service[2]! } };
  if (text.startsWith('https://')) return { url: text };
  throw new Error(
    `--webhook-endpoint must be local, service:<namespace>/<name> or an https URL, not ${JSON.stringify(text)}`,
  );
}

function loadKubeConfig(path: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (path) kubeConfig.loadFromFile(path);
  else kubeConfig.loadFromDefault();
  return kubeConfig;
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
