import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, inject } from 'vitest';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { bootstrapAdmin } from '../../src/dev/bootstrap.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { ensureGatewayTls } from '../../src/dev/gateway-tls.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { freePort } from '../../src/dev/ports.ts';
import { BASE_PATH } from '../../src/gateway/index.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { kubeConfigFor, kubectl, uniqueName, useExtraClusters } from './cluster.ts';
import { installCrds } from './crds.ts';
import { eventually } from './wait.ts';

/**
 * The whole platform as one `platform operator` process, as a small installation runs it: every
 * controller (the virtualcluster controller with the processes provisioner over a state
 * directory of the test's), the admission webhooks and the HTTPS gateway, on a kube-apiserver of
 * its own (with kube-controller-manager: the project roles' aggregation, garbage collection),
 * with the chart's project and syncer roles and a bootstrap platform admin (as `platform dev`
 * makes one). The operator can be stopped and started again on the same ports and state: a
 * restart of the platform while its cluster stays up. Everything is ended after the block.
 */

const platformBin = fileURLToPath(new URL('../../bin/platform.js', import.meta.url));
const PLATFORM_NAMESPACE = 'platform-system';

export interface PlatformProcess {
  readonly cluster: Cluster;
  readonly kc: KubeConfig;
  /** Cluster admin of the platform's cluster. */
  readonly hostKubeconfig: string;
  /** The test's directory: the provisioner's state, kubeconfigs, the operator's log. */
  readonly dir: string;
  /** The gateway's URL without a path, `https://127.0.0.1:<port>`. */
  readonly url: string;
  readonly caPem: string;
  /** The platform admin's kubeconfig through the gateway. */
  readonly adminKubeconfig: string;
  /** Where the processes provisioner keeps virtual cluster `<namespace>/<name>`. */
  instanceDir(namespace: string, name: string): string;
  /** Writes `<dir>/<name>.kubeconfig`: `server` (default the management API) with `token`; returns its path. */
  kubeconfig(name: string, token: string, server?: string): string;
  /** Starts the operator (again) and waits until it is ready; throws if it is running. */
  start(): Promise<void>;
  /** Ends the operator with `signal` and waits for its exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** The last `chars` of the operator's log. */
  logTail(chars?: number): string;
}

export function usePlatformProcess(prefix: string): () => PlatformProcess {
  const startCluster = useExtraClusters();
  let env: PlatformProcess | undefined;
  let operator: { child: ChildProcess; exited: Promise<unknown> } | undefined;
  let dir = '';
  beforeAll(async () => {
    const cluster = await startCluster({ name: uniqueName(prefix), controllerManager: true });
    const kc = kubeConfigFor(cluster);
    dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
    await installCrds(kc);
    const api = new KubeClient(kc);
    await installPlatformRoles(api);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    const tls = await ensureGatewayTls(join(dir, 'gateway'));
    const [gatewayPort, webhookPort, healthPort] = [await freePort(), await freePort(), await freePort()];
    const url = `https://127.0.0.1:${gatewayPort}`;
    const adminKubeconfig = join(dir, 'admin.kubeconfig');
    // Before the operator runs (no admission configuration yet): the admin User, the binding of
    // platform admins, the pepper and a key stored hashed, known to the gateway's first list.
    await bootstrapAdmin({
      api,
      platformNamespace: PLATFORM_NAMESPACE,
      gatewayServer: `${url}${BASE_PATH}`,
      gatewayCaPem: tls.caPem,
      kubeconfigPath: adminKubeconfig,
      log: () => {},
    });
    const logPath = join(dir, 'operator.log');
    const args = [
      ...['--kubeconfig', cluster.kubeconfigPath, '--namespace', PLATFORM_NAMESPACE, '--no-leader-elect'],
      ...['--health-host', '127.0.0.1', '--health-port', String(healthPort)],
      ...[
        '--webhook-host',
        '127.0.0.1',
        '--webhook-port',
        String(webhookPort),
        '--webhook-endpoint',
        'local',
      ],
      ...[
        '--gateway-host',
        '127.0.0.1',
        '--gateway-port',
        String(gatewayPort),
        '--gateway-cert-dir',
        tls.certDir,
      ],
      ...['--provisioner', 'processes', '--provisioner-state-dir', dir],
      ...['--control-plane-binary', inject('controlPlaneBinary')],
    ];
    const logTail = (chars = 3000) =>
      existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-chars) : '';
    const start = async () => {
      if (operator) throw new Error('the operator is running');
      const log = createWriteStream(logPath, { flags: 'a' });
      const child = spawn(process.execPath, ['--no-node-snapshot', platformBin, 'operator', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout?.pipe(log);
      child.stderr?.pipe(log);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      operator = { child, exited };
      await eventually(
        async () => {
          if (child.exitCode !== null || child.signalCode !== null)
            throw new Error(`the operator exited (${child.exitCode ?? child.signalCode}): ${logTail()}`);
          return fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
            (r) => r.ok,
            () => false,
          );
        },
        120_000,
        'the operator ready',
      );
      // Its caches are synced (the admin key was listed): one request through the gateway.
      const listed = await kubectl(['get', 'virtualclustertemplates.management.platform'], {
        kubeconfig: adminKubeconfig,
      });
      if (listed.code !== 0) throw new Error(`the gateway refused the admin: ${listed.stderr}`);
    };
    env = {
      cluster,
      kc,
      hostKubeconfig: cluster.kubeconfigPath,
      dir,
      url,
      caPem: tls.caPem,
      adminKubeconfig,
      instanceDir: (namespace, name) => join(dir, 'virtualclusters', namespace, name),
      kubeconfig: (name, token, server = `${url}${BASE_PATH}`) => {
        const path = join(dir, `${name}.kubeconfig`);
        writeFileSync(path, kubeConfigYaml({ name, server, caPem: tls.caPem, credentials: { token } }), {
          mode: 0o600,
        });
        return path;
      },
      start,
      stop: async (signal = 'SIGTERM') => {
        if (!operator) return;
        operator.child.kill(signal);
        await operator.exited;
        operator = undefined;
      },
      logTail,
    };
    await start();
  }, 300_000);
  afterAll(async () => {
    await env?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    if (!env) throw new Error('the platform is not started');
    return env;
  };
}
