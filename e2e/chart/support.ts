import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { stringify } from 'yaml';
import { createControllerManager } from '../../src/cli/controller.ts';
import { type RunningGateway, setupGatewayComponent } from '../../src/cli/gateway.ts';
import { defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { ProvisionerOptions } from '../../src/cli/provisioner.ts';
import { startAdmissionComponent } from '../../src/cli/webhook.ts';
import type { ControllerName } from '../../src/controllers/index.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { type CommandResult, kubectl } from '../support/cluster.ts';
import { CHART_DIR, type Manifest, renderChart } from '../support/helm.ts';
import { Http } from './rbac-support.ts';

export const RELEASE = 'platform';
export const NAMESPACE = 'platform-system';

/** Values that turn every optional part of the chart on. */
export const FULL_VALUES = {
  image: { tag: 'test', pullPolicy: 'Always' },
  gateway: {
    replicas: 3,
    tls: {
      mode: 'cert-manager',
      certManager: { issuerRef: { name: 'letsencrypt', kind: 'ClusterIssuer' } },
    },
    ingress: { enabled: true, className: 'nginx', host: 'platform.example.test' },
  },
  audit: { enabled: true, volume: { persistentVolumeClaim: { claimName: 'platform-audit' } } },
  metrics: { serviceMonitor: { enabled: true, labels: { release: 'prometheus' } } },
  podDisruptionBudget: { enabled: true, minAvailable: 2 },
  networkPolicy: {
    enabled: true,
    metricsFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
    egress: [{ ports: [{ port: 443, protocol: 'TCP' }] }],
  },
  // The configuration Secret exists already (managed outside the chart).
  config: { create: false },
  controller: {
    replicas: 3,
    disableControllers: ['virtualcluster'],
    maxConcurrentReconciles: 4,
    logLevel: 'debug',
  },
  webhook: { replicas: 3, certificates: { mode: 'cert-manager' } },
};

/** The chart's CRD files (its `crds/` folder), by file name. */
export function chartCrdFiles(): Map<string, string> {
  const dir = join(CHART_DIR, 'crds');
  return new Map(
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => [f, readFileSync(join(dir, f), 'utf8')]),
  );
}

/** kubectl on another cluster; throws with its stderr when it fails. */
export async function kubectlOk(kubeconfig: string, args: string[], stdin?: string): Promise<CommandResult> {
  const result = await kubectl(args, { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${result.stderr}`);
  return result;
}

/** Installs the chart's CRDs (server-side apply, as `helm install` creates them) and waits until they are served. */
export async function installChartCrds(kubeconfig: string): Promise<void> {
  await kubectlOk(
    kubeconfig,
    ['apply', '--server-side', '--field-manager=helm', '-f', join(CHART_DIR, 'crds')],
    undefined,
  );
  await kubectlOk(kubeconfig, [
    'wait',
    '--for=condition=Established',
    'crd',
    '-l',
    'app.kubernetes.io/part-of=platform',
    '--timeout=60s',
  ]);
}

/** The platform's components, each a Deployment and a ServiceAccount of its own in the chart. */
export const COMPONENTS = ['controller', 'webhook', 'gateway'] as const;
export type Component = (typeof COMPONENTS)[number];
/** Each component's ServiceAccount (the chart's default names) and the user it authenticates as. */
export const serviceAccountOf = (component: Component) => `${RELEASE}-${component}`;
export const userOf = (component: Component) =>
  `system:serviceaccount:${NAMESPACE}:${serviceAccountOf(component)}`;

const isWebhookConfiguration = (m: Manifest) => m.kind.endsWith('WebhookConfiguration');

/**
 * What `helm install` creates, minus the Deployments (the test clusters have no nodes: the
 * components run in the test process instead, as their ServiceAccounts, and the apiserver calls
 * the webhooks by URL): the CRDs, the platform namespace and every other object of the chart.
 * The webhook configurations come last, from `registerWebhooks()` (once whatever admission would
 * refuse, or needs the webhooks for, is in place).
 */
export async function installChartObjects(
  cluster: Cluster,
  options: { webhookPort: number; values?: Record<string, unknown> },
): Promise<{ rendered: Manifest[]; registerWebhooks(): Promise<void> }> {
  const rendered = await renderChart({
    release: RELEASE,
    namespace: NAMESPACE,
    values: { ...options.values, webhook: { url: `https://127.0.0.1:${options.webhookPort}` } },
  });
  await installChartCrds(cluster.kubeconfigPath);
  await kubectlOk(cluster.kubeconfigPath, ['create', 'namespace', NAMESPACE]);
  const applied = rendered.filter((m) => m.kind !== 'Deployment');
  const apply = (manifests: Manifest[]) =>
    kubectlOk(cluster.kubeconfigPath, ['apply', '-f', '-'], manifests.map((m) => stringify(m)).join('---\n'));
  await apply(applied.filter((m) => !isWebhookConfiguration(m)));
  return { rendered, registerWebhooks: () => apply(applied.filter(isWebhookConfiguration)).then(() => {}) };
}

