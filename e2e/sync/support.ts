import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { stringify } from 'yaml';
import { freePort } from '../../src/dev/controlplane.ts';
import { isNotFound } from '../../src/runtime/errors.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { hostNameLong, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import {
  hostKubeConfig,
  hostKubeconfigPath,
  kubeConfigFor,
  uniqueName,
  useExtraClusters,
  useNamespace,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/** A client on a cluster with the few calls the sync tests make, as plain JSON. */
export class Api {
  readonly client: KubeClient;
  constructor(kc: KubeConfig) {
    this.client = new KubeClient(kc);
  }

  // biome-ignore lint/suspicious/noExplicitAny: the tests read loosely typed objects
  async get(plural: string, namespace: string, name: string): Promise<any | null> {
    try {
      return await this.client.request({
        method: 'GET',
        path: `/api/v1/namespaces/${namespace}/${plural}/${name}`,
      });
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  // biome-ignore lint/suspicious/noExplicitAny: the tests read loosely typed objects
  async list(plural: string, namespace: string, labelSelector?: string): Promise<any[]> {
    const list = await this.client.request<{ items: unknown[] }>({
      method: 'GET',
      path: `/api/v1/namespaces/${namespace}/${plural}`,
      query: { labelSelector },
    });
    // biome-ignore lint/suspicious/noExplicitAny: as above
    return list.items as any[];
  }

  create(plural: string, namespace: string, body: unknown) {
    return this.client.request({ method: 'POST', path: `/api/v1/namespaces/${namespace}/${plural}`, body });
  }

  patch(plural: string, namespace: string, name: string, body: unknown) {
    return this.client.request({
      method: 'PATCH',
      path: `/api/v1/namespaces/${namespace}/${plural}/${name}`,
      body,
      contentType: 'application/merge-patch+json',
    });
  }

  async delete(plural: string, namespace: string, name: string) {
    try {
      await this.client.request({
        method: 'DELETE',
        path: `/api/v1/namespaces/${namespace}/${plural}/${name}`,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  createNamespace(name: string) {
    return this.client.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
  }

  /** events.k8s.io Events about one object. */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  async eventsAbout(namespace: string, kind: string, name: string): Promise<any[]> {
    const list = await this.client.request<{
      items: Array<{ regarding?: { kind?: string; name?: string } }>;
    }>({
      method: 'GET',
      path: `/apis/events.k8s.io/v1/namespaces/${namespace}/events`,
    });
    return list.items.filter((e) => e.regarding?.kind === kind && e.regarding?.name === name);
  }

  /** Names of the host objects labelled managed-by `vcluster`. */
  async managedNames(plural: string, namespace: string, vcluster: string): Promise<string[]> {
    const items = await this.list(plural, namespace, `${LABEL_MANAGED_BY}=${vcluster}`);
    return items.map((i) => i.metadata.name as string).sort();
  }

  close() {
    this.client.close();
  }
}

/** A selector-less Service and its Endpoints (one address, a Pod targetRef), as a user writes them. */
export function serviceAndEndpoints(
  name: string,
  options: { ip?: string; annotations?: Record<string, string>; selector?: Record<string, string> } = {},
) {
  const annotations = options.annotations ?? {};
  return {
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, annotations },
      spec: {
        ports: [{ name: 'p', port: 5432 }],
        ...(options.selector ? { selector: options.selector } : {}),
      },
    },
    endpoints: {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, annotations },
      subsets: [
        {
          addresses: [
            {
              ip: options.ip ?? '10.1.0.5',
              targetRef: {
                kind: 'Pod',
                name: `${name}-0`,
                namespace: 'apps',
                uid: 'pod-uid',
                resourceVersion: '7',
              },
            },
          ],
          ports: [{ name: 'p', port: 5432 }],
        },
      ],
    },
  };
}

/**
 * The configuration the tests run with: reversible patches on Services (an annotation, the port
 * names) and Endpoints, a reference from Services to a Secret by name and to the Secrets their
 * selector picks (reference.labels), one hostile patch; ConfigMaps enabled, Secrets not.
 */
export const TEST_CONFIG = {
  sync: {
    toHost: {
      configMaps: { enabled: true },
      services: {
        patches: [
          {
            path: 'metadata.annotations["platform.test/tier"]',
            expression: '"host-" + value',
            reverseExpression: 'value.replace(/^host-/, "")',
          },
          {
            path: 'metadata.annotations["platform.test/tls-secret"]',
            reference: { apiVersion: 'v1', kind: 'Secret' },
          },
          {
            path: 'spec.ports[*].name',
            expression: '"t-" + value',
            reverseExpression: 'value.replace(/^t-/, "")',
          },
          { path: 'spec.selector', reference: { apiVersion: 'v1', kind: 'Secret', labels: {} } },
        ],
      },
      endpoints: {
        patches: [
          {
            path: 'metadata.annotations["platform.test/tier"]',
            expression: '"host-" + value',
            reverseExpression: 'value.replace(/^host-/, "")',
          },
          // Only objects carrying this annotation evaluate it: it never finishes.
          { path: 'metadata.annotations["platform.test/hostile"]', expression: '(() => { for (;;) {} })()' },
        ],
      },
    },
  },
};

export const configYaml = (config: unknown = TEST_CONFIG) => stringify(config);

const platformBin = fileURLToPath(new URL('../../bin/platform.js', import.meta.url));

export interface SpawnedSyncer {
  child: ChildProcess;
  healthPort: number;
  metrics(): Promise<string>;
  /** SIGKILL (no graceful stop) and wait for the exit. */
  kill(): Promise<void>;
}

/** `platform syncer` as a child process; resolves once /readyz answers 200. */
export async function spawnSyncer(
  args: {
    virtualKubeconfig: string;
    hostKubeconfig: string;
    hostNamespace: string;
    name: string;
    config: string;
  },
  logPath: string,
  env: NodeJS.ProcessEnv = {},
): Promise<SpawnedSyncer> {
  const healthPort = await freePort();
  const log = createWriteStream(logPath, { flags: 'a' });
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      platformBin,
      'syncer',
      '--virtual-kubeconfig',
      args.virtualKubeconfig,
      '--host-kubeconfig',
      args.hostKubeconfig,
      '--host-namespace',
      args.hostNamespace,
      '--name',
      args.name,
      '--config',
      args.config,
      '--health-port',
      String(healthPort),
      '--health-host',
      '127.0.0.1',
      '--log-level',
      'info',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await eventually(
    async () => {
      if (child.exitCode !== null) {
        throw new Error(
          `platform syncer exited with ${child.exitCode}:\n${readFileSync(logPath, 'utf8').slice(-3000)}`,
        );
      }
      return fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
    },
    60_000,
    'the syncer to become ready',
  );
  return {
    child,
    healthPort,
    metrics: () => fetch(`http://127.0.0.1:${healthPort}/metrics`).then((r) => r.text()),
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The virtual cluster, host namespace and `platform syncer` process of one describe block. */
export interface SyncerEnvironment {
  /** The host namespace the syncer writes to. */
  hostNamespace: () => string;
  /** The virtual cluster's name (the syncer's `--name`). */
  vcName: string;
  /** A client on the run's host cluster. */
  host: Api;
  /** A client on the virtual cluster; set once beforeAll ran. */
  virtual: () => Api;
  /** The running syncer; set once beforeAll ran. */
  syncer: () => SpawnedSyncer;
  /** The host name of the virtual object `name` in the virtual namespace `apps`. */
  hostName: (name: string) => string;
  /** Spawns the syncer again (after `syncer().kill()`), with the same arguments. */
  restart: () => Promise<void>;
}

/**
 * For one describe block: a host namespace (`namespacePrefix`), a second apiserver as the virtual
 * cluster with the namespace `apps`, and `platform syncer` between them as a child process with
 * `config` (and `env`), started in beforeAll and killed in afterAll. The syncer's log is kept
 * (and its path printed) when a test failed, removed otherwise.
 */
export function useSpawnedSyncer(
  namespacePrefix: string,
  config: unknown = TEST_CONFIG,
  env: NodeJS.ProcessEnv = {},
): SyncerEnvironment {
  const hostNamespace = useNamespace(namespacePrefix);
  const startCluster = useExtraClusters();
  const vcName = uniqueName('vc');
  const dir = mkdtempSync(join(tmpdir(), `platform-${namespacePrefix}-e2e-`));
  const logPath = join(dir, 'syncer.log');
  const configPath = join(dir, 'vcluster.yaml');
  const host = new Api(hostKubeConfig());
  let virtualKubeconfig: string | undefined;
  let virtual: Api | undefined;
  let syncer: SpawnedSyncer | undefined;

  const start = async () => {
    syncer = await spawnSyncer(
      {
        virtualKubeconfig: virtualKubeconfig as string,
        hostKubeconfig: hostKubeconfigPath(),
        hostNamespace: hostNamespace(),
        name: vcName,
        config: configPath,
      },
      logPath,
      env,
    );
  };

  beforeAll(async () => {
    const cluster = await startCluster({ name: uniqueName('vc') });
    virtualKubeconfig = cluster.kubeconfigPath;
    virtual = new Api(kubeConfigFor(cluster));
    await virtual.createNamespace('apps');
    writeFileSync(configPath, configYaml(config));
    await start();
  });
  let failed = false;
  afterEach((ctx) => {
    if (ctx.task.result?.state !== 'fail') return;
    failed = true;
    console.error(`the syncer's log: ${logPath}`);
  });
  afterAll(async () => {
    await syncer?.kill();
    virtual?.close();
    host.close();
    // The syncer's log stays after a failure, for reading; it goes otherwise.
    if (!failed) rmSync(dir, { recursive: true, force: true });
  });

  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is not set before beforeAll ran`);
    return value;
  };
  return {
    hostNamespace,
    vcName,
    host,
    virtual: () => started(virtual, 'the virtual cluster client'),
    syncer: () => started(syncer, 'the syncer'),
    hostName: (name) => hostNameLong(name, 'apps', vcName),
    restart: start,
  };
}
