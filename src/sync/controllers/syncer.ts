import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Cluster } from '../../runtime/cluster.ts';
import type { Controller } from '../../runtime/controller.ts';
import { EventRecorder } from '../../runtime/events.ts';
import { asFieldManager, fieldManagers } from '../../runtime/field-managers.ts';
import type { ReadinessReport } from '../../runtime/health-server.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey, splitKey } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { Store } from '../../runtime/store.ts';
import type { SyncConfig } from '../config.ts';
import { isManagedHostObject } from '../metadata.ts';
import type { HostToVirtualLookup } from '../patches/reference-patches.ts';
import type { Sandbox, SandboxOptions } from '../patches/sandbox.ts';
import { createSandbox } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import type { SyncReporter } from './kind-sync.ts';
import { SyncerMetrics } from './metrics.ts';
import { OwnServiceDeletions } from './own-service-deletions.ts';
import { virtualKeyOfHost } from './plan.ts';
import {
  hasReferencePatches,
  REFERENCES_INDEX,
  referencedKinds,
  referencesOf,
  SELECTOR_REFERENCES_INDEX,
  selectorIndexValue,
} from './references.ts';
import { kindSyncer } from './resource.ts';
import {
  RESOURCES,
  type SelectedBy,
  type SyncerCaches,
  selectedByLookup,
  syncerCaches,
  virtualObjectLookup,
} from './syncer-caches.ts';
import { type FailingObject, type SyncOutcomes, syncOutcomes } from './syncer-status.ts';

/**
 * A virtual cluster's syncer: one controller per synced kind on a Manager, watching two clusters
 * added to it: the virtual cluster (all namespaces) and the host (only objects labelled
 * managed-by this virtual cluster, only in the host namespace unless namespace sync maps virtual
 * namespaces elsewhere). Patch expressions of every kind share one sandbox (one isolate, one CPU
 * budget). Stopping the syncer removes its controllers and clusters from the manager.
 */

export interface SyncerOptions {
  /**
   * The manager the syncer's clusters and controllers join: the operator's (one syncer per
   * VirtualClusterInstance) or one of its own (`platform syncer`). Clock, randomness, metrics and
   * informer settings are the manager's.
   */
  manager: Manager;
  virtual: KubeApi;
  host: KubeApi;
  /** Where the virtual cluster runs on the host; synced objects land here (single-namespace mode). */
  hostNamespace: string;
  /** The virtual cluster's name (the managed-by marker and the name suffix). */
  name: string;
  config: SyncConfig;
  logger: Logger;
  /** Records `SyncError` Events on virtual objects; one on `virtual` is made when absent. */
  events?: EventRecorder;
  /**
   * Whether the syncer's caches, and its start, count in the manager's readiness: yes when the
   * manager is the syncer's own; not in the operator, where an unreachable tenant cluster must not
   * make the operator unready (its `Syncing` condition says how the syncer does).
   */
  readiness?: boolean;
  /** Prefix of the controller names (metric labels); unique per syncer in one manager. */
  controllerPrefix?: string;
  /** Sandbox limits (memory, time per evaluation, CPU budget). */
  sandbox?: Omit<SandboxOptions, 'settings'>;
  maxConcurrentReconciles?: number;
  /** Every cached virtual object is synced again this often (default 10 min). */
  resyncPeriodMs?: number;
  /** Called when readiness or the set of failing objects changes (not on every retry). */
  onStatusChange?: () => void;
  /**
   * Called whenever the syncer carries a change: writes or deletes an object on either side
   * (sleep mode counts it as the virtual cluster's activity). Must not throw.
   */
  onActivity?: () => void;
}

export interface SyncerStatus {
  /** Every cache has synced and the controllers run. */
  ready: boolean;
  stopped: boolean;
  kinds: SyncedKind[];
  /** The caches that have not synced yet (`virtual services`, `host endpoints`...). */
  waitingFor: string[];
  /** Objects whose last sync failed, sorted by kind and key. */
  failing: FailingObject[];
}

