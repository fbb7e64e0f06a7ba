import { setMaxListeners } from 'node:events';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Clock, Random } from './clock.ts';
import { Controller, type ControllerOptions } from './controller.ts';
import { LeaderElectionLostError } from './errors.ts';
import { FencedKubeApi, type WriteFence } from './fencing.ts';
import { type HealthServer, type ReadinessReport, startHealthServer } from './health-server.ts';
import { Informer, type InformerOptions, type InformerSelector } from './informer.ts';
import { groupVersion, type KubeApi, type ResourceRef } from './kube-client.ts';
import { type LeaderElectionConfig, LeaderElector } from './leader-election.ts';
import { RuntimeMetrics } from './metrics.ts';
import type { IndexFunc } from './store.ts';

export interface ManagerOptions {
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  registry: Registry;
  /** Omit to run every controller without leader election (single replica, tests). */
  leaderElection?: LeaderElectionConfig;
  /** Port of the /metrics, /healthz, /readyz server; omit for none, 0 for any free port. */
  healthPort?: number;
  healthHost?: string;
  /** How long stop() waits for in-flight reconciles (default 30 s). */
  drainTimeoutMs?: number;
  /** Passed to every informer (watch timeout, watchdog slack, backoff). */
  informerDefaults?: Pick<
    InformerOptions,
    'minWatchTimeoutSeconds' | 'watchdogSlackMs' | 'backoff' | 'pageSize'
  >;
}

/**
 * Owns the shared informers, the controllers, leader election and the health/metrics server.
 * Informers run on every replica (warm caches for a fast failover); controllers that need
 * leadership run only while this replica leads and are stopped (drained) when it stops leading.
 */
export class Manager {
  readonly metrics: RuntimeMetrics;
  private readonly informers = new Map<string, Informer>();
  private readonly controllers: Controller[] = [];
  private elector: LeaderElector | undefined;
  private electionDone: Promise<void> | undefined;
  private healthServer: HealthServer | undefined;
  private readonly stopController = new AbortController();
  /** The current leadership term: aborted the moment leadership ends (see `leaderApi`). */
  private term: AbortController | undefined;
  /** Without leader election there is one term that never ends. */
  private readonly openTerm = termController();
  private leaderTransition: Promise<void> = Promise.resolve();
  private started = false;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: ManagerOptions) {
    this.metrics = new RuntimeMetrics(options.registry);
  }

  /**
   * The shared informer for a resource and selector: two callers asking for the same one get the
   * same instance. Custom indexers are added to the shared store (names must not clash).
   */
  informer<T extends KubernetesObject = KubernetesObject>(
    resource: ResourceRef,
    selector: InformerSelector = {},
    indexers: Record<string, IndexFunc<T>> = {},
  ): Informer<T> {
    const key = JSON.stringify([
      groupVersion(resource),
      resource.plural,
      selector.namespace,
      selector.labelSelector,
      selector.fieldSelector,
    ]);
    let informer = this.informers.get(key) as Informer<T> | undefined;
    if (!informer) {
      informer = new Informer<T>({
        ...this.options.informerDefaults,
        ...selector,
        api: this.options.api,
        resource,
        clock: this.options.clock,
        random: this.options.random,
        logger: this.options.logger.child({ informer: `${groupVersion(resource)}/${resource.plural}` }),
      });
      this.informers.set(key, informer as unknown as Informer);
      if (this.started) informer.start();
    }
    for (const [name, fn] of Object.entries(indexers)) informer.store.addIndexer(name, fn);
    return informer;
  }

  /** Creates and registers a controller; wire its watches with `watchPrimary`/`watch`. */
  controller(options: Omit<ControllerOptions, 'clock' | 'random' | 'logger' | 'metrics'>): Controller {
    const controller = new Controller({
      ...options,
      clock: this.options.clock,
      random: this.options.random,
      logger: this.options.logger.child({ controller: options.name }),
      metrics: this.metrics,
    });
    if (this.controllers.some((existing) => existing.name === options.name)) {
      throw new Error(`a controller named ${options.name} already exists`);
    }
    this.controllers.push(controller);
    return controller;
  }

  readiness(): ReadinessReport {
    const notReady = [...this.informers.values()]
      .filter((informer) => !informer.hasSynced())
      .map((informer) => `informer ${informer.description} not synced`);
    return { ready: notReady.length === 0, notReady };
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
    term: () => {
      const election = this.options.leaderElection;
      if (!election) return this.openTerm.signal;
      const term = this.term;
      const until = this.elector?.leadingUntil() ?? 0;
      if (!term || term.signal.aborted || this.options.clock.now() >= until) {
        throw new LeaderElectionLostError(
          `not the leader of lease ${election.namespace}/${election.name}: write refused`,
        );
      }
      return term.signal;
    },
  };

  get healthPort(): number | undefined {
    return this.healthServer?.port;
  }

  /** Starts informers, the health server, controllers or the election. Returns once started. */
  async start(): Promise<void> {
    if (this.started) throw new Error('manager already started');
    this.started = true;
    const { logger, registry, healthPort, healthHost } = this.options;
    for (const informer of this.informers.values()) informer.start();
    if (healthPort !== undefined) {
      this.healthServer = await startHealthServer({
        port: healthPort,
        host: healthHost,
        registry,
        readiness: () => this.readiness(),
      });
      logger.info({ port: this.healthServer.port }, 'health and metrics server listening');
    }
    for (const controller of this.controllers) {
      if (!controller.needLeaderElection || !this.options.leaderElection) this.startController(controller);
    }
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

  /** Calls stop() on SIGTERM/SIGINT, then `onStopped` (typically process exit). */
  handleSignals(onStopped: () => void, processLike: NodeJS.EventEmitter = process): void {
    const handler = (signal: string) => {
      this.options.logger.info({ signal }, 'shutting down');
      void this.stop().finally(onStopped);
    };
    processLike.once('SIGTERM', handler);
    processLike.once('SIGINT', handler);
  }

  private async doStop(): Promise<void> {
    const drain = this.options.drainTimeoutMs ?? 30_000;
    await this.leaderTransition;
    await Promise.all(this.controllers.map((controller) => controller.stop(drain)));
    // Aborting the election releases the lease only now that no reconcile is running.
    this.stopController.abort();
    await this.electionDone;
    await Promise.all([...this.informers.values()].map((informer) => informer.stop()));
    await this.healthServer?.close();
    this.options.logger.info('manager stopped');
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
    this.term?.abort(new LeaderElectionLostError('leadership lost: write aborted'));
    this.term = leading ? termController() : undefined;
    this.leaderTransition = this.leaderTransition.then(async () => {
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

/**
 * A leadership term's controller: every write in flight listens on its signal (and stops
 * listening when it completes), so many concurrent writes are expected, not a leak.
 */
function termController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
