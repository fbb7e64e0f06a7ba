import type { Logger } from 'pino';
import type { EventRecorder } from '../../runtime/events.ts';
import type { SyncedKind } from '../translate.ts';
import type { SyncReporter } from './kind-sync.ts';
import type { SyncerMetrics } from './metrics.ts';

/**
 * What a syncer reports of its objects: metrics of every sync, and the objects whose last sync
 * failed, each failure a `SyncError` Event on the virtual object. Changes of the failing set are
 * reported, not every retry.
 */

export interface FailingObject {
  kind: SyncedKind;
  /** `namespace/name` of the virtual object. */
  key: string;
  /** The error class (`ExpressionTimeout`, `HostObjectConflict`...). */
  reason: string;
  /** Safe to show: no Secret content. */
  message: string;
}

export interface SyncOutcomes {
  reporter: SyncReporter;
  /** Objects whose last sync failed, by `kind/namespace/name`. */
  failing: ReadonlyMap<string, FailingObject>;
  /** Updates the failing-objects gauge and calls `onStatusChange`. */
  changed(): void;
}

export function syncOutcomes(options: {
  vcluster: string;
  metrics: SyncerMetrics;
  events: EventRecorder;
  logger: Logger;
  onStatusChange?: () => void;
  /** Called on every change carried (a write or delete on either side): the instance's activity. */
  onActivity?: () => void;
}): SyncOutcomes {
  const { vcluster, metrics, events, logger } = options;
  const failing = new Map<string, FailingObject>();
  const changed = () => {
    metrics.failingObjects.set({ vcluster }, failing.size);
    try {
      options.onStatusChange?.();
    } catch (err) {
      logger.error({ err }, 'status change callback failed');
    }
  };
  const reporter: SyncReporter = {
    synced: (kind, direction) => {
      metrics.objectsSynced.inc({ vcluster, kind, direction });
      options.onActivity?.();
    },
    deleted: (kind, side) => {
      metrics.objectsDeleted.inc({ vcluster, kind, side });
      options.onActivity?.();
    },
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
  return { reporter, failing, changed };
}
