import { Command } from 'commander';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { type Gateway, setupGateway } from '../gateway/index.ts';
import type { GatewayServer } from '../gateway/server.ts';
import { setupLogin } from '../login/setup.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import { Manager } from '../runtime/manager.ts';
import {
  apiClient,
  type CommonOptions,
  componentLogger,
  loadKubeConfig,
  stopOnSignals,
  withCommonOptions,
  withServerOptions,
} from './common.ts';

export interface GatewayOptions extends CommonOptions {
  gatewayHost: string;
  /** 0 picks a free port. */
  gatewayPort: number;
  /** A directory with tls.crt and tls.key: HTTPS; plain HTTP (behind an ingress) when absent. */
  gatewayCertDir?: string;
  /** The external URL of the gateway, the issuer of direct cluster endpoint tokens; default: the URL it listens on. */
  issuerUrl?: string;
  /** CIDRs of proxies in front of the gateway (an ingress), whose `X-Forwarded-For` is believed. */
  trustedProxies?: string[];
}

/** The gateway flags, shared by `platform gateway` and `platform operator`. */
export function withGatewayOptions(command: Command): Command {
  return withServerOptions(command, 'gateway', 'the management gateway', 8443)
    .option(
      '--gateway-cert-dir <dir>',
      'serving certificate of the gateway (tls.crt, tls.key); plain HTTP behind an ingress when absent',
    )
    .option(
      '--issuer-url <url>',
      "the gateway's external URL: issuer of direct cluster endpoint tokens, serving /.well-known/openid-configuration (default: the URL it listens on)",
    )
    .option(
      '--trusted-proxies <cidrs>',
      'comma-separated CIDRs of the proxies in front of the gateway (an ingress): only their X-Forwarded-For is believed',
      (value: string) =>
        value
          .split(',')
          .map((cidr) => cidr.trim())
          .filter(Boolean),
    );
}

export interface RunningGateway {
  gateway: Gateway;
  server: GatewayServer;
  /** The gateway's caches (and /metrics, /healthz, /readyz when it has its own). */
  manager: Manager;
  stop(): Promise<void>;
}

/**
 * The management gateway as the identity of `options.kubeconfig`: the only component that may
 * impersonate (it calls kube-apiserver as each access key's user). With `manager`, its caches
 * join that (already configured, not yet started) manager, which the caller starts and stops, as
 * `platform operator` does; otherwise it gets a manager of its own (no leader election: every
 * replica serves).
 */
export function setupGatewayComponent(
  options: Omit<GatewayOptions, 'healthPort' | 'healthHost' | 'logLevel'> &
    Partial<Pick<GatewayOptions, 'healthPort' | 'healthHost' | 'logLevel'>>,
  logger: Logger,
  shared?: Manager,
): { gateway: Gateway; manager: Manager; start(): Promise<RunningGateway> } {
  const kubeConfig = loadKubeConfig(options.kubeconfig);
  const registry = shared?.registry ?? new Registry();
  const api = apiClient(options, registry, logger, fieldManagers.gateway);
  const manager =
    shared ??
    new Manager({
      api,
      logger,
      registry,
      ...(options.healthPort !== undefined ? { healthPort: options.healthPort } : {}),
      ...(options.healthHost ? { healthHost: options.healthHost } : {}),
    });
  // Signing in (`/auth`): served by the gateway, on its identity.
  const login = setupLogin({
    manager,
    api,
    platformNamespace: options.namespace,
    logger: logger.child({ component: 'login' }),
    ...(options.issuerUrl ? { externalUrl: new URL(options.issuerUrl).origin } : {}),
  });
  const gateway = setupGateway(manager, {
    kubeConfig,
    api,
    endpoints: login.endpoints,
    platformNamespace: options.namespace,
    host: options.gatewayHost,
    port: options.gatewayPort,
    ...(options.gatewayCertDir ? { certDir: options.gatewayCertDir } : {}),
    ...(options.issuerUrl ? { issuer: options.issuerUrl } : {}),
    ...(options.trustedProxies ? { trustedProxies: options.trustedProxies } : {}),
    logger,
  });
  return {
    gateway,
    manager,
    async start() {
      if (!shared) await manager.start();
      const server = await gateway.start();
      return {
        gateway,
        server,
        manager,
        stop: async () => {
          await gateway.stop();
          if (!shared) await manager.stop();
        },
      };
    },
  };
}

/** `platform gateway`: the management gateway alone, as its own identity. */
export function gatewayCommand(): Command {
  return withGatewayOptions(
    withCommonOptions(new Command('gateway').description('Serve the management gateway'), 8081),
  ).action(async (options: GatewayOptions) => {
    stopOnSignals(await setupGatewayComponent(options, componentLogger('gateway', options)).start());
  });
}
