import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { type Clock, type Random, systemClock, systemRandom } from './clock.ts';
import { Cluster, type InformerDefaults } from './cluster.ts';
import { Controller, type ControllerOptions } from './controller.ts';
import { LeaderElectionLostError } from './errors.ts';
import { FencedKubeApi, LeaseTerms, termController, type WriteFence } from './fencing.ts';
import { type HealthServer, type ReadinessReport, startHealthServer } from './health-server.ts';
import type { Informer, InformerSelector } from './informer.ts';
import type { KubeApi } from './kube-api.ts';
import type { ResourceRef } from './kube-client.ts';
import { type LeaderElectionConfig, LeaderElector } from './leader-election.ts';
import { RuntimeMetrics } from './metrics.ts';
import type { IndexFunc } from './store.ts';

export interface ManagerOptions {
  /** The manager's own cluster: leases live here, `informer()` reads it. */
  api: KubeApi;
  /** Its name in logs and readiness (default `host`). */
  clusterName?: string;
  /** The system's when absent (tests pass a fake). */
  clock?: Clock;
  random?: Random;
  logger: Logger;
  /** Where the runtime's metrics go (and /metrics reads): a new one when absent. */
  registry?: Registry;
  /** Omit to run every controller without leader election (single replica, tests). */
  leaderElection?: LeaderElectionConfig;
  /** Port of the /metrics, /healthz, /readyz server; omit for none, 0 for any free port. */
  healthPort?: number;
  healthHost?: string;
  /** How long stop() waits for in-flight reconciles (default 30 s). */
  drainTimeoutMs?: number;
  /** Passed to every informer of every cluster (watch timeout, watchdog slack, backoff). */
  informerDefaults?: InformerDefaults;
}

export interface AddClusterOptions {
  name: string;
  api: KubeApi;
  /**
   * Whether its caches count in the manager's readiness (default true). A cluster the platform
   * serves for a tenant (a virtual cluster) says false: an unreachable tenant cluster must not
   * take the operator out of its Service.
   */
  readiness?: boolean;
}

/**
 * Owns the clusters (its own and any added: API client plus shared informers each), the
 * controllers, leader election and the health/metrics server. Informers run on every replica
 * (warm caches for a fast failover); controllers that need leadership run only while this replica
 * leads and are stopped (drained) when it stops leading. Clusters and controllers may be added
 * and removed while the manager runs (a syncer per virtual cluster comes and goes).
 */
export class Manager {
  readonly metrics: RuntimeMetrics;
  /** The manager's own cluster. */
  readonly cluster: Cluster;
  /** Every cluster, its own first, with whether it counts in readiness. */
  private readonly clusters = new Map<Cluster, { readiness: boolean }>();
  private readonly readinessChecks = new Set<() => ReadinessReport>();
  private controllers: Controller[] = [];
  private elector: LeaderElector | undefined;
  private electionDone: Promise<void> | undefined;
  private healthServer: HealthServer | undefined;
  private readonly stopController = new AbortController();
  /** The leadership terms: the current one is aborted the moment leadership ends (see `leaderApi`). */
  private readonly leaderTerms: LeaseTerms;
  /** Without leader election there is one term that never ends. */
  private readonly openTerm = termController();
  private leaderTransition: Promise<void> = Promise.resolve();
  /** Whether the leader-only controllers run (set in the serialized leadership chain). */
  private leading = false;
  private started = false;
  private stopping: Promise<void> | undefined;

  private readonly options: ManagerOptions & Required<Pick<ManagerOptions, 'clock' | 'random' | 'registry'>>;

  constructor(options: ManagerOptions) {
    this.options = {
      ...options,
      clock: options.clock ?? systemClock,
      random: options.random ?? systemRandom,
      registry: options.registry ?? new Registry(),
    };
    this.metrics = new RuntimeMetrics(this.options.registry);
    const election = options.leaderElection;
    this.leaderTerms = new LeaseTerms(
      this.options.clock,
      () => this.elector?.leadingUntil() ?? 0,
      () =>
        new LeaderElectionLostError(
          `not the leader of lease ${election?.namespace}/${election?.name}: write refused`,
        ),
    );
    this.cluster = this.addCluster({ name: this.options.clusterName ?? 'host', api: options.api });
  }

