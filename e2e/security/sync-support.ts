// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import { PROJECT_LABEL } from '../../src/controllers/project/desired.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';
import { waitUntilWebhooksServe } from '../support/webhooks-ready.ts';
import { Api, configYaml } from '../sync/support.ts';

/**
 * The platform as a hostile tenant meets it, on apiservers of the test file's own: a host cluster
 * (with kube-controller-manager, which fills service-account token Secrets) holding the CRDs,
 * the platform's roles, its admission webhooks and the operator's controllers (SharedSecrets,
 * secret sync, virtual clusters and their syncers, each syncer under its own ServiceAccount), and
 * a second apiserver that is the tenant's virtual cluster (the tenant is its admin). Another
 * tenant's project keeps a SharedSecret whose value no attack may move anywhere.
 */

export const PLATFORM_NAMESPACE = 'platform-system';
/** The other tenant's project namespace and SharedSecret. */
export const VICTIM_NAMESPACE = 'finance';
export const VICTIM_SECRET = 'prod-db';
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

export interface AttackEnv {
  host: Api;
  hostCluster: Cluster;
  virtual: Api;
  virtualCluster: Cluster;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  /** The value the other tenant keeps in its SharedSecret. */
  secretValue: string;
  /** Everything the operator, its controllers and the syncers logged. */
  logs(): string;
  /** A project namespace of the tenant on the host. */
  tenantNamespace(prefix: string): Promise<string>;
  /** Creates a VirtualClusterInstance reaching the virtual cluster with its admin token. */
  createInstance(namespace: string, name: string, config: unknown): Promise<void>;
  readInstance(namespace: string, name: string): Promise<any>;
}

export function useAttackEnv(): () => AttackEnv {
  const startCluster = useExtraClusters();
  const dir = mkdtempSync(join(tmpdir(), 'platform-sync-attack-'));
  const logPath = join(dir, 'operator.log');
  let env: AttackEnv | undefined;
  let webhooks: AdmissionWebhooks | undefined;
  let manager: Manager | undefined;
  beforeAll(async () => {
    const hostCluster = await startCluster({ name: uniqueName('host'), controllerManager: true });
    const virtualCluster = await startCluster({ name: uniqueName('tenant') });
    const kc = kubeConfigFor(hostCluster);
    await installCrds(kc);
    await installPlatformRoles(new KubeClient(kc));
    const host = new Api(kc);
    const virtual = new Api(kubeConfigFor(virtualCluster));
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    await host.createNamespace(PLATFORM_NAMESPACE);
    await core.createNamespace({
      body: { metadata: { name: VICTIM_NAMESPACE, labels: { [PROJECT_LABEL]: VICTIM_NAMESPACE } } },
    });
    await virtual.createNamespace('apps');
    const secretValue = `victim-${uniqueName('pw')}-value`;
    await custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: VICTIM_NAMESPACE,
      plural: 'sharedsecrets',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'SharedSecret',
        metadata: { name: VICTIM_SECRET },
        spec: {
          data: { password: b64(secretValue) },
          access: [{ verbs: ['get'], users: ['finance-admin'] }],
        },
      },
    });

    webhooks = await startAdmissionWebhooks({
      kubeConfig: kc,
      host: '127.0.0.1',
      port: 0,
      platformNamespace: PLATFORM_NAMESPACE,
      endpoint: 'local',
      certificates: { mode: 'self-managed' },
    });
    await waitUntilWebhooksServe(custom);
    const log = createWriteStream(logPath, { flags: 'a' });
    manager = createOperator(
      defaultOperatorOptions({
        kubeconfig: hostCluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['sharedsecret', 'secretsync', 'virtualcluster'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'debug',
        webhooks: false,
        gateway: false,
      }),
      pino({ level: 'debug' }, log),
    );
    await manager.start();

    env = {
      host,
      hostCluster,
      virtual,
      virtualCluster,
      custom,
      core,
      secretValue,
      logs: () => readFileSync(logPath, 'utf8'),
      tenantNamespace: async (prefix) => {
        const name = uniqueName(prefix);
        await core.createNamespace({ body: { metadata: { name, labels: { [PROJECT_LABEL]: 'tenant' } } } });
        return name;
      },
      createInstance: async (namespace, name, config) => {
        await host.create('secrets', namespace, {
          metadata: { name: `${name}-creds` },
          data: { token: b64(virtualCluster.adminToken) },
        });
        await custom.createNamespacedCustomObject({
          group: API_GROUP,
          version: API_VERSION,
          namespace,
          plural: 'virtualclusterinstances',
          body: {
            apiVersion: `${API_GROUP}/${API_VERSION}`,
            kind: 'VirtualClusterInstance',
            metadata: { name },
            spec: {
              endpoint: virtualCluster.server,
              caData: b64(virtualCluster.caPem),
              credentialsSecretRef: { name: `${name}-creds` },
              config: typeof config === 'string' ? config : configYaml(config),
            },
          },
        });
      },
      readInstance: (namespace, name) =>
        custom.getNamespacedCustomObject({
          group: API_GROUP,
          version: API_VERSION,
          namespace,
          plural: 'virtualclusterinstances',
          name,
        }) as Promise<any>,
    };
  });
  afterAll(async () => {
    await manager?.stop();
    await webhooks?.stop();
    env?.host.close();
    env?.virtual.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    if (!env) throw new Error('the attack environment is not started');
    return env;
  };
}

/** The `Syncing` condition of an instance once `check` holds for it. */
export async function syncingWhen(
  env: AttackEnv,
  namespace: string,
  name: string,
  check: (condition: any) => boolean,
  what: string,
): Promise<any> {
  let last: any;
  await eventually(
    async () => {
      const vci = await env.readInstance(namespace, name);
      last = (vci.status?.conditions ?? []).find((c: any) => c.type === 'Syncing');
      return Boolean(last) && check(last);
    },
    60_000,
    what,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last condition: ${JSON.stringify(last)}`);
  });
  return last;
}

/**
 * Everything an attacker could read afterwards, as one text: every object of the host's
 * namespaces the attack touched (Secrets, ConfigMaps, Services, Endpoints, Events), the instances
 * (their conditions), every Event of the virtual cluster, and the platform's log.
 */
export async function everythingVisible(env: AttackEnv, hostNamespaces: string[]): Promise<string> {
  const parts: unknown[] = [];
  for (const namespace of hostNamespaces) {
    for (const plural of ['secrets', 'configmaps', 'services', 'endpoints', 'events']) {
      parts.push(await env.host.list(plural, namespace));
    }
    parts.push(
      await env.custom.listNamespacedCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        namespace,
        plural: 'virtualclusterinstances',
      }),
    );
  }
  for (const plural of ['secrets', 'configmaps', 'events'])
    parts.push(await env.virtual.list(plural, 'apps'));
  parts.push(await env.virtual.list('events', 'default'));
  return `${JSON.stringify(parts)}\n${env.logs()}`;
}

/** The forms a secret value can leak in: as it is, in base64 (Secret data), in base64 twice. */
export function leakForms(value: string): string[] {
  const once = b64(value);
  return [value, once, b64(once)];
}
