import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FakeClock, flushMicrotasks } from '../../test-support/fake-clock.ts';
import { Controller, mapToControllerOwner, type Reconciler, watchHandler } from './controller.ts';
import { TerminalError } from './errors.ts';
import { RuntimeMetrics } from './metrics.ts';
import { generationChanged } from './predicates.ts';

class SomethingBroke extends Error {}

function setup(reconcile: Reconciler, workers = 1, logger = pino({ level: 'silent' })) {
  const clock = new FakeClock();
  const registry = new Registry();
  const metrics = new RuntimeMetrics(registry);
  const controller = new Controller({
    name: 'test',
    reconcile,
    clock,
    random: () => 0,
    logger,
    metrics,
    maxConcurrentReconciles: workers,
    rateLimiter: { qps: 1_000_000, burst: 1_000_000 },
    resyncPeriodMs: 0,
  });
  return { clock, controller, registry };
}

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return value?.value ?? 0;
}

describe('Controller', () => {
  it('retries thrown errors with growing backoff and records the error class as reason', async () => {
    const calls: number[] = [];
    const { clock, controller, registry } = setup(async () => {
      calls.push(clock.now());
      if (calls.length < 4) throw new SomethingBroke('boom');
    });
    await controller.start();
    controller.enqueue('ns/a');
    await clock.advance(1_000);
    const start = calls[0]!;
    expect(calls.map((t) => t - start)).toEqual([0, 5, 15, 35]);
    expect(
      await metricValue(registry, 'controller_runtime_reconcile_errors_by_reason_total', {
        reason: 'SomethingBroke',
      }),
    ).toBe(3);
    expect(await metricValue(registry, 'controller_runtime_reconcile_total', { result: 'success' })).toBe(1);
    await controller.stop();
  });

  it('does not retry a TerminalError', async () => {
    let calls = 0;
    const { clock, controller, registry } = setup(async () => {
      calls++;
      throw new TerminalError('bad spec');
    });
    await controller.start();
    controller.enqueue('ns/a');
    await clock.advance(60_000);
    expect(calls).toBe(1);
    expect(await metricValue(registry, 'controller_runtime_terminal_reconcile_errors_total', {})).toBe(1);
    await controller.stop();
  });

  it('requeues after requeueAfter', async () => {
    const calls: number[] = [];
    const { clock, controller } = setup(async () => {
      calls.push(clock.now());
      return calls.length === 1 ? { requeueAfter: 30_000 } : {};
    });
    await controller.start();
    controller.enqueue('ns/a');
    await clock.advance(60_000);
    expect(calls.map((t) => t - calls[0]!)).toEqual([0, 30_000]);
    await controller.stop();
  });

  it('never reconciles one key on two workers at once, even with many workers', async () => {
    let active = 0;
    let maxActive = 0;
    let calls = 0;
    const { clock, controller } = setup(async (_key) => {
      active++;
      calls++;
      maxActive = Math.max(maxActive, active);
      await new Promise<void>((resolve) => clock.setTimer(100, resolve));
      active--;
    }, 4);
    await controller.start();
    controller.enqueue('ns/a');
    await flushMicrotasks();
    controller.enqueue('ns/a');
    controller.enqueue('ns/a');
    await clock.advance(1_000);
    expect(maxActive).toBe(1);
    expect(calls).toBe(2);
    await controller.stop();
  });

  it("every reconcile log line carries reconcileID (one per reconcile), the key's namespace and name", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    let failed = false;
    const { clock, controller } = setup(
      async (key, ctx) => {
        ctx.logger.info('reconciling');
        if (key === 'ns/a' && !failed) {
          failed = true;
          throw new SomethingBroke('boom');
        }
      },
      1,
      logger,
    );
    await controller.start();
    controller.enqueue('ns/a');
    controller.enqueue('cluster-wide');
    await clock.advance(1_000);
    const reconcileLines = lines.filter((line) => line.reconcileID !== undefined);
    const fields = (line: Record<string, unknown>) => ({
      msg: line.msg,
      controller: line.controller,
      namespace: line.namespace,
      name: line.name,
    });
    expect(reconcileLines.map(fields)).toEqual([
      { msg: 'reconciling', controller: 'test', namespace: 'ns', name: 'a' },
      { msg: 'reconcile failed; retrying with backoff', controller: 'test', namespace: 'ns', name: 'a' },
      { msg: 'reconciling', controller: 'test', namespace: undefined, name: 'cluster-wide' },
      { msg: 'reconciling', controller: 'test', namespace: 'ns', name: 'a' },
    ]);
    // A cluster-scoped key has no namespace field at all.
    expect(reconcileLines[2]).not.toHaveProperty('namespace');
    const ids = reconcileLines.map((line) => line.reconcileID);
    expect(ids.every((id) => typeof id === 'string' && /^[0-9a-f-]{36}$/.test(id))).toBe(true);
    // The lines of one reconcile share its ID; the retry and every other reconcile get their own.
    expect(ids[1]).toBe(ids[0]);
    expect(new Set([ids[0], ids[2], ids[3]]).size).toBe(3);
    await controller.stop();
  });

  it('stop drains in-flight reconciles and aborts them after the drain timeout', async () => {
    let aborted = false;
    const { clock, controller } = setup(
      (_key, { signal }) =>
        new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve();
          });
        }),
    );
    await controller.start();
    controller.enqueue('ns/a');
    await flushMicrotasks();
    let stopped = false;
    const stopping = controller.stop(5_000).then(() => {
      stopped = true;
    });
    await clock.advance(4_999);
    expect(stopped).toBe(false);
    await clock.advance(1);
    await stopping;
    expect(aborted).toBe(true);
  });
});

