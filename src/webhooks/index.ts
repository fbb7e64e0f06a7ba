import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import pino, { type Logger } from 'pino';
import type { RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { RestMapper } from '../runtime/apply.ts';
import type { Clock } from '../runtime/clock.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { Manager } from '../runtime/manager.ts';
import { ADMISSION_PATHS, Admission } from './admission.ts';
import { MountedCertificates } from './certificates/mounted.ts';
import { type CertificatePolicy, DEFAULT_CERTIFICATE_POLICY } from './certificates/plan.ts';
import { runCertificateRotation, runMountedCertificateReload } from './certificates/rotation.ts';
import { SelfManagedCertificates } from './certificates/self-managed.ts';
import { ClusterReader } from './cluster-state.ts';
import {
  applyWebhookConfigurations,
  buildWebhookConfigurations,
  type WebhookConfigurations,
  type WebhookEndpoint,
} from './configurations.ts';
import { AdmissionServer } from './server.ts';

export type CertificateMode =
  | {
      readonly mode: 'self-managed';
      readonly policy?: Partial<CertificatePolicy>;
      readonly secretName?: string;
    }
  | {
      readonly mode: 'mounted';
      readonly directory: string;
      /** Polling interval besides filesystem events (default 10 s). */
      readonly pollSeconds?: number;
    };

export interface AdmissionWebhooksOptions {
  readonly kubeConfig: KubeConfig;
  /** `127.0.0.1` locally, `0.0.0.0` in a pod. */
  readonly host: string;
  /** 0 picks a free port (only sensible with the `local` endpoint). */
  readonly port: number;
  /** Holds platform-config, the pepper Secret and the serving Secret. */
  readonly platformNamespace: string;
  /** `local`: `https://127.0.0.1:<bound port>`; otherwise a URL or a Service. */
  readonly endpoint: WebhookEndpoint | 'local';
  readonly certificates: CertificateMode;
  /** Apply the webhook configurations (on start and on every CA bundle change). Default true. */
  readonly registerConfigurations?: boolean;
  /** Prefix of the configuration names (several instances in one cluster, tests). */
  readonly configurationNamePrefix?: string;
  /**
   * Runs the certificates' renewal controller (rotation or reload); when absent the webhooks run
   * a Manager of their own (no health server), stopped with them.
   */
  readonly manager?: Manager;
  readonly clock?: Clock;
  readonly random?: RandomBytes;
  readonly logger?: Logger;
}

export interface AdmissionWebhooks {
  readonly server: AdmissionServer;
  readonly certificates: SelfManagedCertificates | MountedCertificates;
  /** The configurations as last applied (or as they would be). */
  configurations(): WebhookConfigurations;
  /** Stops serving and the certificate rotation; leaves the configurations registered (fail closed). */
  stop(): Promise<void>;
}

/**
 * Starts admission in the operator process (every replica; no leader needed): loads or creates
 * the serving certificate, starts the HTTPS server, and registers the webhook configurations with
 * the current CA bundle, re-registering whenever the bundle changes.
 */
export async function startAdmissionWebhooks(options: AdmissionWebhooksOptions): Promise<AdmissionWebhooks> {
  const api = new KubeClient(options.kubeConfig, { fieldManager: fieldManagers.admission });
  const registrar = new ConfigurationRegistrar(api, options);
  const ownsManager = options.manager === undefined;
  const manager =
    options.manager ??
    new Manager({
      api,
      logger: options.logger ?? pino({ level: 'silent' }),
      ...(options.clock ? { clock: options.clock } : {}),
    });
  const certificates = await loadCertificates(api, options, registrar, manager);
  const stopRenewal = async () => {
    await certificates.stop();
    if (ownsManager) await manager.stop();
  };
  let server: AdmissionServer;
  try {
    if (ownsManager) await manager.start();
    server = await serveAdmission(api, options, certificates.source);
    await registrar.serving(server.port);
  } catch (err) {
    await stopRenewal();
    throw err;
  }
  return {
    server,
    certificates: certificates.source,
    configurations: () => registrar.configurations(),
    async stop() {
      await stopRenewal();
      await server.stop();
      api.close();
    },
  };
}

/**
 * Keeps the webhook configurations registered with the endpoint and the current CA bundle:
 * applied once the server serves, and again on every bundle change after that.
 */
class ConfigurationRegistrar {
  private endpoint: WebhookEndpoint | undefined;
  private bundle: string | undefined;
  private readonly register: boolean;

  constructor(
    private readonly api: KubeApi,
    private readonly options: AdmissionWebhooksOptions,
  ) {
    this.endpoint = options.endpoint === 'local' ? undefined : options.endpoint;
    this.register = options.registerConfigurations ?? true;
  }

  configurations(): WebhookConfigurations {
    if (!this.endpoint || this.bundle === undefined)
      throw new Error('admission webhooks are not started yet');
    return buildWebhookConfigurations({
      endpoint: this.endpoint,
      caBundlePem: this.bundle,
      platformNamespace: this.options.platformNamespace,
      ...(this.options.configurationNamePrefix ? { namePrefix: this.options.configurationNamePrefix } : {}),
    });
  }

  /** The bundle to register once the server serves. */
  recordBundle(caBundlePem: string): void {
    this.bundle = caBundlePem;
  }

  /** A (new) CA bundle, applied at once (the apiserver must trust a CA before it is served with). */
  async caBundle(caBundlePem: string): Promise<void> {
    this.bundle = caBundlePem;
    if (this.register && this.endpoint) await applyWebhookConfigurations(this.api, this.configurations());
  }

  /** The server serves on `port` (the `local` endpoint's); applies the configurations. */
  async serving(port: number): Promise<void> {
    this.endpoint ??= { url: `https://127.0.0.1:${port}` };
    if (this.register) await applyWebhookConfigurations(this.api, this.configurations());
  }
}

interface LoadedCertificates {
  readonly source: SelfManagedCertificates | MountedCertificates;
  /** Stops the rotation (self-managed) or the reloading (mounted) controller. */
  stop(): Promise<void>;
}

/** The serving certificates, loaded (or created), their renewal a controller of `manager`. */
function loadCertificates(
  api: KubeApi,
  options: AdmissionWebhooksOptions,
  registrar: ConfigurationRegistrar,
  manager: Manager,
): Promise<LoadedCertificates> {
  return options.certificates.mode === 'mounted'
    ? loadMountedCertificates(options.certificates, registrar, manager, options.logger)
    : loadSelfManagedCertificates(api, options.certificates, options, registrar, manager);
}

/** Mounted files, reloaded when they change; a changed CA bundle is registered. */
async function loadMountedCertificates(
  mode: Extract<CertificateMode, { mode: 'mounted' }>,
  registrar: ConfigurationRegistrar,
  manager: Manager,
  logger: Logger | undefined,
): Promise<LoadedCertificates> {
  const mounted = new MountedCertificates({ directory: mode.directory });
  await mounted.reload();
  let bundle = mounted.current().caBundlePem;
  registrar.recordBundle(bundle);
  mounted.subscribe((material) => {
    if (material.caBundlePem === bundle) return;
    bundle = material.caBundlePem;
    registrar
      .caBundle(material.caBundlePem)
      .catch((err: unknown) =>
        logger?.error({ err: err instanceof Error ? err.name : 'unknown' }, 'CA bundle injection failed'),
      );
  });
  const reload = runMountedCertificateReload(manager, mounted, (mode.pollSeconds ?? 10) * 1000);
  return { source: mounted, stop: () => reload.stop() };
}

/** The Secret's material, loaded or created now, then rotated by a controller of `manager`. */
async function loadSelfManagedCertificates(
  api: KubeApi,
  mode: Extract<CertificateMode, { mode: 'self-managed' }>,
  options: AdmissionWebhooksOptions,
  registrar: ConfigurationRegistrar,
  manager: Manager,
): Promise<LoadedCertificates> {
  const selfManaged = new SelfManagedCertificates({
    api,
    namespace: options.platformNamespace,
    ...(mode.secretName ? { secretName: mode.secretName } : {}),
    policy: { ...DEFAULT_CERTIFICATE_POLICY, ...servingNames(options), ...mode.policy },
    onCaBundle: (caBundlePem) => registrar.caBundle(caBundlePem),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  await selfManaged.reconcile();
  const rotation = runCertificateRotation(manager, selfManaged);
  return { source: selfManaged, stop: () => manager.removeController(rotation) };
}

/** The HTTPS server answering AdmissionReviews with the policy table (`policies.ts`). */
function serveAdmission(
  api: KubeApi,
  options: AdmissionWebhooksOptions,
  certificates: SelfManagedCertificates | MountedCertificates,
): Promise<AdmissionServer> {
  const random = options.random ?? randomBytes;
  const cluster = new ClusterReader({
    api,
    restMapper: new RestMapper(api),
    pepper: new PepperStore(api, options.platformNamespace, random),
    platformNamespace: options.platformNamespace,
    random,
  });
  const admission = new Admission(cluster, options.platformNamespace);
  return AdmissionServer.start({
    host: options.host,
    port: options.port,
    certificates,
    review: (path, request) => admission.review(path, request),
    paths: ADMISSION_PATHS,
    ...(options.logger ? { logger: options.logger } : {}),
  });
}

/** Names the serving certificate must carry for the chosen endpoint. */
function servingNames(
  options: AdmissionWebhooksOptions,
): Pick<CertificatePolicy, 'dnsNames' | 'ipAddresses'> {
  if (options.endpoint === 'local') return { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
  if ('url' in options.endpoint) {
    const host = new URL(options.endpoint.url).hostname;
    return /^[\d.]+$/.test(host)
      ? { dnsNames: [], ipAddresses: [host] }
      : { dnsNames: [host], ipAddresses: [] };
  }
  const { name, namespace } = options.endpoint.service;
  return {
    dnsNames: [`${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`],
    ipAddresses: [],
  };
}
