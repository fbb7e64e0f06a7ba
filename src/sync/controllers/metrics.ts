import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * The syncer's own metrics (the controllers' and work queues' come from the runtime). Labels
 * name the virtual cluster (`<host namespace>/<name>`), a kind and a direction or error class;
 * never an object name or anything read from an object, so no secret can reach a scrape.
 * One instance per Registry, shared by every syncer registered on it.
 */
export class SyncerMetrics {
  readonly objectsSynced: Counter<'vcluster' | 'kind' | 'direction'>;
  readonly objectsDeleted: Counter<'vcluster' | 'kind' | 'side'>;
  readonly errors: Counter<'vcluster' | 'kind' | 'reason'>;
  readonly failingObjects: Gauge<'vcluster'>;
  readonly ready: Gauge<'vcluster'>;

  private constructor(registry: Registry) {
    const registers = [registry];
    this.objectsSynced = new Counter({
      name: 'platform_syncer_objects_synced_total',
      help: 'Objects written by the syncer: direction toHost (host object created or updated) or toVirtual (virtual object updated from the host)',
      labelNames: ['vcluster', 'kind', 'direction'],
      registers,
    });
    this.objectsDeleted = new Counter({
      name: 'platform_syncer_objects_deleted_total',
      help: 'Objects the syncer deleted, by the side they were deleted on',
      labelNames: ['vcluster', 'kind', 'side'],
      registers,
    });
    this.errors = new Counter({
      name: 'platform_syncer_errors_total',
      help: 'Failed object syncs by error class (ExpressionTimeout, Conflict, ...)',
      labelNames: ['vcluster', 'kind', 'reason'],
      registers,
    });
    this.failingObjects = new Gauge({
      name: 'platform_syncer_failing_objects',
      help: 'Objects whose last sync failed',
      labelNames: ['vcluster'],
      registers,
    });
    this.ready = new Gauge({
      name: 'platform_syncer_ready',
      help: '1 once every cache of the syncer has synced and its controllers run',
      labelNames: ['vcluster'],
      registers,
    });
  }

  private static readonly byRegistry = new WeakMap<Registry, SyncerMetrics>();

  static for(registry: Registry): SyncerMetrics {
    let metrics = SyncerMetrics.byRegistry.get(registry);
    if (!metrics) {
      metrics = new SyncerMetrics(registry);
      SyncerMetrics.byRegistry.set(registry, metrics);
    }
    return metrics;
  }

  /** Drops the gauges of a stopped syncer (counters keep their totals, as Prometheus expects). */
  forget(vcluster: string): void {
    this.failingObjects.remove({ vcluster });
    this.ready.remove({ vcluster });
  }
}
