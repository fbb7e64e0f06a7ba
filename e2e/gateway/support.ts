import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import pino from 'pino';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { BASE_PATH, type Gateway, type GatewayOptions, setupGateway } from '../../src/gateway/index.ts';
import type { GatewayServer } from '../../src/gateway/server.ts';
import type { Endpoint } from '../../src/http/endpoint.ts';
import { generateAccessKey, hashAccessKey } from '../../src/identity/keys.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import {
  hostKubeConfig,
  hostKubeconfigPath,
  kubeConfigFor,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';
import { waitUntilWebhooksServe } from '../support/webhooks-ready.ts';

/**
 * A gateway test file's world: a kube-apiserver of its own (on the run's etcd), our CRDs, the
 * admission webhooks (they hash the keys the gateway mints), the SharedSecret controller (RBAC
 * projection) and the gateway itself on 127.0.0.1, in the test process. Platform admins
 * (`platform:admins`) are bound to `cluster-admin`, as an installation does.
 */

export const PLATFORM_NAMESPACE = 'platform-system';
export const GROUP_VERSION = `${API_GROUP}/${API_VERSION}`;

export interface GatewayEnv {
  cluster: Cluster | undefined;
  platformNamespace: string;
  kc: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  rbac: RbacAuthorizationV1Api;
  manager: Manager;
  gateway: Gateway;
  server: GatewayServer;
  /** `<gateway>/kubernetes/management`. */
  base: string;
  /** `<base>/apis/management.platform/v1`. */
  api: string;
  /** Creates a User (platform admin when asked) and a key for it; returns the plaintext key. */
  user(
    name: string,
    options?: { admin?: boolean; teams?: string[]; keySpec?: Record<string, unknown> },
  ): Promise<string>;
  /** Creates another key for an existing user or team (spec given); returns the plaintext. */
  key(spec: Record<string, unknown>, name?: string): Promise<string>;
  /** Waits until the gateway accepts `token`. */
  accepted(token: string): Promise<void>;
  /**
   * A reviewer credential (docs/trust.md) for the TokenReview endpoint of a connected cluster or a
   * project's virtual cluster: a key of its own subject, with the role `agent` or `vcluster`.
   */
  reviewer(target: { cluster: string } | { project: string; virtualCluster: string }): Promise<string>;
  /** The CA of the gateway's serving certificate (HTTPS environments). */
  caPem: string | undefined;
  /** For `call` against an HTTPS gateway. */
  dispatcher: Dispatcher | undefined;
}

export interface GatewayEnvOptions {
  gateway?: Partial<GatewayOptions>;
  /**
   * Endpoints of other components, made on the manager before the gateway is set up (as the
   * composition root does: `setupLogin(...)` then `setupGateway({ endpoints })`).
   */
  endpoints?: (manager: Manager, api: KubeClient) => readonly Endpoint[];
  /** Serve HTTPS with a certificate of a test CA (kubectl sends tokens only over TLS). */
  https?: boolean;
  /**
   * Run against the run's shared host cluster instead of an apiserver of its own, without
   * admission webhooks (keys are then stored with their hash computed here) and with a platform
   * namespace of its own: for files that need an extra apiserver for something else.
   */
  onHost?: boolean;
  /** Run the SharedSecret controller (RBAC projection). Default true. */
  controllers?: string[];
  /**
   * Run kube-controller-manager beside the gateway's own apiserver (ClusterRole aggregation, which
   * the project roles need; garbage collection).
   */
  controllerManager?: boolean;
}