/** A kubeconfig of `cluster` whose only credential is `token`, written to `path`. */
export function writeTokenKubeconfig(path: string, cluster: Cluster, user: string, token: string): string {
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'host',
          cluster: {
            server: cluster.server,
            'certificate-authority-data': Buffer.from(cluster.caPem).toString('base64'),
          },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: user, context: { cluster: 'host', user } }],
      'current-context': user,
    }),
    { mode: 0o600 },
  );
  return path;
}

/** Each component's ServiceAccount token (TokenRequest, two hours), as a kubeconfig and a raw client. */
export async function componentCredentials(
  admin: Http,
  cluster: Cluster,
  dir: string,
): Promise<{ kubeconfigs: Record<Component, string>; clients: Record<Component, Http> }> {
  const kubeconfigs = {} as Record<Component, string>;
  const clients = {} as Record<Component, Http>;
  for (const component of COMPONENTS) {
    const token = await admin.create(
      `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${serviceAccountOf(component)}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 7200 } },
    );
    clients[component] = new Http(cluster.server, cluster.caPem, token.status.token);
    kubeconfigs[component] = writeTokenKubeconfig(
      join(dir, `${component}.kubeconfig`),
      cluster,
      component,
      token.status.token,
    );
  }
  return { kubeconfigs, clients };
}

export interface RunningComponents {
  gatewayUrl: string | undefined;
  /** What is not ready yet (their /readyz): the controllers' and the gateway's caches not synced. */
  notReady(): string[];
  stop(): Promise<void>;
}

/**
 * The components as the chart runs them, each as its own ServiceAccount (`kubeconfigs`): the
 * webhook always, the controller with `controllers`, the gateway when asked for.
 */
export async function startComponents(options: {
  kubeconfigs: Record<Component, string>;
  webhookPort: number;
  controllers: ControllerName[];
  leaderElect?: boolean;
  leaseName?: string;
  identity?: string;
  gateway?: boolean;
  logger?: Logger;
  /** The controller's `--provisioner*` flags, as the chart renders them. */
  provisioner?: ProvisionerOptions;
}): Promise<RunningComponents> {
  const common = defaultOperatorOptions({
    namespace: NAMESPACE,
    controllers: options.controllers,
    leaderElect: options.leaderElect ?? false,
    ...(options.leaseName ? { leaseName: options.leaseName } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
    healthHost: '127.0.0.1',
    healthPort: 0,
    logLevel: 'error',
    webhookHost: '127.0.0.1',
    webhookPort: options.webhookPort,
    webhookEndpoint: `https://127.0.0.1:${options.webhookPort}`,
    gatewayHost: '127.0.0.1',
    gatewayPort: 0,
  });
  const logger = options.logger ?? pino({ level: 'silent' });
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  };
  try {
    const webhook = await startAdmissionComponent(
      { ...common, kubeconfig: options.kubeconfigs.webhook, healthPort: undefined },
      logger.child({ component: 'webhook' }),
    );
    stops.push(() => webhook.stop());
    const controllers = createControllerManager(
      { ...common, ...options.provisioner, kubeconfig: options.kubeconfigs.controller },
      logger.child({ component: 'controller' }),
    );
    await controllers.start();
    stops.push(() => controllers.stop());
    let gateway: RunningGateway | undefined;
    if (options.gateway) {
      gateway = await setupGatewayComponent(
        { ...common, kubeconfig: options.kubeconfigs.gateway, gatewayHost: '127.0.0.1', gatewayPort: 0 },
        logger.child({ component: 'gateway' }),
      ).start();
      stops.push(() => gateway!.stop());
    }
    return {
      gatewayUrl: gateway?.server.url,
      notReady: () => [
        ...controllers.readiness().notReady.map((what) => `controller: ${what}`),
        ...(gateway?.manager.readiness().notReady.map((what) => `gateway: ${what}`) ?? []),
      ],
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * The controller's `--provisioner*` flags as the chart rendered them (its Deployment's args), for
 * {@link startComponents}: the components run out of cluster as the chart would run them.
 */
export function provisionerOptionsOf(rendered: Manifest[]): ProvisionerOptions {
  const deployment = rendered.find(
    (m) => m.kind === 'Deployment' && (m.metadata.name as string).endsWith('-controller'),
  );
  // biome-ignore lint/suspicious/noExplicitAny: a rendered manifest
  const args: string[] = (deployment as any)?.spec.template.spec.containers[0].args ?? [];
  const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const kind = flag('provisioner');
  const image = flag('provisioner-image');
  const pullPolicy = flag('provisioner-image-pull-policy');
  return {
    ...(kind ? { provisioner: kind as NonNullable<ProvisionerOptions['provisioner']> } : {}),
    ...(image ? { provisionerImage: image } : {}),
    ...(pullPolicy
      ? {
          provisionerImagePullPolicy: pullPolicy as NonNullable<
            ProvisionerOptions['provisionerImagePullPolicy']
          >,
        }
      : {}),
  };
}