export interface Syncer {
  /** Resolves true once every controller started, false if stopped first. */
  readonly ready: Promise<boolean>;
  status(): SyncerStatus;
  readiness(): ReadinessReport;
  stop(): Promise<void>;
}

const ENABLED_KEY: Record<SyncedKind, 'services' | 'endpoints' | 'secrets' | 'configMaps'> = {
  Service: 'services',
  Endpoints: 'endpoints',
  Secret: 'secrets',
  ConfigMap: 'configMaps',
};

/** The kinds a configuration syncs: enabled ones, plus those a reference can name. */
export function syncedKinds(config: SyncConfig): SyncedKind[] {
  const referenced = referencedKinds(config);
  return (['Service', 'Endpoints', 'Secret', 'ConfigMap'] as const).filter(
    (kind) => config.sync.toHost[ENABLED_KEY[kind]].enabled || referenced.has(kind),
  );
}

export function startSyncer(given: SyncerOptions): Syncer {
  // The syncer's writes, on either side, are named as its own whoever built its clients.
  const options = {
    ...given,
    virtual: asFieldManager(given.virtual, fieldManagers.syncer),
    host: asFieldManager(given.host, fieldManagers.syncer),
  };
  const { manager, logger, config } = options;
  const ctx: SyncContext = { vclusterName: options.name, hostNamespace: options.hostNamespace, config };
  const vcluster = `${options.hostNamespace}/${options.name}`;
  const metrics = SyncerMetrics.for(manager.registry);
  const events =
    options.events ??
    new EventRecorder({
      api: options.virtual,
      clock: manager.clock,
      logger,
      reportingController: 'vcluster.platform/syncer',
      reportingInstance: options.name,
    });
  const sandbox = createSandbox(ctx, options.sandbox);
  const kinds = syncedKinds(config);
  const countsInReadiness = options.readiness ?? false;

  // Two clusters of the syncer's own: the virtual cluster, and its view of the host (caches of
  // only its own objects, gone with it).
  const clusters = {
    virtual: manager.addCluster({
      name: `virtual ${vcluster}`,
      api: options.virtual,
      readiness: countsInReadiness,
    }),
    host: manager.addCluster({ name: `host ${vcluster}`, api: options.host, readiness: countsInReadiness }),
  };
  const caches = syncerCaches(clusters, ctx, kinds);
  const outcomes = syncOutcomes({
    vcluster,
    metrics,
    events,
    logger,
    onStatusChange: options.onStatusChange,
    onActivity: options.onActivity,
  });
  const controllerParts = { options, ctx, caches, sandbox, reporter: outcomes.reporter };
  const lookups = {
    lookupVirtual: virtualObjectLookup(caches, ctx),
    selectedBy: selectedByLookup(caches, ctx),
    ownServiceDeletions: new OwnServiceDeletions(manager.clock),
  };
  const controllers = kinds.map((kind) => kindController(kind, controllerParts, lookups));

  return runningSyncer({
    options,
    metrics,
    vcluster,
    kinds,
    clusters,
    caches,
    outcomes,
    controllers,
    sandbox,
  });
}

/** What a started syncer is made of, for its lifecycle. */
interface SyncerParts {
  options: SyncerOptions;
  metrics: SyncerMetrics;
  /** `hostNamespace/name`, the metrics' label. */
  vcluster: string;
  kinds: SyncedKind[];
  clusters: { virtual: Cluster; host: Cluster };
  caches: SyncerCaches;
  outcomes: SyncOutcomes;
  controllers: Controller[];
  sandbox: Sandbox;
}

