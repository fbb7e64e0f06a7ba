import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CertificateAndKey } from '../pki/certificates.ts';
import {
  ControlPlaneStartError,
  logTail,
  ManagedProcess,
  PidFile,
  retryWhenPortTaken,
} from '../provision/child-processes.ts';
import { httpOk, httpsOk } from '../provision/health-probes.ts';
import {
  adminKubeconfig,
  DAY,
  loadOrCreateAdminToken,
  loadOrCreatePki,
  loadOrIssue,
} from './controlplane-files.ts';
import { freePort } from './ports.ts';

/** Where tests and benchmarks have always found it. */
export { freePort };

/**
 * A local Kubernetes control plane for tests and `platform dev`: one etcd and any number of
 * kube-apiservers sharing it under their own `--etcd-prefix` (a host cluster, a virtual cluster,
 * a connected cluster...), each optionally with a kube-controller-manager. Everything listens on
 * 127.0.0.1 and lives under `stateDir`:
 *
 *   pki/            CA and service-account keys shared by all clusters
 *   etcd/           etcd data
 *   clusters/<name> serving certificate, admin token, admin.kubeconfig
 *   logs/           one log per process; its tail is shown when a start fails
 *   pids.json       every child, so the next start can reap what a killed launcher left
 */

export interface ControlPlaneOptions {
  stateDir: string;
  /** The multicall binary built by hack/controlplane/build.sh. */
  binary: string;
  /** Keep the PKI and etcd data of a previous run (platform dev); otherwise start from nothing. */
  persist?: boolean;
  /**
   * Use this running etcd instead of starting one (for example a test file adding a cluster to
   * the test run's etcd under its own prefix). The etcd is then not stopped by `stop()`.
   */
  etcdUrl?: string;
  /** How long each component may take to become ready. */
  readyTimeoutMs?: number;
  /** Progress messages. */
  log?: (message: string) => void;
}

export interface ClusterOptions {
  /** DNS-label name; also the etcd prefix `/<name>/registry`. */
  name: string;
  /** Start a kube-controller-manager (garbage collection, namespace deletion, CSR signing). */
  controllerManager?: boolean;
  /** Fixed secure port; a free one is chosen when absent. */
  port?: number;
  /** kubeconfig-format file content for `--authentication-token-webhook-config-file` (TokenReview). */
  tokenWebhookConfig?: string;
  /** AuthenticationConfiguration YAML for `--authentication-config` (structured JWT authenticators). */
  authenticationConfig?: string;
  /** Overrides the etcd the apiserver talks to (tests of failure paths). */
  etcdServers?: string;
  /**
   * Serve the data of another cluster: its etcd prefix (default `/<name>/registry`). Two
   * apiservers on one prefix are one cluster with two API endpoints, as in an HA control plane.
   */
  etcdPrefix?: string;
  extraApiServerArgs?: string[];
}

export interface Cluster {
  readonly name: string;
  /** https://127.0.0.1:<port> */
  readonly server: string;
  readonly port: number;
  /** Admin kubeconfig (token in system:masters), written to disk. */
  readonly kubeconfigPath: string;
  readonly adminToken: string;
  /** CA that signed the serving certificate (and signs CSRs when a controller manager runs). */
  readonly caPem: string;
  readonly apiServer: ManagedProcess;
  readonly controllerManager?: ManagedProcess;
  /** Stops this cluster's processes (its data stays in etcd). */
  stop(): Promise<void>;
}

export class ControlPlane {
  readonly etcdUrl: string;
  readonly ca: CertificateAndKey;
  private readonly clusters = new Map<string, Cluster>();
  private readonly processes: ManagedProcess[] = [];
  private stopped = false;

