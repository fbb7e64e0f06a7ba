import { Command } from 'commander';
import type { Logger } from 'pino';
import { fieldManagers } from '../runtime/field-managers.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { Manager } from '../runtime/manager.ts';
import type { WebhookEndpoint } from '../webhooks/configurations.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../webhooks/index.ts';
import {
  type CommonOptions,
  componentLogger,
  loadKubeConfig,
  stopOnSignals,
  withCommonOptions,
  withServerOptions,
} from './common.ts';

export interface WebhookOptions extends CommonOptions {
  webhookHost: string;
  webhookPort: number;
  /** `local` (https://127.0.0.1:<port>), `service:<namespace>/<name>` or an https URL. */
  webhookEndpoint: string;
  /** A directory with tls.crt, tls.key and ca.crt (cert-manager); self-managed certificates when absent. */
  webhookCertDir?: string;
}

/** The webhook flags, shared by `platform webhook` and `platform operator`. */
export function withWebhookOptions(command: Command): Command {
  return withServerOptions(command, 'webhook', 'the admission webhook server', 9443)
    .option(
      '--webhook-endpoint <endpoint>',
      'how the apiserver reaches us: local, service:<ns>/<name> or an https URL',
      'local',
    )
    .option(
      '--webhook-cert-dir <dir>',
      'mounted serving certificate (tls.crt, tls.key, ca.crt); default: self-managed',
    );
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

export interface RunningWebhook {
  webhooks: AdmissionWebhooks;
  /** Serves /metrics, /healthz and /readyz when a health port was given. */
  manager: Manager | undefined;
  /** Stops admitting; the configurations stay registered, so writes fail closed. */
  stop(): Promise<void>;
}

/** Starts the admission webhooks as the identity of `options.kubeconfig` (every replica; no leader). */
export async function startAdmissionComponent(
  options: Omit<WebhookOptions, 'healthPort' | 'healthHost'> &
    Partial<Pick<WebhookOptions, 'healthPort' | 'healthHost'>>,
  logger: Logger = componentLogger('webhook', options),
): Promise<RunningWebhook> {
  const kubeConfig = loadKubeConfig(options.kubeconfig);
  // With a health port, one Manager serves /metrics, /healthz and /readyz and runs the certificate
  // rotation; without, the webhooks run a Manager of their own.
  const manager =
    options.healthPort === undefined
      ? undefined
      : new Manager({
          api: new KubeClient(kubeConfig, { fieldManager: fieldManagers.admission }),
          logger,
          healthPort: options.healthPort,
          ...(options.healthHost ? { healthHost: options.healthHost } : {}),
        });
  await manager?.start();
  const webhooks = await startAdmissionWebhooks({
    kubeConfig,
    host: options.webhookHost,
    port: options.webhookPort,
    platformNamespace: options.namespace,
    endpoint: parseWebhookEndpoint(options.webhookEndpoint),
    certificates: options.webhookCertDir
      ? { mode: 'mounted', directory: options.webhookCertDir }
      : { mode: 'self-managed' },
    ...(manager ? { manager } : {}),
    logger,
  }).catch(async (err: unknown) => {
    await manager?.stop();
    throw err;
  });
  logger.info({ port: webhooks.server.port }, 'admission webhooks serving');
  return {
    webhooks,
    manager,
    stop: async () => {
      await webhooks.stop();
      await manager?.stop();
    },
  };
}

/** `platform webhook`: the admission webhooks alone, as their own identity. */
export function webhookCommand(): Command {
  return withWebhookOptions(
    withCommonOptions(new Command('webhook').description('Serve the admission webhooks'), 8081),
  ).action(async (options: WebhookOptions) => {
    stopOnSignals(await startAdmissionComponent(options));
  });
}
