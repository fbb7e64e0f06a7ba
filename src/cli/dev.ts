import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Command } from 'commander';
import pino from 'pino';
import { CONTROLLER_NAMES } from '../controllers/index.ts';
import { ensureControlPlaneBinary, repoRoot } from '../dev/binaries.ts';
import { bootstrapAdmin } from '../dev/bootstrap.ts';
import { type Cluster, ControlPlane } from '../dev/controlplane.ts';
import { waitUntilGatewayAccepts } from '../dev/gateway-ready.ts';
import { ensureGatewayTls } from '../dev/gateway-tls.ts';
import { installCrds } from '../dev/install-crds.ts';
import { installPlatformRoles } from '../dev/install-rbac.ts';
import { type PersistentPort, persistentPort } from '../dev/ports.ts';
import { BASE_PATH } from '../gateway/index.ts';
import { PidFile } from '../provision/child-processes.ts';
import { isAlreadyExists } from '../runtime/errors.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { defaultOperatorOptions, type RunningOperator, startOperator } from './operator.ts';

export interface DevOptions {
  stateDir: string;
  reset: boolean;
}

const PLATFORM_NAMESPACE = 'platform-system';
/** How long a graceful stop may take before we give up on it. */
const STOP_TIMEOUT_MS = 30_000;

const progress = (message: string) => process.stderr.write(`platform dev: ${message}\n`);

/**
 * `platform dev`: the whole platform on a local control plane, with a bootstrap platform admin.
 *
 * State lives under the state directory (default `.platform/dev/`), so a restart finds everything
 * it had; `--reset` starts from nothing:
 *
 *   controlplane/     etcd data, PKI, logs and pids of the control plane (src/dev/controlplane.ts)
 *   gateway/          the gateway's local CA and serving certificate (src/dev/gateway-tls.ts)
 *   ports.json        the fixed ports of the host apiserver and the gateway (src/dev/ports.ts)
 *   host.kubeconfig   cluster admin of the host apiserver
 *   admin.kubeconfig  platform admin through the gateway, with the admin's access key (0600)
 *   operator.log      the operator's log
 *
 * Both kubeconfigs stay valid across restarts: the ports, certificates and the admin key are kept.
 * Progress goes to stderr, the final summary to stdout. SIGINT/SIGTERM stop everything and exit 0;
 * a second one exits at once. The control plane's children die with us even on SIGKILL
 * (src/provision/child-processes.ts).
 */
export function devCommand(): Command {
  return new Command('dev')
    .description(
      'Run the whole platform locally (control plane, CRDs, operator with webhooks, gateway and syncer) with a bootstrap admin',
    )
    .option(
      '--state-dir <dir>',
      'where state, certificates and kubeconfigs live',
      join(repoRoot, '.platform', 'dev'),
    )
    .option('--reset', 'discard the state of earlier runs and start from nothing', false)
    .action(async (options: DevOptions) => {
      await runDev(options);
    });
}

/** A path as the user should type it: relative to the working directory when inside it. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? path : rel;
}

/** What to tell about a fixed port that could not be kept, if anything. */
function reportReplacedPort(what: string, kubeconfig: string, port: PersistentPort): void {
  if (port.replaced !== undefined)
    progress(
      `the ${what} port ${port.replaced} of the last run is taken; using ${port.port} (${kubeconfig} is rewritten)`,
    );
}

/** The host apiserver (with a controller manager) on its port of the last run, its admin kubeconfig copied to `hostKubeconfig`. */
async function startHost(plane: ControlPlane, portsFile: string, hostKubeconfig: string): Promise<Cluster> {
  const apiServerPort = await persistentPort(portsFile, 'apiserver');
  reportReplacedPort('apiserver', 'host.kubeconfig', apiServerPort);
  const host = await plane.startCluster({
    name: 'host',
    controllerManager: true,
    port: apiServerPort.port,
  });
  writeFileSync(hostKubeconfig, readFileSync(host.kubeconfigPath), { mode: 0o600 });
  chmodSync(hostKubeconfig, 0o600);
  return host;
}

/** Installs the CRDs, the platform's roles and namespace on the host; answers a client writing as `platform dev`. */
async function installPlatformBasics(kubeConfig: KubeConfig): Promise<KubeClient> {
  progress('installing the CRDs, the project roles and the syncer roles');
  await installCrds(kubeConfig);
  const api = new KubeClient(kubeConfig, { fieldManager: fieldManagers.dev });
  await installPlatformRoles(api);
  await kubeConfig
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } }, fieldManager: fieldManagers.dev })
    .catch((err: unknown) => {
      if (!isAlreadyExists(err)) throw err; // it exists from an earlier run
    });
  return api;
}