export function useGatewayEnv(options: GatewayEnvOptions = {}): () => GatewayEnv {
  const startCluster = useExtraClusters();
  let env: GatewayEnv | undefined;
  let webhooks: AdmissionWebhooks | undefined;
  beforeAll(async () => {
    const cluster = options.onHost
      ? undefined
      : await startCluster({
          name: uniqueName('gw'),
          ...(options.controllerManager ? { controllerManager: true } : {}),
        });
    const kc = cluster ? kubeConfigFor(cluster) : hostKubeConfig();
    const platformNamespace = options.onHost ? uniqueName('platform') : PLATFORM_NAMESPACE;
    await installCrds(kc);
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    await core.createNamespace({ body: { metadata: { name: platformNamespace } } });
    await rbac
      .createClusterRoleBinding({
        body: {
          metadata: { name: 'platform-admins' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:admins' }],
        },
      })
      .catch(ignoreExists);
    if (!options.onHost) {
      webhooks = await startAdmissionWebhooks({
        kubeConfig: kc,
        host: '127.0.0.1',
        port: 0,
        platformNamespace,
        endpoint: 'local',
        certificates: { mode: 'self-managed' },
      });
      await waitUntilWebhooksServe(custom);
    }
    const logger = pino({ level: 'silent' });
    const manager = createOperator(
      defaultOperatorOptions({
        ...(cluster ? { kubeconfig: cluster.kubeconfigPath } : { kubeconfig: hostKubeconfigPath() }),
        namespace: platformNamespace,
        ...(options.onHost ? { watchNamespace: platformNamespace } : {}),
        controllers: options.controllers ?? (options.onHost ? [] : ['sharedsecret']),
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
        webhooks: false,
        gateway: false,
      }),
      logger,
    );
    let certDir: string | undefined;
    let caPem: string | undefined;
    if (options.https) {
      const ca = await createCertificateAuthority('gateway-test-ca', 3600);
      const serving = await issueCertificate(ca, {
        commonName: 'gateway',
        ipAddresses: ['127.0.0.1'],
        dnsNames: ['localhost'],
        usage: 'server',
        validForSeconds: 3600,
      });
      certDir = mkdtempSync(join(tmpdir(), 'platform-gateway-tls-'));
      writeFileSync(join(certDir, 'tls.crt'), serving.certPem);
      writeFileSync(join(certDir, 'tls.key'), serving.keyPem, { mode: 0o600 });
      // The CA beside them, as cert-manager's Secrets hold it: kubeconfigs the gateway hands out trust it.
      writeFileSync(join(certDir, 'ca.crt'), ca.certPem);
      caPem = ca.certPem;
    }
    const dispatcher = caPem ? new Agent({ connect: { ca: caPem } }) : undefined;
    const gateway = setupGateway(manager, {
      ...(certDir ? { certDir } : {}),
      kubeConfig: kc,
      api: new KubeClient(kc),
      platformNamespace,
      host: '127.0.0.1',
      port: 0,
      logger,
      authFailureLimits: {
        perSource: { failures: 10_000, windowSeconds: 60, blockSeconds: 60 },
        perKey: { failures: 5, windowSeconds: 60, blockSeconds: 60 },
      },
      ...options.gateway,
      ...(options.endpoints
        ? {
            endpoints: [
              ...(options.gateway?.endpoints ?? []),
              ...options.endpoints(manager, new KubeClient(kc)),
            ],
          }
        : {}),
    });
    await manager.start();
    const server = await gateway.start();
    await eventually(() => gateway.ready(), 60_000, 'gateway ready');
    const base = `${server.url}${BASE_PATH}`;
    const pepper = options.onHost
      ? await new PepperStore(new KubeClient(kc), platformNamespace, randomBytes).load()
      : undefined;
    const key = async (spec: Record<string, unknown>, name = uniqueName('key')) => {
      const generated = generateAccessKey((size) => randomBytes(size));
      // Without the webhooks the hash is made here, as admission would.
      const secret = pepper
        ? { keyHash: hashAccessKey(generated.key, pepper), keyId: generated.id }
        : { key: generated.key };
      await custom.createClusterCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'ownedaccesskeys',
        body: {
          apiVersion: GROUP_VERSION,
          kind: 'OwnedAccessKey',
          metadata: { name },
          spec: { type: 'User', ...spec, ...secret },
        },
      });
      return generated.key;
    };
    const accepted = (token: string) =>
      eventually(
        async () => (await call(`${base}/apis`, { token, dispatcher })).status === 200,
        30_000,
        'the gateway to accept the key',
      );
    const reviewer = async (target: { cluster: string } | { project: string; virtualCluster: string }) => {
      const scope =
        'cluster' in target
          ? { roles: [{ role: 'agent' }], clusters: [{ cluster: target.cluster }] }
          : {
              roles: [
                { role: 'vcluster', projects: [target.project], virtualClusters: [target.virtualCluster] },
              ],
            };
      const token = await key({ subject: uniqueName('reviewer'), type: 'Other', scope });
      await eventually(
        () => gateway.authenticator.authenticateCached(token).ok,
        30_000,
        'the gateway to know the reviewer credential',
      );
      return token;
    };
    env = {
      reviewer,
      cluster,
      platformNamespace,
      kc,
      custom,
      core,
      rbac,
      manager,
      gateway,
      server,
      base,
      api: `${base}/apis/${GROUP_VERSION}`,
      key,
      accepted,
      caPem,
      dispatcher,
      user: async (name, userOptions = {}) => {
        await custom
          .createClusterCustomObject({
            group: API_GROUP,
            version: API_VERSION,
            plural: 'users',
            body: {
              apiVersion: GROUP_VERSION,
              kind: 'User',
              metadata: { name },
              spec: {
                username: name,
                displayName: name.toUpperCase(),
                email: `${name}@example.com`,
                ...(userOptions.admin ? { clusterRoles: [{ name: 'platform-admin' }] } : {}),
              },
            },
          })
          .catch(ignoreExists);
        if (userOptions.teams) {
          await new KubeClient(kc).request({
            method: 'PATCH',
            path: `/apis/${GROUP_VERSION}/users/${name}/status`,
            contentType: 'application/merge-patch+json',
            body: { status: { teams: userOptions.teams } },
          });
        }
        const token = await key({ user: name, ...userOptions.keySpec });
        await accepted(token);
        return token;
      },
    };
  });
  afterAll(async () => {
    await env?.gateway.stop();
    await env?.manager.stop();
    await webhooks?.stop();
    if (options.onHost && env)
      await env.core.deleteNamespace({ name: env.platformNamespace }).catch(() => {});
  });
  return () => {
    if (!env) throw new Error('the gateway environment is not started');
    return env;
  };
}