  /** An informer of the manager's own cluster (see `Cluster.informer`). */
  informer<T extends KubernetesObject = KubernetesObject>(
    resource: ResourceRef,
    selector: InformerSelector = {},
    indexers: Record<string, IndexFunc<T>> = {},
  ): Informer<T> {
    return this.cluster.informer(resource, selector, indexers);
  }

  /** Adds a cluster; its informers start with the manager (at once if it already runs). */
  addCluster(options: AddClusterOptions): Cluster {
    const { clock, random, logger, informerDefaults } = this.options;
    const cluster = new Cluster({
      name: options.name,
      api: options.api,
      clock,
      random,
      logger,
      ...(informerDefaults ? { informerDefaults } : {}),
    });
    this.clusters.set(cluster, { readiness: options.readiness ?? true });
    if (this.started) cluster.start();
    return cluster;
  }

  /** Stops a cluster's informers and forgets it. Remove the controllers watching it first. */
  async removeCluster(cluster: Cluster): Promise<void> {
    if (cluster === this.cluster) throw new Error("the manager's own cluster cannot be removed");
    if (!this.clusters.delete(cluster)) return;
    await cluster.stop();
  }

  /**
   * Creates and registers a controller; wire its watches with `watchPrimary`/`watch`. Added while
   * the manager runs, it starts at once when it may (not leader-only, or this replica leads).
   */
  controller(
    options: Omit<ControllerOptions, 'clock' | 'random' | 'logger' | 'metrics'> & { logger?: Logger },
  ): Controller {
    if (this.controllers.some((existing) => existing.name === options.name)) {
      throw new Error(`a controller named ${options.name} already exists`);
    }
    const controller = new Controller({
      ...options,
      clock: this.options.clock,
      random: this.options.random,
      logger: options.logger ?? this.options.logger,
      metrics: this.metrics,
    });
    this.controllers.push(controller);
    if (this.started && !this.stopController.signal.aborted && this.mayRun(controller)) {
      // After the caller wired its watches: the controller replays the caches when it starts.
      queueMicrotask(() => {
        if (this.controllers.includes(controller) && !controller.isRunning) this.startController(controller);
      });
    }
    return controller;
  }

  /** Stops a controller (draining its in-flight reconciles up to `drainTimeoutMs`) and forgets it. */
  async removeController(controller: Controller, drainTimeoutMs?: number): Promise<void> {
    this.controllers = this.controllers.filter((existing) => existing !== controller);
    await controller.stop(drainTimeoutMs ?? this.options.drainTimeoutMs ?? 30_000);
  }

  /** An extra readiness check for /readyz (a component's own state); returns its removal. */
  addReadinessCheck(check: () => ReadinessReport): () => void {
    this.readinessChecks.add(check);
    return () => this.readinessChecks.delete(check);
  }

  /** Ready when the caches of every cluster that counts have synced and every check passes. */
  readiness(): ReadinessReport {
    const notReady: string[] = [];
    for (const [cluster, { readiness }] of this.clusters) {
      if (!readiness) continue;
      const prefix = cluster === this.cluster ? '' : `cluster ${cluster.name}: `;
      for (const entry of cluster.notSynced()) notReady.push(`${prefix}${entry}`);
    }
    for (const check of this.readinessChecks) notReady.push(...check().notReady);
    return { ready: notReady.length === 0, notReady };
  }

  get clock(): Clock {
    return this.options.clock;
  }

  get logger(): Logger {
    return this.options.logger;
  }

  get random(): Random {
    return this.options.random;
  }

  /** The registry the runtime's metrics (and any component's that shares /metrics) live on. */
  get registry(): Registry {
    return this.options.registry;
  }

  isLeader(): boolean {
    return this.elector?.isLeader() ?? true;
  }

