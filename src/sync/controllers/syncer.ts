import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Controller } from '../../runtime/controller.ts';
import { EventRecorder } from '../../runtime/events.ts';
import { asFieldManager, fieldManagers } from '../../runtime/field-managers.ts';
import type { ReadinessReport } from '../../runtime/health-server.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectKey, type ResourceRef, splitKey } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import { type IndexFunc, NamespaceIndex } from '../../runtime/store.ts';
import type { SyncConfig } from '../config.ts';
import { isManagedHostObject } from '../metadata.ts';
import { LABEL_MANAGED_BY } from '../names.ts';
import { namespaceRules } from '../object-refs.ts';
import type { HostToVirtualLookup } from '../patches/apply.ts';
import type { SandboxOptions } from '../patches/sandbox.ts';
import { createSandbox } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import { SyncerMetrics } from './metrics.ts';
import { virtualKeyOfHost } from './plan.ts';
import {
  HOST_NAME_INDEX,
  hasReferencePatches,
  hostNameIndexValue,
  hostNameIndexValues,
  REFERENCES_INDEX,
  referencedKinds,
  referenceIndexValue,
  referencesOf,
  SELECTOR_REFERENCES_INDEX,
  selectorIndexValue,
  selectorMatches,
  selectorReferencesOf,
} from './references.ts';
import { kindSyncer, type SyncReporter } from './resource.ts';

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
}