/**
 * Writes `<dir>/<name>.kubeconfig` (mode 0600) for kubectl against the gateway: its base URL as
 * the server, trusting the gateway's CA (an `https` environment), as user `name` with `token`
 * as the bearer. Returns the path.
 */
export function writeGatewayKubeconfig(env: GatewayEnv, dir: string, name: string, token: string): string {
  if (env.caPem === undefined)
    throw new Error('a kubeconfig for the gateway needs useGatewayEnv({ https: true })');
  const path = join(dir, `${name}.kubeconfig`);
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters:
- name: platform
  cluster:
    server: ${env.base}
    certificate-authority-data: ${Buffer.from(env.caPem).toString('base64')}
contexts:
- name: platform
  context: {cluster: platform, user: ${name}}
current-context: platform
users:
- name: ${name}
  user:
    token: ${token}
`,
    { mode: 0o600 },
  );
  return path;
}

export function ignoreExists(err: unknown): void {
  if (!(err instanceof ApiException && err.code === 409)) throw err;
}

export interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  json: any;
}

/** One call to the gateway. */
export async function call(
  url: string,
  options: {
    method?: string;
    token?: string;
    body?: string | Uint8Array;
    headers?: Record<string, string>;
    dispatcher?: Dispatcher | undefined;
  } = {},
): Promise<Answer> {
  const response = await undiciFetch(url, {
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    method: options.method ?? 'GET',
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/**
 * A TokenReview of `token` sent to the platform's token review webhook for `target` (default
 * `cluster/edge`) as that cluster's apiserver sends it, with `credential` (a reviewer's) as the
 * bearer; none when omitted.
 */
export function reviewToken(
  env: GatewayEnv,
  token: string,
  credential?: string,
  target = 'cluster/edge',
): Promise<Answer> {
  return call(`${env.server.url}/kubernetes/tokenreview/${target}`, {
    method: 'POST',
    ...(credential ? { token: credential } : {}),
    dispatcher: env.dispatcher,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } }),
  });
}

/**
 * A SelfSubjectReview with `token` as the bearer, on the apiserver at `server` (a cluster that
 * trusts the platform's tokens), reached through `dispatcher` (trusting that apiserver's CA).
 */
export function selfSubjectReview(server: string, dispatcher: Dispatcher, token: string): Promise<Answer> {
  return call(`${server}/apis/authentication.k8s.io/v1/selfsubjectreviews`, {
    method: 'POST',
    token,
    dispatcher,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
  });
}