  /**
   * A client for leader-only work (the controllers, their Events, the syncers' host writes): its
   * writes go out only while this replica leads and its renew deadline has not passed on the
   * clock, and writes in flight are aborted the moment leadership ends (see FencedKubeApi). Reads
   * and watches pass through. Without leader election it writes freely.
   */
  leaderApi(api: KubeApi = this.options.api): KubeApi {
    return new FencedKubeApi(api, this.fence);
  }

  private readonly fence: WriteFence = {
    term: () => (this.options.leaderElection ? this.leaderTerms.fence.term() : this.openTerm.signal),
  };

  /** The leader election settings (undefined: every controller runs without it). */
  get leaderElection(): LeaderElectionConfig | undefined {
    return this.options.leaderElection;
  }

  get healthPort(): number | undefined {
    return this.healthServer?.port;
  }

  /** Starts informers, the health server, controllers or the election. Returns once started. */
  async start(): Promise<void> {
    if (this.started) throw new Error('manager already started');
    this.started = true;
    const { logger, registry, healthPort, healthHost } = this.options;
    for (const cluster of this.clusters.keys()) cluster.start();
    if (healthPort !== undefined) {
      this.healthServer = await startHealthServer({
        port: healthPort,
        host: healthHost,
        registry,
        readiness: () => this.readiness(),
      });
      logger.info({ port: this.healthServer.port }, 'health and metrics server listening');
    }
    for (const controller of this.controllers) if (this.mayRun(controller)) this.startController(controller);
    if (this.options.leaderElection) {
      this.elector = new LeaderElector({
        ...this.options.leaderElection,
        api: this.options.api,
        clock: this.options.clock,
        random: this.options.random,
        logger,
        metrics: this.metrics,
        onStartedLeading: () => this.onLeadership(true),
        onStoppedLeading: () => this.onLeadership(false),
      });
      this.electionDone = this.elector.run(this.stopController.signal);
    }
  }

  /**
   * Graceful stop (SIGTERM): controllers stop taking work and drain in-flight reconciles (bounded
   * by drainTimeoutMs), then the lease is released, then informers and the server stop.
   */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    const drain = this.options.drainTimeoutMs ?? 30_000;
    await this.leaderTransition;
    await Promise.all(this.controllers.map((controller) => controller.stop(drain)));
    // Aborting the election releases the lease only now that no reconcile is running.
    this.stopController.abort();
    await this.electionDone;
    await Promise.all([...this.clusters.keys()].map((cluster) => cluster.stop()));
    await this.healthServer?.close();
    this.options.logger.info('manager stopped');
  }

  /** Whether a controller may run now: not leader-only, no election, or this replica leads. */
  private mayRun(controller: Controller): boolean {
    return !controller.needLeaderElection || !this.options.leaderElection || this.leading;
  }

  private startController(controller: Controller): void {
    controller.start(this.stopController.signal).catch((err: unknown) => {
      this.options.logger.error({ err, controller: controller.name }, 'controller failed to start');
    });
  }

  /** Serialized so a quick lose/regain cannot interleave stops and starts. */
  private onLeadership(leading: boolean): void {
    // The fence moves at once, not in the serialized chain: from here on, no write of the old
    // term goes out and the ones in flight are aborted.
    if (leading) this.leaderTerms.begin();
    else this.leaderTerms.end(new LeaderElectionLostError('leadership lost: write aborted'));
    this.leaderTransition = this.leaderTransition.then(async () => {
      this.leading = leading && !this.stopController.signal.aborted;
      const leaderControllers = this.controllers.filter((controller) => controller.needLeaderElection);
      if (leading && !this.stopController.signal.aborted) {
        for (const controller of leaderControllers)
          if (!controller.isRunning) this.startController(controller);
      } else if (!leading) {
        // No drain: another replica may lead in (leaseDuration - renewDeadline); in-flight
        // reconciles are told to abort at once through their signal.
        await Promise.all(leaderControllers.map((controller) => controller.stop(0)));
      }
    });
  }
}
