import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { EventRecorder } from '../../runtime/events.ts';
import { SyncerMetrics } from './metrics.ts';
import { syncOutcomes } from './syncer-status.ts';

describe('syncOutcomes: activity', () => {
  it('reports every change carried (written or deleted, either side) as activity, and nothing else', () => {
    const activity: string[] = [];
    const events = { record: async () => {} } as unknown as EventRecorder;
    const { reporter } = syncOutcomes({
      vcluster: 'ns/vc',
      metrics: SyncerMetrics.for(new Registry()),
      events,
      logger: pino({ level: 'silent' }),
      onActivity: () => activity.push('carried'),
    });
    reporter.succeeded('ConfigMap', 'a/b');
    reporter.failed('ConfigMap', 'a/b', null, 'Conflict', 'refused');
    expect(activity).toEqual([]);
    reporter.synced('ConfigMap', 'toHost');
    reporter.synced('Service', 'toVirtual');
    reporter.deleted('Endpoints', 'host');
    reporter.deleted('Secret', 'virtual');
    expect(activity).toHaveLength(4);
  });
});