const operatorLogOf = (stateDir: string) => join(stateDir, 'operator.log');

/**
 * The operator of a local platform: every controller, the admission webhooks and the gateway on
 * `gatewayPort`; its JSON log to `operatorLogOf(stateDir)`, errors to stderr too (stdout stays
 * the summary).
 * It provisions virtual clusters as child processes of the control-plane `binary`, their state
 * under `stateDir/virtualclusters`: stopping and starting `platform dev` keeps each of them and
 * its objects (the controller starts them again).
 */
function startDevOperator(
  hostKubeconfig: string,
  gatewayPort: number,
  certDir: string,
  stateDir: string,
  binary: string,
): Promise<RunningOperator> {
  return startOperator(
    defaultOperatorOptions({
      kubeconfig: hostKubeconfig,
      namespace: PLATFORM_NAMESPACE,
      // Every controller, the virtual-cluster syncers (virtualcluster) included.
      controllers: CONTROLLER_NAMES,
      // One replica per state directory (a second `platform dev` on it reaps the first's
      // control plane), so there is nobody to elect against; with election, a restart after a
      // crash would wait out the old lease before reconciling.
      leaderElect: false,
      healthPort: 0,
      healthHost: '127.0.0.1',
      webhookHost: '127.0.0.1',
      webhookPort: 0,
      webhookEndpoint: 'local',
      gatewayHost: '127.0.0.1',
      gatewayPort,
      gatewayCertDir: certDir,
      provisioner: 'processes',
      provisionerStateDir: stateDir,
      controlPlaneBinary: binary,
    }),
    // The operator logs JSON: all of it to a file, errors to stderr too; stdout stays the summary.
    pino(
      { level: 'info', base: { component: 'operator' } },
      pino.multistream([
        { level: 'info', stream: pino.destination({ dest: operatorLogOf(stateDir), sync: true }) },
        { level: 'error', stream: process.stderr },
      ]),
    ),
  );
}

/** The summary on stdout once the platform runs: where everything is and what to try. */
function printRunning(running: {
  kubectl: string;
  gatewayServer: string;
  hostServer: string;
  operator: RunningOperator;
  operatorLog: string;
  adminKubeconfig: string;
  hostKubeconfig: string;
  stateDir: string;
}): void {
  const {
    kubectl,
    gatewayServer,
    hostServer,
    operator,
    operatorLog,
    adminKubeconfig,
    hostKubeconfig,
    stateDir,
  } = running;
  process.stdout.write(
    [
      '',
      'The platform is running.',
      `  management gateway  ${gatewayServer}`,
      `  Kubernetes          ${hostServer}`,
      `  operator            metrics http://127.0.0.1:${operator.manager.healthPort}/metrics, admission webhooks on port ${operator.webhooks?.server.port}, log ${shown(operatorLog)}`,
      '',
      'Kubeconfigs:',
      `  ${shown(adminKubeconfig)}  platform admin "admin" through the gateway (keep it private: it holds the access key)`,
      `  ${shown(hostKubeconfig)}   cluster admin of the host apiserver`,
      '',
      'Try:',
      `  kubectl --kubeconfig ${shown(adminKubeconfig)} get sharedsecrets.management.platform -A`,
      `  kubectl --kubeconfig ${shown(adminKubeconfig)} get ownedaccesskeys.management.platform`,
      `  kubectl --kubeconfig ${shown(hostKubeconfig)} get namespaces`,
      `  kubectl --kubeconfig ${shown(hostKubeconfig)} get platform -A   (every platform object)`,
      `  (a kubectl of the same version: ${kubectl})`,
      '',
      `Press Ctrl-C to stop; the state stays in ${shown(stateDir)} (use --reset to start from nothing).`,
      '',
    ].join('\n'),
  );
}

/**
 * On SIGINT or SIGTERM, stops the operator and then the control plane `running` answers (what has
 * started so far) and exits; a second signal, or a stop that takes too long, forces the exit.
 * Answers whether a stop has begun.
 */
