import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock, Random } from './clock.ts';
import { Informer, type InformerOptions, type InformerSelector, keepManagedFieldsOf } from './informer.ts';
import type { KubeApi } from './kube-api.ts';
import { groupVersion, type ResourceRef } from './kube-client.ts';
import type { IndexFunc } from './store.ts';

/** What every informer of a cluster is started with (watch timeout, watchdog slack, backoff, paging). */
export type InformerDefaults = Pick<
  InformerOptions,
  'minWatchTimeoutSeconds' | 'watchdogSlackMs' | 'backoff' | 'pageSize'
>;

export interface ClusterOptions {
  /** A name for logs and readiness (`host`, `virtual:ns/vc`...). */
  name: string;
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  informerDefaults?: InformerDefaults;
}

/** What a shared cache keeps of its objects beyond what every controller reads. */
export interface CacheContent {
  /**
   * The field managers whose `metadata.managedFields` entries the cache keeps; every other entry is
   * dropped (all of them by default: no controller reads another writer's field ownership).
   */
  managedFieldsOf?: readonly string[];
}

/**
 * One apiserver as the runtime sees it (controller-runtime's `cluster.Cluster`): its API client,
 * its shared informer caches and whether they have synced. A Manager runs controllers against
 * several clusters (its own, the virtual clusters its syncers serve...): a controller watches
 * informers of any of them and writes through whichever client it needs.
 *
 * Informers are shared per (resource, selector); they start with the cluster and stop with it.
 */
export class Cluster {
  readonly name: string;
  readonly api: KubeApi;
  private readonly informers = new Map<string, Informer>();
  private started = false;

  constructor(private readonly options: ClusterOptions) {
    this.name = options.name;
    this.api = options.api;
  }

  /**
   * The shared informer for a resource, selector and cache content: two callers asking for the
   * same one get the same instance, and the same cached objects. Indexers are added to the shared
   * store (the same function under the same name is shared; another under a taken name is an
   * error); a cache keeps none unless asked (see `commonIndexers`). An informer asked for after the
   * cluster started starts at once.
   */
  informer<T extends KubernetesObject = KubernetesObject>(
    resource: ResourceRef,
    selector: InformerSelector = {},
    indexers: Record<string, IndexFunc<T>> = {},
    content: CacheContent = {},
  ): Informer<T> {
    const managedFieldsOf = [...new Set(content.managedFieldsOf ?? [])].sort();
    const key = JSON.stringify([
      groupVersion(resource),
      resource.plural,
      selector.namespace,
      selector.labelSelector,
      selector.fieldSelector,
      managedFieldsOf,
    ]);
    let informer = this.informers.get(key) as Informer<T> | undefined;
    if (!informer) {
      informer = new Informer<T>({
        ...this.options.informerDefaults,
        ...selector,
        api: this.options.api,
        resource,
        transform: keepManagedFieldsOf<T>(managedFieldsOf),
        clock: this.options.clock,
        random: this.options.random,
        logger: this.options.logger.child({
          cluster: this.name,
          informer: `${groupVersion(resource)}/${resource.plural}`,
        }),
      });
      this.informers.set(key, informer as unknown as Informer);
      if (this.started) informer.start();
    }
    for (const [name, fn] of Object.entries(indexers)) informer.store.addIndexer(name, fn);
    return informer;
  }

  /** The informers whose first list has not arrived yet, by description. */
  notSynced(): string[] {
    return [...this.informers.values()]
      .filter((informer) => !informer.hasSynced())
      .map((informer) => `informer ${informer.description} not synced`);
  }

  hasSynced(): boolean {
    return this.notSynced().length === 0;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    for (const informer of this.informers.values()) informer.start();
  }

  /** Stops every informer (their caches stay as they were). */
  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.informers.values()].map((informer) => informer.stop()));
  }
}