export interface FailingObject {
  kind: SyncedKind;
  /** `namespace/name` of the virtual object. */
  key: string;
  /** The error class (`ExpressionTimeout`, `HostObjectConflict`...). */
  reason: string;
  /** Safe to show: no Secret content. */
  message: string;
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

const RESOURCES: Record<SyncedKind, ResourceRef> = {
  Service: { group: '', version: 'v1', plural: 'services', namespaced: true },
  Endpoints: { group: '', version: 'v1', plural: 'endpoints', namespaced: true },
  Secret: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  ConfigMap: { group: '', version: 'v1', plural: 'configmaps', namespaced: true },
};

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

/** The host namespaces a syncer writes into; null when a mapping pattern leaves them open. */
export function hostNamespacesOf(ctx: SyncContext): string[] | null {
  const rules = namespaceRules(ctx);
  if (rules === null) return [ctx.hostNamespace];
  if (rules.some((rule) => rule.host.endsWith('*'))) return null;
  return [...new Set([ctx.hostNamespace, ...rules.map((rule) => rule.host)])];
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
  const prefix = options.controllerPrefix ?? 'syncer-';
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
  const informerSides = new Map<Informer, string>();
  const makeInformer = (
    side: keyof typeof clusters,
    kind: SyncedKind,
    selector: { namespace?: string; labelSelector?: string },
    indexers?: Record<string, IndexFunc>,
  ) => {
    const informer = clusters[side].informer(RESOURCES[kind], selector, indexers);
    informerSides.set(informer, `${side} ${RESOURCES[kind].plural}`);
    return informer;
  };

  // Virtual caches: the synced kinds, plus Services for the Endpoints syncer. Kinds whose
  // patches hold reference patches are indexed by the Secrets/ConfigMaps they name, and by the
  // kind and namespace their `reference.labels` selectors pick from.
  const referenceIndexers = (kind: SyncedKind): Record<string, IndexFunc> => ({
    [REFERENCES_INDEX]: (obj) =>
      referencesOf(kind, obj as unknown as KubeObject, ctx).map((r) =>
        referenceIndexValue(r.kind, r.namespace, r.name),
      ),
    [SELECTOR_REFERENCES_INDEX]: (obj) => [
      ...new Set(
        selectorReferencesOf(kind, obj as unknown as KubeObject, ctx).map((r) =>
          selectorIndexValue(r.kind, r.namespace),
        ),
      ),
    ],
  });
  const virtualKinds = new Set<SyncedKind>(kinds);
  if (kinds.includes('Endpoints')) virtualKinds.add('Service');
  const virtualInformers = new Map<SyncedKind, Informer>();
  // Kinds a reference can name are also indexed by their host names, for the way back.
  const referenced = referencedKinds(config);
  for (const kind of virtualKinds) {
    const indexers: Record<string, IndexFunc> = hasReferencePatches(kind, config)
      ? referenceIndexers(kind)
      : {};
    if (referenced.has(kind)) {
      indexers[HOST_NAME_INDEX] = (obj) => hostNameIndexValues(kind, obj as unknown as KubeObject, ctx);
    }
    virtualInformers.set(kind, makeInformer('virtual', kind, {}, indexers));
  }
  /**
   * A host name -> the virtual object it is the copy of, by the index above: only an object that
   * exists in the virtual cluster, and only when exactly one translates to that name.
   */
  const lookupVirtual: HostToVirtualLookup = (ref) => {
    if (!(referenced as Set<string>).has(ref.kind)) return null;
    const found = virtualInformers
      .get(ref.kind as SyncedKind)
      ?.store.byIndex(HOST_NAME_INDEX, hostNameIndexValue(ref.namespace, ref.name));
    if (found?.length !== 1) return null;
    const { name, namespace } = found[0]!.metadata ?? {};
    return name && namespace ? { name, namespace } : null;
  };
  /** The objects of `kind` in a namespace that `referencing`'s selector references pick. */
  const selectedBy = (
    from: SyncedKind,
    referencing: KubernetesObject,
    kind: SyncedKind,
  ): KubernetesObject[] => {
    const candidates = virtualInformers.get(kind)?.store;
    if (!candidates) return [];
    return selectorReferencesOf(from, referencing as unknown as KubeObject, ctx)
      .filter((r) => r.kind === kind)
      .flatMap((r) =>
        candidates
          .byIndex(NamespaceIndex, r.namespace)
          .filter((obj) => selectorMatches(r.selector, obj.metadata?.labels ?? {})),
      );
  };
  // Host caches: only our objects, in the namespace we write to. The syncer's identity may read
  // nothing else (a ServiceAccount bound in its namespaces only), so the caches are cluster-wide
  // only where namespace mappings name several namespaces or patterns.
  const hostNamespaces = hostNamespacesOf(ctx);
  const hostScope = {
    ...(hostNamespaces?.length === 1 ? { namespace: hostNamespaces[0] } : {}),
    labelSelector: `${LABEL_MANAGED_BY}=${options.name}`,
  };
  const hostInformers = new Map<SyncedKind, Informer>();
  for (const kind of kinds) hostInformers.set(kind, makeInformer('host', kind, hostScope));

  // Status: the failing objects, and readiness; changes are reported, not every retry.
  const failing = new Map<string, FailingObject>();
  let ready = false;
  let stopped = false;
  const changed = () => {
    metrics.failingObjects.set({ vcluster }, failing.size);
    try {
      options.onStatusChange?.();
    } catch (err) {
      logger.error({ err }, 'status change callback failed');
    }
  };
  const reporter: SyncReporter = {
    synced: (kind, direction) => metrics.objectsSynced.inc({ vcluster, kind, direction }),
    deleted: (kind, side) => metrics.objectsDeleted.inc({ vcluster, kind, side }),
    failed(kind, key, virtual, reason, message) {
      metrics.errors.inc({ vcluster, kind, reason });
      const id = `${kind}/${key}`;
      const previous = failing.get(id);
      failing.set(id, { kind, key, reason, message });
      if (virtual !== null) {
        const m = virtual.metadata ?? {};
        void events.record(
          {
            apiVersion: 'v1',
            kind,
            name: typeof m.name === 'string' ? m.name : undefined,
            namespace: typeof m.namespace === 'string' ? m.namespace : undefined,
            uid: typeof m.uid === 'string' ? m.uid : undefined,
          },
          { type: 'Warning', reason: 'SyncError', action: `Sync${kind}`, note: `Error syncing: ${message}` },
        );
      }
      if (previous?.reason !== reason || previous.message !== message) changed();
    },
    succeeded(kind, key) {
      if (failing.delete(`${kind}/${key}`)) changed();
    },
  };

  const controllers: Controller[] = [];
  const hostServicesDeleted = new Set<string>();
  for (const kind of kinds) {
    const virtualInformer = virtualInformers.get(kind)!;
    const hostInformer = hostInformers.get(kind)!;
    const enabled = config.sync.toHost[ENABLED_KEY[kind]].enabled;
    // Kinds that are not enabled are synced only while something names them, or selects them
    // (reference.labels).
    const referencing = [...virtualInformers.entries()]
      .filter(([k]) => hasReferencePatches(k, config))
      .map(([k, informer]) => ({ kind: k, informer }));
    const wanted = (key: string) => {
      if (enabled) return true;
      if (
        referencing.some(
          ({ informer }) => informer.store.byIndex(REFERENCES_INDEX, `${kind}/${key}`).length > 0,
        )
      ) {
        return true;
      }
      const candidate = virtualInformer.store.get(key);
      const namespace = splitKey(key).namespace ?? '';
      return referencing.some(({ kind: from, informer }) =>
        informer.store
          .byIndex(SELECTOR_REFERENCES_INDEX, selectorIndexValue(kind, namespace))
          .some((obj) => candidate !== undefined && selectedBy(from, obj, kind).includes(candidate)),
      );
    };
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
            services: virtualInformers.get('Service')!.store,
            ...(hostInformers.has('Service') ? { hostServices: hostInformers.get('Service')!.store } : {}),
            hostServicesDeleted,
          }
        : {}),
      ...(kind === 'Service' ? { onHostDeleted: (key: string) => hostServicesDeleted.add(key) } : {}),
      wanted,
      lookupVirtual,
      sandbox,
      reporter,
    });
    const controller = manager.controller({
      name: `${prefix}${kind.toLowerCase()}`,
      reconcile: syncer.reconcile,
      logger,
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
      controller.watch(virtualInformers.get('Service')!, (svc) => [objectKey(svc)]);
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
    controllers.push(controller);
  }

  // The manager starts the controllers (now, when it already runs); each waits for its caches.
  const abort = new AbortController();
  const readyPromise = Promise.all(controllers.map((c) => c.whenStarted(abort.signal))).then((started) => {
    const all = started.every(Boolean) && !stopped;
    if (all) {
      ready = true;
      metrics.ready.set({ vcluster }, 1);
      logger.info({ kinds }, 'syncer caches synced; syncing');
      changed();
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
      waitingFor: [...informerSides.entries()]
        .filter(([informer]) => !informer.hasSynced())
        .map(([, side]) => side),
      failing: [...failing.values()].sort((a, b) =>
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