/** The syncer's lifecycle: ready once every controller started, its status, readiness, and stop. */
function runningSyncer(parts: SyncerParts): Syncer {
  const { options, metrics, vcluster, kinds, clusters, caches, outcomes, controllers, sandbox } = parts;
  const { manager, logger } = options;
  const countsInReadiness = options.readiness ?? false;
  let ready = false;
  let stopped = false;
  // The manager starts the controllers (now, when it already runs); each waits for its caches.
  const abort = new AbortController();
  const readyPromise = Promise.all(controllers.map((c) => c.whenStarted(abort.signal))).then((started) => {
    const all = started.every(Boolean) && !stopped;
    if (all) {
      ready = true;
      metrics.ready.set({ vcluster }, 1);
      logger.info({ kinds }, 'syncer caches synced; syncing');
      outcomes.changed();
    }
    return all;
  });
  metrics.ready.set({ vcluster }, 0);
  logger.info({ kinds, hostNamespace: options.hostNamespace }, 'syncer starting');

  const notSynced = () => [...clusters.virtual.notSynced(), ...clusters.host.notSynced()];
  const readiness = (): ReadinessReport => {
    const notReady = notSynced();
    return {
      ready: ready && notReady.length === 0,
      notReady: ready ? notReady : ['syncer starting', ...notReady],
    };
  };
  // The clusters' caches count through the manager already; this adds only "started".
  const removeReadinessCheck = countsInReadiness
    ? manager.addReadinessCheck(() => ({ ready, notReady: ready ? [] : ['syncer starting'] }))
    : () => {};

  let stopping: Promise<void> | undefined;
  return {
    ready: readyPromise,
    status: () => ({
      ready,
      stopped,
      kinds: [...kinds],
      waitingFor: [...caches.sides.entries()]
        .filter(([informer]) => !informer.hasSynced())
        .map(([, side]) => side),
      failing: [...outcomes.failing.values()].sort((a, b) =>
        a.kind === b.kind ? a.key.localeCompare(b.key) : a.kind.localeCompare(b.kind),
      ),
    }),
    readiness,
    stop() {
      stopping ??= (async () => {
        stopped = true;
        ready = false;
        abort.abort();
        removeReadinessCheck();
        await Promise.all(controllers.map((c) => manager.removeController(c, 10_000)));
        await Promise.all([manager.removeCluster(clusters.virtual), manager.removeCluster(clusters.host)]);
        sandbox.dispose();
        metrics.forget(vcluster);
        logger.info('syncer stopped');
      })();
      return stopping;
    },
  };
}

/** What every kind's controller of one syncer shares. */
interface KindControllerParts {
  options: SyncerOptions;
  ctx: SyncContext;
  caches: SyncerCaches;
  sandbox: Sandbox;
  reporter: SyncReporter;
}

/** The look-ups of one syncer its kinds' controllers share, and what the Endpoints one is told. */
interface SharedLookups {
  lookupVirtual: HostToVirtualLookup;
  selectedBy: SelectedBy;
  /** Host Services the Service syncer deleted, for the Endpoints syncer. */
  ownServiceDeletions: OwnServiceDeletions;
}

/**
 * The controller of one synced kind, added to the manager: it reconciles the kind's virtual
 * objects, and watches their host copies, the Services of Endpoints, and the objects that
 * reference (or select) objects of the kind.
 */
