import { KubeConfig } from '@kubernetes/client-node';
import { type Command, InvalidArgumentError, Option } from 'commander';
import pino, { type Logger } from 'pino';

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

export interface CommonOptions {
  kubeconfig?: string;
  /** The platform namespace (leases, keys, certificates, the configuration). */
  namespace: string;
  healthPort: number;
  healthHost: string;
  logLevel: string;
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