describe('event mappers', () => {
  const child = {
    metadata: {
      namespace: 'ns',
      name: 'child',
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'Deployment', name: 'not-controller', uid: '1' },
        { apiVersion: 'management.platform/v1', kind: 'Cluster', name: 'parent', uid: '2', controller: true },
      ],
    },
  };

  it('maps to the controller owner of the given kind and group (any version), in the object namespace', () => {
    const owner = { group: 'management.platform', kind: 'Cluster' };
    expect(mapToControllerOwner({ ...owner, namespaced: true })(child)).toEqual(['ns/parent']);
    expect(mapToControllerOwner({ ...owner, namespaced: false })(child)).toEqual(['parent']);
    expect(
      mapToControllerOwner({ group: 'other.platform', kind: 'Cluster', namespaced: true })(child),
    ).toEqual([]);
    // An owner that is not the controller is not mapped to.
    expect(mapToControllerOwner({ group: 'apps', kind: 'Deployment', namespaced: true })(child)).toEqual([]);
  });
});

describe('watchHandler', () => {
  const object = (generation: number, resourceVersion: string) => ({
    metadata: { namespace: 'ns', name: 'a', generation, resourceVersion },
  });

  it('enqueues every event when no predicate filters, both objects of an update', () => {
    const keys: string[] = [];
    const mapper = (obj: { metadata: { resourceVersion: string } }) => [obj.metadata.resourceVersion];
    const handler = watchHandler(mapper, [], (key) => keys.push(key));
    handler.onAdd?.(object(1, '1'));
    handler.onUpdate?.(object(1, '1'), object(1, '2'));
    handler.onDelete?.(object(1, '2'), false);
    expect(keys).toEqual(['1', '1', '2', '2']);
  });

  it('enqueues a key both objects of an update map to once', () => {
    const keys: string[] = [];
    const handler = watchHandler(
      (obj) => [`${obj.metadata?.namespace}/${obj.metadata?.name}`],
      [],
      (key) => keys.push(key),
    );
    handler.onUpdate?.(object(1, '1'), object(2, '2'));
    expect(keys).toEqual(['ns/a']);
  });

  it('enqueues only the events every predicate lets through', () => {
    const keys: string[] = [];
    const handler = watchHandler(
      (obj) => [String(obj.metadata?.resourceVersion)],
      [generationChanged, { delete: (obj) => obj.metadata?.name !== 'a' }],
      (key) => keys.push(key),
    );
    handler.onAdd?.(object(1, '1'));
    // A status write: the resourceVersion moves, the generation does not.
    handler.onUpdate?.(object(1, '1'), object(1, '2'));
    expect(keys).toEqual(['1']);
    // A spec change.
    handler.onUpdate?.(object(1, '2'), object(2, '3'));
    expect(keys).toEqual(['1', '2', '3']);
    handler.onDelete?.(object(2, '3'), false);
    expect(keys).toEqual(['1', '2', '3']);
  });
});
