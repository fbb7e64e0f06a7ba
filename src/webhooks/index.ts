import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { RestMapper } from '../runtime/apply.ts';
import type { Clock } from '../runtime/clock.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { ADMISSION_PATHS, Admission } from './admission.ts';
import {
  type CertificatePolicy,
  DEFAULT_CERTIFICATE_POLICY,
  MountedCertificates,
  SelfManagedCertificates,
} from './certificates.ts';
import { ClusterReader } from './cluster-state.ts';
import {
  applyWebhookConfigurations,
  buildWebhookConfigurations,
  type WebhookConfigurations,
  type WebhookEndpoint,
} from './configurations.ts';
import { AdmissionServer } from './server.ts';

export * from './admission.ts';
export * from './certificates.ts';
export * from './configurations.ts';
export * from './decision.ts';
export * from './review.ts';
export * from './server.ts';

export type CertificateMode =
  | {
      readonly mode: 'self-managed';
      readonly policy?: Partial<CertificatePolicy>;
      readonly secretName?: string;
    }
  | { readonly mode: 'mounted'; readonly directory: string };

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
  readonly clock?: Clock;
  readonly random?: RandomBytes;
  readonly logger?: Logger;
}

export interface AdmissionWebhooks {
  readonly server: AdmissionServer;
  readonly certificates: SelfManagedCertificates | MountedCertificates;
  /** The configurations as last applied (or as they would be). */
  configurations(): WebhookConfigurations;
  /** Stops serving and the certificate checks; leaves the configurations registered (fail closed). */
  stop(): Promise<void>;
}

/**
 * Starts admission in the operator process (every replica; no leader needed): loads or creates
 * the serving certificate, starts the HTTPS server, and registers the webhook configurations with
 * the current CA bundle, re-registering whenever the bundle changes.
 */
export async function startAdmissionWebhooks(options: AdmissionWebhooksOptions): Promise<AdmissionWebhooks> {
  const api = new KubeClient(options.kubeConfig, { fieldManager: fieldManagers.admission });
  const random = options.random ?? randomBytes;
  const register = options.registerConfigurations ?? true;
  let endpoint: WebhookEndpoint | undefined = options.endpoint === 'local' ? undefined : options.endpoint;
  let bundle: string | undefined;
  const build = () => {
    if (!endpoint || bundle === undefined) throw new Error('admission webhooks are not started yet');
    return buildWebhookConfigurations({
      endpoint,
      caBundlePem: bundle,
      platformNamespace: options.platformNamespace,
      ...(options.configurationNamePrefix ? { namePrefix: options.configurationNamePrefix } : {}),
    });
  };
  const onCaBundle = async (caBundlePem: string) => {
    bundle = caBundlePem;
    if (register && endpoint) await applyWebhookConfigurations(api, build());
  };

  const certificates =
    options.certificates.mode === 'self-managed'
      ? new SelfManagedCertificates({
          api,
          namespace: options.platformNamespace,
          ...(options.certificates.secretName ? { secretName: options.certificates.secretName } : {}),
          policy: {
            ...DEFAULT_CERTIFICATE_POLICY,
            ...servingNames(options),
            ...options.certificates.policy,
          },
          onCaBundle,
          ...(options.clock ? { clock: options.clock } : {}),
          ...(options.logger ? { logger: options.logger } : {}),
        })
      : new MountedCertificates({
          directory: options.certificates.directory,
          ...(options.clock ? { clock: options.clock } : {}),
          ...(options.logger ? { logger: options.logger } : {}),
        });
  await certificates.start();
  if (certificates instanceof MountedCertificates) {
    bundle = certificates.current().caBundlePem;
    certificates.subscribe((material) => {
      if (material.caBundlePem !== bundle) {
        onCaBundle(material.caBundlePem).catch((err: unknown) =>
          options.logger?.error(
            { err: err instanceof Error ? err.name : 'unknown' },
            'CA bundle injection failed',
          ),
        );
      }
    });
  }

  const cluster = new ClusterReader({
    api,
    restMapper: new RestMapper(api),
    pepper: new PepperStore(api, options.platformNamespace, random),
    platformNamespace: options.platformNamespace,
    random,
  });
  const admission = new Admission(cluster, options.platformNamespace);
  let server: AdmissionServer;
  try {
    server = await AdmissionServer.start({
      host: options.host,
      port: options.port,
      certificates,
      review: (path, request) => admission.review(path, request),
      paths: ADMISSION_PATHS,
      ...(options.logger ? { logger: options.logger } : {}),
    });
    endpoint ??= { url: `https://127.0.0.1:${server.port}` };
    if (register) await applyWebhookConfigurations(api, build());
  } catch (err) {
    certificates.stop();
    throw err;
  }
  return {
    server,
    certificates,
    configurations: build,
    async stop() {
      certificates.stop();
      await server.stop();
      api.close();
    },
  };
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