  private constructor(
    private readonly options: Required<Omit<ControlPlaneOptions, 'persist' | 'etcdUrl'>>,
    private readonly etcd: ManagedProcess | undefined,
    etcdUrl: string,
    ca: CertificateAndKey,
    private readonly serviceAccountKeys: { publicPath: string; privatePath: string },
    private readonly pidFile: PidFile,
  ) {
    this.etcdUrl = etcdUrl;
    this.ca = ca;
    if (etcd) this.processes.push(etcd);
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const opts = {
      readyTimeoutMs: 120_000,
      log: () => {},
      ...options,
    };
    const { stateDir } = opts;
    mkdirSync(stateDir, { recursive: true });
    const pidFile = new PidFile(join(stateDir, 'pids.json'));
    const reaped = pidFile.reapStale();
    if (reaped > 0) opts.log(`stopped ${reaped} process(es) left behind by an earlier run`);
    if (!opts.persist) {
      for (const sub of ['pki', 'etcd', 'clusters', 'logs'])
        rmSync(join(stateDir, sub), { recursive: true, force: true });
    }
    for (const sub of ['pki', 'etcd', 'clusters', 'logs'])
      mkdirSync(join(stateDir, sub), { recursive: true });
    if (!existsSync(opts.binary)) {
      throw new ControlPlaneStartError(
        `control-plane binary not found at ${opts.binary} (build it with hack/controlplane/build.sh)`,
        '',
      );
    }

    const { ca, serviceAccountKeys } = await loadOrCreatePki(join(stateDir, 'pki'));

    if (opts.etcdUrl) {
      if (!(await httpOk(`${opts.etcdUrl}/health`)))
        throw new ControlPlaneStartError(`etcd at ${opts.etcdUrl} is not healthy`, '');
      return new ControlPlane(opts, undefined, opts.etcdUrl, ca, serviceAccountKeys, pidFile);
    }
    return retryWhenPortTaken(async () => {
      opts.log('starting etcd');
      const [clientPort, peerPort] = [await freePort(), await freePort()];
      const etcdUrl = `http://127.0.0.1:${clientPort}`;
      const etcd = await ManagedProcess.start({
        name: 'etcd',
        command: opts.binary,
        args: [
          'etcd',
          `--data-dir=${join(stateDir, 'etcd')}`,
          `--listen-client-url=${etcdUrl}`,
          `--listen-peer-url=http://127.0.0.1:${peerPort}`,
          // Throwaway clusters (tests, platform dev's host): speed over the last writes of a crash.
          // Provisioned virtual clusters' etcds (src/provision/control-plane.ts) sync every write.
          '--unsafe-no-fsync',
        ],
        logPath: join(stateDir, 'logs', 'etcd.log'),
      });
      const plane = new ControlPlane(opts, etcd, etcdUrl, ca, serviceAccountKeys, pidFile);
      plane.recordPids();
      try {
        await plane.waitReady(etcd, () => httpOk(`${etcdUrl}/health`));
      } catch (err) {
        await plane.stop();
        throw err;
      }
      return plane;
    });
  }

  cluster(name: string): Cluster | undefined {
    return this.clusters.get(name);
  }