function stopOnSignals(running: () => { plane?: ControlPlane; operator?: RunningOperator }): () => boolean {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      progress('forced to stop');
      process.exit(130); // the exit hook of src/provision/child-processes.ts still kills the children
    }
    stopping = true;
    progress(`${signal}: stopping (press Ctrl-C again to force)`);
    setTimeout(() => {
      progress(`stopping took over ${STOP_TIMEOUT_MS / 1000}s; forcing`);
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
    void (async () => {
      const { plane, operator } = running();
      await operator?.stop().catch((err: unknown) => progress(`stopping the operator: ${String(err)}`));
      await plane?.stop();
      progress('stopped');
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  return () => stopping;
}

/** Deletes the state of earlier runs, after stopping a `platform dev` still running on it. */
function resetState(stateDir: string, controlPlaneDir: string): void {
  progress(`resetting ${shown(stateDir)}`);
  // A platform dev still running on this state dir would otherwise keep running without its files.
  if (existsSync(join(controlPlaneDir, 'pids.json')))
    new PidFile(join(controlPlaneDir, 'pids.json')).reapStale();
  rmSync(stateDir, { recursive: true, force: true });
}

export async function runDev({ stateDir, reset }: DevOptions): Promise<void> {
  const controlPlaneDir = join(stateDir, 'controlplane');
  if (reset) resetState(stateDir, controlPlaneDir);
  mkdirSync(stateDir, { recursive: true });

  let plane: ControlPlane | undefined;
  let operator: RunningOperator | undefined;
  // Installed before anything starts, so a signal during startup also cleans up.
  const stopping = stopOnSignals(() => ({ plane, operator }));

  const binary = await ensureControlPlaneBinary((line) => progress(line.replace(/^controlplane: /, '')));
  try {
    plane = await ControlPlane.start({ stateDir: controlPlaneDir, binary, persist: true, log: progress });
    const portsFile = join(stateDir, 'ports.json');
    // Asked only now: starting the control plane reaped whatever an earlier run left listening.
    const hostKubeconfig = join(stateDir, 'host.kubeconfig');
    const host = await startHost(plane, portsFile, hostKubeconfig);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(hostKubeconfig);
    const api = await installPlatformBasics(kubeConfig);

    const tls = await ensureGatewayTls(join(stateDir, 'gateway'));
    if (tls.plan.action === 'create-ca')
      progress(`created the gateway's local CA and certificate (${tls.plan.reason})`);
    if (tls.plan.action === 'issue-serving')
      progress(`issued a new gateway certificate (${tls.plan.reason})`);
    const gatewayPort = await persistentPort(portsFile, 'gateway');
    reportReplacedPort('gateway', 'admin.kubeconfig', gatewayPort);
    const gatewayServer = `https://127.0.0.1:${gatewayPort.port}${BASE_PATH}`;
    progress(
      `starting the operator: controllers ${CONTROLLER_NAMES.join(', ')}; admission webhooks; the gateway on https://127.0.0.1:${gatewayPort.port}`,
    );
    const operatorLog = operatorLogOf(stateDir);
    operator = await startDevOperator(hostKubeconfig, gatewayPort.port, tls.certDir, stateDir, binary);
    const gateway = operator.gateway;
    if (!gateway) throw new Error('the operator started without its gateway');

    progress('bootstrapping the platform admin');
    const adminKubeconfig = join(stateDir, 'admin.kubeconfig');
    const admin = await bootstrapAdmin({
      api,
      platformNamespace: PLATFORM_NAMESPACE,
      gatewayServer,
      gatewayCaPem: tls.caPem,
      kubeconfigPath: adminKubeconfig,
      log: progress,
    });
    progress(
      admin.kubeconfigWritten
        ? `wrote ${shown(adminKubeconfig)}`
        : `kept ${shown(adminKubeconfig)} (its key is still valid)`,
    );
    progress('waiting until the gateway accepts the admin key');
    await waitUntilGatewayAccepts({
      authenticator: gateway.gateway.authenticator,
      pepper: admin.pepper,
      accessKey: admin.accessKey,
      server: gatewayServer,
      caPem: tls.caPem,
    });

    printRunning({
      kubectl: join(dirname(binary), 'kubectl'),
      gatewayServer,
      hostServer: host.server,
      operator,
      operatorLog,
      adminKubeconfig,
      hostKubeconfig,
      stateDir,
    });
  } catch (err) {
    if (stopping()) return; // a signal arrived mid-start; stop() exits when done
    await operator?.stop().catch(() => {});
    await plane?.stop();
    throw err;
  }
  // Stay up until a signal arrives: the children are unref'd, so hold the event loop open.
  setInterval(() => {}, 1 << 30);
}
