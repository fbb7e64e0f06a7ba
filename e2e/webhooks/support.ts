import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, expect } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { CertificatePolicy } from '../../src/webhooks/certificates/plan.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import { kubeConfigFor, kubectl, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { waitUntilWebhooksServe as waitForWebhooks } from '../support/webhooks-ready.ts';

/**
 * Each webhook test file gets a kube-apiserver of its own (on the run's etcd, own prefix), so
 * that fail-closed webhooks registered here never touch other test files' requests. The webhook
 * server runs inside the test process on 127.0.0.1; the configurations point at it by URL.
 */

export const PLATFORM_NAMESPACE = 'platform-system';

export interface WebhookEnv {
  cluster: Cluster;
  kc: KubeConfig;
  kubeconfigPath: string;
  webhooks: AdmissionWebhooks;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  rbac: RbacAuthorizationV1Api;
  /** A kubeconfig (path and client) for the service account `name` in `namespace`. */
  serviceAccount(
    namespace: string,
    name: string,
  ): Promise<{ kc: KubeConfig; path: string; username: string }>;
  /**
   * Restarts the webhooks; a new `secretName` starts from fresh certificates issued under `policy`.
   */
  restartWebhooks(policy?: Partial<CertificatePolicy>, secretName?: string): Promise<void>;
}

export interface WebhookEnvOptions {
  policy?: Partial<CertificatePolicy>;
}

export function useWebhookEnv(options: WebhookEnvOptions = {}): () => WebhookEnv {
  const startCluster = useExtraClusters();
  let env: WebhookEnv | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'platform-webhooks-'));
  beforeAll(async () => {
    const cluster = await startCluster({ name: uniqueName('wh') });
    const kc = kubeConfigFor(cluster);
    await installCrds(kc);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    const start = (policy?: Partial<CertificatePolicy>, secretName?: string) =>
      startAdmissionWebhooks({
        kubeConfig: kc,
        host: '127.0.0.1',
        port: 0,
        platformNamespace: PLATFORM_NAMESPACE,
        endpoint: 'local',
        certificates: {
          mode: 'self-managed',
          ...(policy ? { policy } : {}),
          ...(secretName ? { secretName } : {}),
        },
      });
    const webhooks = await start(options.policy);
    env = {
      cluster,
      kc,
      kubeconfigPath: cluster.kubeconfigPath,
      webhooks,
      core,
      custom: kc.makeApiClient(CustomObjectsApi),
      rbac: kc.makeApiClient(RbacAuthorizationV1Api),
      serviceAccount: async (namespace, name) => {
        await core
          .createNamespacedServiceAccount({ namespace, body: { metadata: { name } } })
          .catch(ignoreExists);
        const token = await core.createNamespacedServiceAccountToken({
          namespace,
          name,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        });
        const user = new KubeConfig();
        const current = kc.getCurrentCluster()!;
        user.loadFromOptions({
          clusters: [{ name: 'c', server: current.server, caData: current.caData, caFile: current.caFile }],
          users: [{ name: 'u', token: token.status!.token }],
          contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
          currentContext: 'x',
        });
        const path = join(dir, `${namespace}-${name}.kubeconfig`);
        writeFileSync(path, user.exportConfig(), { mode: 0o600 });
        return { kc: user, path, username: `system:serviceaccount:${namespace}:${name}` };
      },
      restartWebhooks: async (policy, secretName) => {
        await env!.webhooks.stop();
        env!.webhooks = await start(policy, secretName);
        await waitUntilWebhooksServe(env!);
      },
    };
    await waitUntilWebhooksServe(env);
  });
  afterAll(async () => {
    await env?.webhooks.stop();
  });
  return () => {
    if (!env) throw new Error('the webhook environment is not started');
    return env;
  };
}

export function ignoreExists(err: unknown): void {
  if (!(err instanceof ApiException && err.code === 409)) throw err;
}

/** A SharedSecret body our webhook refuses (an unsupported verb). */
export function sharedSecretBody(name: string, access: unknown[] = [{ verbs: ['get'], users: [] }]) {
  return {
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind: 'SharedSecret',
    metadata: { name },
    spec: { data: { password: 'c2VjcmV0' }, access },
  };
}

/** See {@link waitForWebhooks}; kept for the webhook tests' environment. */
export function waitUntilWebhooksServe(env: WebhookEnv): Promise<void> {
  return waitForWebhooks(env.custom);
}

export interface Rejection {
  code: number;
  reason: string;
  message: string;
  causes: { field?: string; message?: string; reason?: string }[];
}

/** The Status a client-node call was refused with. */
export async function rejectionOf(attempt: Promise<unknown>): Promise<Rejection> {
  try {
    await attempt;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const body = (typeof err.body === 'string' ? JSON.parse(err.body) : err.body) as {
      code: number;
      reason: string;
      message: string;
      details?: { causes?: Rejection['causes'] };
    };
    return {
      code: body.code,
      reason: body.reason,
      message: body.message,
      causes: body.details?.causes ?? [],
    };
  }
  throw new Error('expected the request to be refused, but it was admitted');
}

/** Runs kubectl against the webhook cluster. */
export function kubectlOn(env: WebhookEnv, args: string[], stdin?: string, kubeconfig?: string) {
  return kubectl(args, {
    kubeconfig: kubeconfig ?? env.kubeconfigPath,
    ...(stdin !== undefined ? { stdin } : {}),
  });
}

export function expectCause(rejection: Rejection, field: string, message?: RegExp): void {
  const cause = rejection.causes.find((c) => c.field === field);
  expect(cause, `causes: ${JSON.stringify(rejection.causes)}`).toBeDefined();
  if (message) expect(cause?.message).toMatch(message);
}
