import { KubeConfig } from '@kubernetes/client-node';
import { type Command, InvalidArgumentError, Option } from 'commander';
import pino, { type Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { FieldManager } from '../runtime/field-managers.ts';
import { DEFAULT_BURST, DEFAULT_QPS, DEFAULT_TIMEOUT_MS, KubeClient } from '../runtime/kube-client.ts';
import { RestClientMetrics } from '../runtime/rest-client-metrics.ts';

/**
 * What the component commands (`controller`, `webhook`, `gateway`, and `operator`, which runs
 * them together) share: the cluster they talk to, as whom, their namespace, logs and health.
 * Each component is a process of its own in the chart, with a ServiceAccount of its own: the
 * identity of `--kubeconfig` (or the pod's) is the component's.
 */

/** `15s`, `500ms`, `1m` or a plain number of seconds, as milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!match) throw new InvalidArgumentError(`not a duration: ${JSON.stringify(text)} (e.g. 15s, 500ms)`);
  const unit = match[2] ?? 's';
  return Math.round(Number(match[1]) * (unit === 'ms' ? 1 : unit === 'm' ? 60_000 : 1000));
}

export const list = (value: string) =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** The kubeconfig of `path`, or the pod's (in-cluster) or $KUBECONFIG's when absent. */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (path) kubeConfig.loadFromFile(path);
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}

/**
 * A client of the component's apiserver: its writes and User-Agent named `fieldManager`, rate
 * limit and timeout from the flags, `rest_client_*` metrics on the component's registry, the
 * kubeconfig read again as its credentials rotate.
 */
export function apiClient(
  options: Pick<CommonOptions, 'kubeconfig' | 'kubeApiQps' | 'kubeApiBurst' | 'kubeApiTimeout'>,
  registry: Registry,
  logger: Logger,
  fieldManager: FieldManager,
): KubeClient {
  return new KubeClient(loadKubeConfig(options.kubeconfig), {
    fieldManager,
    ...(options.kubeApiQps !== undefined ? { qps: options.kubeApiQps } : {}),
    ...(options.kubeApiBurst !== undefined ? { burst: options.kubeApiBurst } : {}),
    ...(options.kubeApiTimeout !== undefined ? { timeoutMs: options.kubeApiTimeout } : {}),
    metrics: RestClientMetrics.for(registry),
    reload: () => loadKubeConfig(options.kubeconfig),
    onCredentialsError: (err) =>
      logger.warn({ err }, 'reading the credentials again failed; keeping the last ones'),
  });
}

export interface CommonOptions {
  kubeconfig?: string;
  /** The platform namespace (leases, keys, certificates, the configuration). */
  namespace: string;
  healthPort: number;
  healthHost: string;
  logLevel: string;
  /** Client-side rate limit of each client of the apiserver (`--kube-api-qps`, `--kube-api-burst`); <= 0: none. */
  kubeApiQps?: number;
  kubeApiBurst?: number;
  /** Timeout of every apiserver request but watches (`--kube-api-timeout`), in ms. */
  kubeApiTimeout?: number;
}

/** `--kubeconfig`, `--namespace`, `--health-port`, `--health-host`, `--log-level`. */
export function withCommonOptions(command: Command, defaultHealthPort: number): Command {
  return command
    .option('--kubeconfig <file>', 'kubeconfig of the cluster (default: in-cluster config or $KUBECONFIG)')
    .option('--namespace <ns>', 'namespace of the platform (leases, keys, certificates)', 'platform-system')
    .option(
      '--health-port <port>',
      'port of /metrics, /healthz and /readyz (0: any free port)',
      Number,
      defaultHealthPort,
    )
    .option('--health-host <host>', 'address of /metrics, /healthz and /readyz', '0.0.0.0')
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
    );
}

export function componentLogger(component: string, options: { logLevel: string; identity?: string }): Logger {
  return pino({
    level: options.logLevel,
    base: { component, ...(options.identity ? { identity: options.identity } : {}) },
  });
}

/** Runs a started component until SIGTERM or SIGINT, then stops it gracefully and exits. */
export function stopOnSignals(component: { stop(): Promise<void> }): void {
  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    process.once(signal, () => void component.stop().finally(() => process.exit(0)));
}

/** `--<prefix>-host` and `--<prefix>-port` of a component's server (0: any free port). */
export function withServerOptions(command: Command, prefix: string, what: string, port: number): Command {
  return command
    .option(`--${prefix}-host <host>`, `address of ${what}`, '0.0.0.0')
    .option(`--${prefix}-port <port>`, `port of ${what} (0: any free port)`, Number, port);
}