function kindController(kind: SyncedKind, parts: KindControllerParts, lookups: SharedLookups): Controller {
  const { options, ctx, caches } = parts;
  const { config } = ctx;
  const virtualInformer = caches.virtual.get(kind)!;
  const hostInformer = caches.host.get(kind)!;
  const { selectedBy } = lookups;
  const referencing = referencingInformers(caches, config);
  const wanted = wantedOf(kind, config, virtualInformer.store, referencing, selectedBy);
  const syncer = kindSyncer({
    kind,
    resource: RESOURCES[kind],
    ctx,
    virtualApi: options.virtual,
    hostApi: options.host,
    virtual: virtualInformer.store,
    host: hostInformer.store,
    ...(kind === 'Endpoints'
      ? {
          services: caches.virtual.get('Service')!.store,
          ...(caches.host.has('Service') ? { hostServices: caches.host.get('Service')!.store } : {}),
        }
      : {}),
    ...(kind === 'Service' || kind === 'Endpoints'
      ? { ownServiceDeletions: lookups.ownServiceDeletions }
      : {}),
    wanted,
    lookupVirtual: lookups.lookupVirtual,
    sandbox: parts.sandbox,
    reporter: parts.reporter,
  });
  const controller = options.manager.controller({
    name: `${options.controllerPrefix ?? 'syncer-'}${kind.toLowerCase()}`,
    reconcile: syncer.reconcile,
    logger: options.logger,
    maxConcurrentReconciles: options.maxConcurrentReconciles ?? 4,
    // A failing object (a hostile expression) is retried at most every 5 minutes.
    rateLimiter: { maxDelayMs: 5 * 60_000 },
    ...(options.resyncPeriodMs !== undefined ? { resyncPeriodMs: options.resyncPeriodMs } : {}),
    // Leadership is the caller's business: the operator starts and stops syncers only while
    // it leads; `platform syncer` runs one alone.
    needLeaderElection: false,
  });
  const hostToVirtualKey = (obj: KubernetesObject): string[] => {
    const host = obj as unknown as KubeObject;
    if (!isManagedHostObject(host, ctx, kind)) return [];
    const key = virtualKeyOfHost(host);
    return key ? [key] : [];
  };
  controller.watchPrimary(virtualInformer);
  controller.watch(hostInformer, hostToVirtualKey);
  if (kind === 'Endpoints') {
    // Endpoints created before their Service sync once it appears; a Service gaining a
    // selector removes its host Endpoints.
    controller.watch(caches.virtual.get('Service')!, (svc) => [objectKey(svc)]);
  }
  // An object referenced (or selected) from another is synced while it is: a change of the
  // referencing object enqueues the objects it names.
  for (const { kind: from, informer } of referencing) {
    controller.watch(informer, (obj: KubernetesObject) => [
      ...referencesOf(from, obj as unknown as KubeObject, ctx)
        .filter((r) => r.kind === kind)
        .map((r) => `${r.namespace}/${r.name}`),
      ...selectedBy(from, obj, kind).map((selected) => objectKey(selected)),
    ]);
  }
  return controller;
}

/** The virtual informers of the kinds whose patches hold reference patches. */
function referencingInformers(
  caches: SyncerCaches,
  config: SyncConfig,
): { kind: SyncedKind; informer: Informer }[] {
  return [...caches.virtual.entries()]
    .filter(([kind]) => hasReferencePatches(kind, config))
    .map(([kind, informer]) => ({ kind, informer }));
}

/**
 * Whether the object of a key is synced: always for an enabled kind; for another, only while
 * something names it, or selects it (reference.labels).
 */
function wantedOf(
  kind: SyncedKind,
  config: SyncConfig,
  virtual: Store<KubernetesObject>,
  referencing: readonly { kind: SyncedKind; informer: Informer }[],
  selectedBy: SelectedBy,
): (key: string) => boolean {
  const enabled = config.sync.toHost[ENABLED_KEY[kind]].enabled;
  return (key) => {
    if (enabled) return true;
    if (
      referencing.some(
        ({ informer }) => informer.store.byIndex(REFERENCES_INDEX, `${kind}/${key}`).length > 0,
      )
    ) {
      return true;
    }
    const candidate = virtual.get(key);
    const namespace = splitKey(key).namespace ?? '';
    return referencing.some(({ kind: from, informer }) =>
      informer.store
        .byIndex(SELECTOR_REFERENCES_INDEX, selectorIndexValue(kind, namespace))
        .some((obj) => candidate !== undefined && selectedBy(from, obj, kind).includes(candidate)),
    );
  };
}