  async startCluster(clusterOptions: ClusterOptions): Promise<Cluster> {
    const { name } = clusterOptions;
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name))
      throw new Error(`cluster name ${JSON.stringify(name)} is not a DNS label`);
    if (this.clusters.has(name)) throw new Error(`cluster ${name} is already running`);
    const { stateDir, binary } = this.options;
    const dir = join(stateDir, 'clusters', name);
    mkdirSync(dir, { recursive: true });

    const serving = await loadOrIssue(dir, 'apiserver', this.ca, {
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      ipAddresses: ['127.0.0.1', '10.0.0.1'],
      usage: 'server',
      validForSeconds: 365 * DAY,
    });
    const tokenFile = join(dir, 'tokens.csv');
    const adminToken = loadOrCreateAdminToken(tokenFile);

    const startApiServer = async () => {
      const port = clusterOptions.port ?? (await freePort());
      const server = `https://127.0.0.1:${port}`;
      const args = this.apiServerArgs(clusterOptions, dir, port, serving, tokenFile);
      this.options.log(`starting kube-apiserver "${name}" on ${server}`);
      const apiServer = await ManagedProcess.start({
        name: `kube-apiserver "${name}"`,
        command: binary,
        args,
        logPath: join(stateDir, 'logs', `${name}-apiserver.log`),
      });
      this.processes.push(apiServer);
      this.recordPids();
      try {
        await this.waitReady(apiServer, () => httpsOk(`${server}/readyz`, this.ca.certPem, adminToken));
      } catch (err) {
        await apiServer.stop();
        throw err;
      }
      return { port, server, apiServer };
    };
    // A port the caller chose is not picked again.
    const { port, server, apiServer } =
      clusterOptions.port === undefined ? await retryWhenPortTaken(startApiServer) : await startApiServer();

    const kubeconfigPath = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfigPath, adminKubeconfig(name, server, this.ca.certPem, adminToken), {
      mode: 0o600,
    });

    let controllerManager: ManagedProcess | undefined;
    if (clusterOptions.controllerManager) {
      controllerManager = await this.startControllerManager(name, dir, kubeconfigPath);
    }

    const cluster: Cluster = {
      name,
      server,
      port,
      kubeconfigPath,
      adminToken,
      caPem: this.ca.certPem,
      apiServer,
      ...(controllerManager ? { controllerManager } : {}),
      stop: async () => {
        await controllerManager?.stop();
        await apiServer.stop();
        this.clusters.delete(name);
      },
    };
    this.clusters.set(name, cluster);
    return cluster;
  }

  /**
   * The command line of the cluster's kube-apiserver; writes the token webhook and
   * authentication configurations it names into the cluster's directory `dir`.
   */
  private apiServerArgs(
    clusterOptions: ClusterOptions,
    dir: string,
    port: number,
    serving: { certPath: string; keyPath: string },
    tokenFile: string,
  ): string[] {
    const { name } = clusterOptions;
    const pki = join(this.options.stateDir, 'pki');
    const args = [
      'kube-apiserver',
      `--etcd-servers=${clusterOptions.etcdServers ?? this.etcdUrl}`,
      `--etcd-prefix=${clusterOptions.etcdPrefix ?? `/${name}/registry`}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${dir}`,
      `--tls-cert-file=${serving.certPath}`,
      `--tls-private-key-file=${serving.keyPath}`,
      `--client-ca-file=${join(pki, 'ca.crt')}`,
      `--token-auth-file=${tokenFile}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=https://kubernetes.default.svc/${name}`,
      `--service-account-key-file=${this.serviceAccountKeys.publicPath}`,
      `--service-account-signing-key-file=${this.serviceAccountKeys.privatePath}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      // Loopback addresses are not valid Endpoints, so the apiserver must not publish itself.
      '--endpoint-reconciler-type=none',
      '--profiling=false',
    ];
    if (clusterOptions.tokenWebhookConfig !== undefined) {
      const path = join(dir, 'token-webhook.kubeconfig');
      writeFileSync(path, clusterOptions.tokenWebhookConfig, { mode: 0o600 });
      // A short cache keeps revocation tests meaningful.
      args.push(
        `--authentication-token-webhook-config-file=${path}`,
        '--authentication-token-webhook-cache-ttl=1s',
      );
    }
    if (clusterOptions.authenticationConfig !== undefined) {
      const path = join(dir, 'authentication-config.yaml');
      writeFileSync(path, clusterOptions.authenticationConfig);
      args.push(`--authentication-config=${path}`);
    }
    args.push(...(clusterOptions.extraApiServerArgs ?? []));
    return args;
  }

  private async startControllerManager(
    name: string,
    dir: string,
    kubeconfigPath: string,
  ): Promise<ManagedProcess> {
    const pki = join(this.options.stateDir, 'pki');
    const healthPort = await freePort();
    this.options.log(`starting kube-controller-manager for "${name}"`);
    const process = await ManagedProcess.start({
      name: `kube-controller-manager "${name}"`,
      command: this.options.binary,
      args: [
        'kube-controller-manager',
        `--kubeconfig=${kubeconfigPath}`,
        `--authentication-kubeconfig=${kubeconfigPath}`,
        `--authorization-kubeconfig=${kubeconfigPath}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${healthPort}`,
        `--cert-dir=${join(dir, 'controller-manager')}`,
        '--leader-elect=false',
        '--use-service-account-credentials=false',
        `--service-account-private-key-file=${this.serviceAccountKeys.privatePath}`,
        `--root-ca-file=${join(pki, 'ca.crt')}`,
        `--cluster-signing-cert-file=${join(pki, 'ca.crt')}`,
        `--cluster-signing-key-file=${join(pki, 'ca.key')}`,
        // Only what a control plane without nodes needs: GC, namespace deletion, CSRs, service
        // accounts, ClusterRole aggregation (admin/edit/view and the roles built on them), and
        // ResourceQuota usage (a Project's quotas: the apiserver refuses creates a quota covers
        // until this controller has counted what there is).
        '--controllers=garbage-collector-controller,namespace-controller,certificatesigningrequest-signing-controller,certificatesigningrequest-cleaner-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,resourcequota-controller',
      ],
      logPath: join(this.options.stateDir, 'logs', `${name}-controller-manager.log`),
    });
    this.processes.push(process);
    this.recordPids();
    try {
      await this.waitReady(process, () =>
        httpsOk(`https://127.0.0.1:${healthPort}/healthz`, undefined, undefined),
      );
    } catch (err) {
      await process.stop();
      throw err;
    }
    return process;
  }

  /** Stops every process this control plane started, clusters first, etcd last. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const others = this.processes.filter((p) => p !== this.etcd).reverse();
    await Promise.all(others.map((p) => p.stop()));
    await this.etcd?.stop();
    this.clusters.clear();
    this.pidFile.record([]);
  }

  private recordPids(): void {
    this.pidFile.record(
      this.processes.filter((p) => p.running).map((p) => ({ pid: p.pid, command: this.options.binary })),
    );
  }

  /**
   * Polls `probe` until it succeeds. Fails at once, with the log tail, when the process exits,
   * and after `readyTimeoutMs` when it never becomes ready.
   */
  private async waitReady(process: ManagedProcess, probe: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + this.options.readyTimeoutMs;
    while (Date.now() < deadline) {
      if (!process.running) {
        const tail = await logTail(process.logPath);
        const portTaken = /address already in use/.test(tail);
        const hint = portTaken ? ' (its port is already in use)' : '';
        throw new ControlPlaneStartError(
          `${process.name} ${process.exitDescription} before it became ready${hint}`,
          tail,
          portTaken,
        );
      }
      if (await probe()) return;
      await sleep(250);
    }
    const tail = await logTail(process.logPath);
    await process.stop(2_000);
    throw new ControlPlaneStartError(
      `${process.name} did not become ready within ${Math.round(this.options.readyTimeoutMs / 1000)}s`,
      tail,
    );
  }
}
