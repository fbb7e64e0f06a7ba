import { ApiException, type V1ObjectMeta } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, test } from 'vitest';
import { FakeClock } from '../../test-support/fake-clock.ts';
import type { Condition } from './conditions.ts';
import type { ReconcileContext } from './controller.ts';
import { RuntimeError, TerminalError } from './errors.ts';
import type { EventInput, ObjectReference } from './events.ts';
import {
  convergedConditions,
  failedConditions,
  PROGRESSING_WITH_RETRY,
  stalledConditions,
} from './reconcile-conditions.ts';
import { type Converged, objectReconciler } from './reconciler.ts';
import type { ScaffoldStatus, ScaffoldWrites } from './scaffold-writes.ts';
import { Store } from './store.ts';

class SomethingBroke extends RuntimeError {}
class SpecCannotWork extends TerminalError {}

const t0 = new Date('2026-01-01T00:00:00Z');
const t1 = new Date('2026-01-01T00:01:00Z');
const byType = (conditions: Condition[]) => Object.fromEntries(conditions.map((c) => [c.type, c]));

describe('convergedConditions', () => {
  test('Ready as the outcome says, for the generation; no Reconciling or Stalled when done', () => {
    const stalled = failedConditions([], new SpecCannotWork('no'), 1, t0);
    const next = byType(
      convergedConditions(stalled, { ready: { status: 'True', reason: 'Done', message: 'ok' } }, 2, t1),
    );
    expect(Object.keys(next).sort()).toEqual(['Ready']);
    expect(next.Ready).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Done',
      message: 'ok',
      observedGeneration: 2,
      lastTransitionTime: '2026-01-01T00:01:00Z',
    });
  });

  test('work still outstanding: Reconciling=True beside Ready', () => {
    const next = byType(
      convergedConditions(
        [],
        {
          ready: { status: 'Unknown', reason: 'Waiting', message: 'w' },
          reconciling: { reason: 'WaitingForNamespace', message: 'w' },
        },
        3,
        t0,
      ),
    );
    expect(next.Reconciling).toMatchObject({
      status: 'True',
      reason: 'WaitingForNamespace',
      observedGeneration: 3,
    });
    expect(next.Ready).toMatchObject({ status: 'Unknown' });
  });

  test("the controller's own conditions are set and removed as asked; others are kept", () => {
    const before: Condition[] = [
      {
        type: 'Syncing',
        status: 'True',
        reason: 'Running',
        message: '',
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
      {
        type: 'Foreign',
        status: 'True',
        reason: 'X',
        message: '',
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ];
    const removed = byType(
      convergedConditions(
        before,
        { ready: { status: 'True', reason: 'R', message: '' }, removeConditions: ['Syncing'] },
        1,
        t0,
      ),
    );
    expect(Object.keys(removed).sort()).toEqual(['Foreign', 'Ready']);
    const set = byType(
      convergedConditions(
        before,
        {
          ready: { status: 'True', reason: 'R', message: '' },
          conditions: [{ type: 'Syncing', status: 'True', reason: 'Running', message: 'now' }],
        },
        4,
        t1,
      ),
    );
    // Same status: the transition time stays, the rest follows the outcome and the generation.
    expect(set.Syncing).toMatchObject({
      message: 'now',
      observedGeneration: 4,
      lastTransitionTime: '2025-01-01T00:00:00Z',
    });
  });
});

describe('stalledConditions', () => {
  test("the controller's own conditions as the outcome says, then Stalled=True and Ready=False with the error's class", () => {
    const before = convergedConditions(
      [],
      {
        ready: { status: 'Unknown', reason: 'Starting', message: 's' },
        reconciling: { reason: 'Starting', message: 's' },
        conditions: [{ type: 'Syncing', status: 'Unknown', reason: 'Starting', message: 's' }],
      },
      1,
      t0,
    );
    const next = byType(
      stalledConditions(
        before,
        {
          conditions: [{ type: 'Syncing', status: 'False', reason: 'InvalidConfig', message: 'bad' }],
          stalled: new SpecCannotWork('bad'),
        },
        2,
        t1,
      ),
    );
    expect(Object.keys(next).sort()).toEqual(['Ready', 'Stalled', 'Syncing']);
    expect(next.Syncing).toMatchObject({ status: 'False', reason: 'InvalidConfig', observedGeneration: 2 });
    expect(next.Stalled).toMatchObject({ status: 'True', reason: 'SpecCannotWork', message: 'bad' });
    expect(next.Ready).toMatchObject({ status: 'False', reason: 'SpecCannotWork', observedGeneration: 2 });
  });
});

describe('failedConditions', () => {
  test('an ordinary error: Ready=False with its class, Reconciling=True (a retry is due), Stalled cleared', () => {
    const stalled = failedConditions([], new SpecCannotWork('no'), 1, t0);
    const next = byType(failedConditions(stalled, new SomethingBroke('boom'), 2, t1));
    expect(next.Ready).toMatchObject({
      status: 'False',
      reason: 'SomethingBroke',
      message: 'boom',
      observedGeneration: 2,
    });
    expect(next.Reconciling).toMatchObject({ status: 'True', reason: PROGRESSING_WITH_RETRY });
    expect(next.Stalled).toBeUndefined();
  });

  test('a TerminalError: Stalled=True and Ready=False with its class, no Reconciling', () => {
    const retrying = failedConditions([], new SomethingBroke('boom'), 1, t0);
    const next = byType(failedConditions(retrying, new SpecCannotWork('cannot'), 1, t1));
    expect(next.Stalled).toMatchObject({ status: 'True', reason: 'SpecCannotWork', message: 'cannot' });
    expect(next.Ready).toMatchObject({ status: 'False', reason: 'SpecCannotWork' });
    expect(next.Reconciling).toBeUndefined();
    // Ready was False before: its transition time stays.
    expect(next.Ready?.lastTransitionTime).toBe('2026-01-01T00:00:00Z');
  });

  test("an API error: the Status reason and message, never client-node's dump of body and headers", () => {
    const err = new ApiException(
      403,
      'forbidden',
      { kind: 'Status', reason: 'Forbidden', message: 'roles is forbidden: quota exceeded' },
      { 'audit-id': 'abc' },
    );
    const next = byType(failedConditions([], err, 1, t0));
    expect(next.Ready).toMatchObject({ reason: 'Forbidden', message: 'roles is forbidden: quota exceeded' });
    expect(JSON.stringify(next)).not.toContain('audit-id');
  });
});

/**
 * The scaffold itself, with doubles of its own writes (`ScaffoldWrites`) that answer as the
 * apiserver would (the object with a new resourceVersion), an Event recorder that keeps what it
 * is given and a logger whose lines the test reads. The cache is a real Store.
 */
describe('objectReconciler', () => {
  type WidgetStatus = ScaffoldStatus & { size?: number };
  interface Widget {
    apiVersion: string;
    kind: string;
    metadata: V1ObjectMeta & {
      namespace: string;
      name: string;
      uid: string;
      generation: number;
      resourceVersion: string;
    };
    spec: { size: number };
    status?: WidgetStatus;
  }
  const FINALIZER = 'test.platform/cleanup';
  const KEY = 'ns/w';

  const widget = (metadata: Partial<Widget['metadata']> = {}, status?: WidgetStatus): Widget => ({
    apiVersion: 'test.platform/v1',
    kind: 'Widget',
    metadata: { namespace: 'ns', name: 'w', uid: 'uid-w', generation: 1, resourceVersion: '10', ...metadata },
    spec: { size: 2 },
    ...(status ? { status } : {}),
  });

  /** Every write and cleanup in the order they happened. */
  type Step =
    | { op: 'addFinalizer' | 'removeFinalizer'; finalizer: string; resourceVersion: string }
    | { op: 'writeStatus'; status: WidgetStatus; resourceVersion: string }
    | { op: 'cleanup'; key: string; resourceVersion: string | undefined };

  function setup(
    options: {
      apply?: (obj: Widget) => Promise<Converged<WidgetStatus>>;
      statusOf?: (obj: Widget) => Partial<WidgetStatus>;
      needsFinalizer?: (obj: Widget) => boolean;
      stalledOn?: (obj: Widget) => string;
      formerFinalizers?: string[];
      cleanup?: () => Promise<void>;
    } = {},
  ) {
    const steps: Step[] = [];
    let nextVersion = 100;
    const answer = (obj: Widget, changes: Partial<Widget>): Widget => ({
      ...obj,
      ...changes,
      metadata: { ...obj.metadata, ...changes.metadata, resourceVersion: String(nextVersion++) },
    });
    /** Set to make the status write fail. */
    const failures: { status?: unknown } = {};
    const writes: ScaffoldWrites<Widget> = {
      async addFinalizer(obj, finalizer) {
        steps.push({ op: 'addFinalizer', finalizer, resourceVersion: obj.metadata.resourceVersion });
        const finalizers = [...(obj.metadata.finalizers ?? []), finalizer];
        return answer(obj, { metadata: { ...obj.metadata, finalizers } });
      },
      async removeFinalizer(obj, finalizer) {
        steps.push({ op: 'removeFinalizer', finalizer, resourceVersion: obj.metadata.resourceVersion });
        const finalizers = (obj.metadata.finalizers ?? []).filter((f) => f !== finalizer);
        return answer(obj, { metadata: { ...obj.metadata, finalizers } });
      },
      async writeStatus(obj, status) {
        steps.push({ op: 'writeStatus', status, resourceVersion: obj.metadata.resourceVersion });
        if (failures.status) throw failures.status;
        return answer(obj, { status });
      },
    };
    const events: Array<{ regarding: ObjectReference; input: EventInput }> = [];
    const logs: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line)) });
    const ctx: ReconcileContext = { signal: new AbortController().signal, logger };
    const store = new Store<Widget>();
    const applied: Widget[] = [];
    const reconcile = objectReconciler<Widget, WidgetStatus>({
      kind: 'Widget',
      writes,
      clock: new FakeClock(Date.UTC(2026, 0, 1)),
      events: { record: async (regarding, input) => void events.push({ regarding, input }) },
      store,
      finalizer: FINALIZER,
      action: 'ConvergeWidget',
      ...(options.statusOf ? { statusOf: options.statusOf } : {}),
      ...(options.needsFinalizer ? { needsFinalizer: options.needsFinalizer } : {}),
      ...(options.stalledOn ? { stalledOn: options.stalledOn } : {}),
      ...(options.formerFinalizers ? { formerFinalizers: options.formerFinalizers } : {}),
      async cleanup(key, obj) {
        await options.cleanup?.();
        steps.push({ op: 'cleanup', key, resourceVersion: obj?.metadata.resourceVersion });
      },
      async apply(obj) {
        applied.push(obj);
        return options.apply
          ? options.apply(obj)
          : { ready: { status: 'True', reason: 'Converged', message: 'as asked' } };
      },
    });
    return {
      reconcile: () => reconcile(KEY, ctx),
      store,
      steps,
      events,
      logs,
      applied,
      failures,
      ops: () => steps.map((step) => step.op),
      /** The status of the last status write. */
      lastStatus: () => steps.filter((step) => step.op === 'writeStatus').at(-1)?.status,
    };
  }
  const conditionsOf = (status: WidgetStatus | undefined) => byType(status?.conditions ?? []);

  test('the finalizer is added and the object written used from then on; the status is written once, with observedGeneration', async () => {
    const t = setup({
      statusOf: (obj) => ({ size: obj.spec.size }),
      apply: async () => ({
        ready: { status: 'True', reason: 'Converged', message: 'as asked' },
        requeueAfter: 30_000,
      }),
    });
    t.store.upsert(widget({ generation: 3 }));
    expect(await t.reconcile()).toEqual({ requeueAfter: 30_000 });
    expect(t.ops()).toEqual(['addFinalizer', 'writeStatus']);
    // apply and the status write got the object the finalizer patch returned, not the cached one.
    expect(t.applied.map((obj) => obj.metadata)).toMatchObject([
      { resourceVersion: '100', finalizers: [FINALIZER] },
    ]);
    expect(t.steps[1]).toMatchObject({ op: 'writeStatus', resourceVersion: '100' });
    const status = t.lastStatus();
    expect(status).toMatchObject({ observedGeneration: 3, size: 2 });
    expect(conditionsOf(status)).toEqual({
      Ready: {
        type: 'Ready',
        status: 'True',
        reason: 'Converged',
        message: 'as asked',
        observedGeneration: 3,
        lastTransitionTime: '2026-01-01T00:00:00Z',
      },
    });
    // The cache answers with our own writes until the watch brings them.
    expect(t.store.fresh(KEY)?.metadata.resourceVersion).toBe('101');
    expect(t.events).toEqual([]);
  });

  test('work outstanding: Reconciling=True with its reason beside Ready, in the same single write', async () => {
    const t = setup({
      apply: async () => ({
        ready: { status: 'Unknown', reason: 'Waiting', message: 'for the namespace' },
        reconciling: { reason: 'WaitingForNamespace', message: 'for the namespace' },
      }),
    });
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    expect(await t.reconcile()).toBeUndefined();
    expect(t.ops()).toEqual(['writeStatus']);
    const conditions = conditionsOf(t.lastStatus());
    expect(conditions.Reconciling).toMatchObject({ status: 'True', reason: 'WaitingForNamespace' });
    expect(conditions.Ready).toMatchObject({ status: 'Unknown', reason: 'Waiting' });
  });

  test('an ordinary error: Ready=False (its class) and Reconciling=True while retrying, a Warning Event, the error rethrown', async () => {
    let fail = true;
    const t = setup({
      apply: async () => {
        if (fail) throw new SomethingBroke('the quota is exhausted');
        return { ready: { status: 'True', reason: 'Converged', message: 'as asked' } };
      },
    });
    t.store.upsert(widget({ finalizers: [FINALIZER], generation: 2 }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(SomethingBroke);
    const failing = conditionsOf(t.lastStatus());
    expect(Object.keys(failing).sort()).toEqual(['Ready', 'Reconciling']);
    expect(failing).toMatchObject({
      Ready: { status: 'False', reason: 'SomethingBroke', message: 'the quota is exhausted' },
      Reconciling: { status: 'True', reason: PROGRESSING_WITH_RETRY, observedGeneration: 2 },
    });
    expect(t.lastStatus()?.observedGeneration).toBe(2);
    expect(t.events).toEqual([
      {
        regarding: {
          apiVersion: 'test.platform/v1',
          kind: 'Widget',
          name: 'w',
          namespace: 'ns',
          uid: 'uid-w',
        },
        input: {
          type: 'Warning',
          reason: 'SomethingBroke',
          action: 'ConvergeWidget',
          note: 'the quota is exhausted',
        },
      },
    ]);

    // The retry (the work queue's, with backoff) runs apply again; once it works, Reconciling goes.
    fail = false;
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(2);
    const recovered = conditionsOf(t.lastStatus());
    expect(Object.keys(recovered).sort()).toEqual(['Ready']);
    expect(recovered.Ready).toMatchObject({ status: 'True', reason: 'Converged' });
  });

  test('a TerminalError: Stalled=True, and nothing more until the object changes (a new generation)', async () => {
    const t = setup({
      apply: async (obj) => {
        if (obj.spec.size > 2) return { ready: { status: 'True', reason: 'Converged', message: 'as asked' } };
        throw new SpecCannotWork('size 2 cannot work');
      },
    });
    t.store.upsert(widget({ finalizers: [FINALIZER], generation: 1 }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(SpecCannotWork);
    const stalled = conditionsOf(t.lastStatus());
    expect(stalled.Stalled).toMatchObject({
      status: 'True',
      reason: 'SpecCannotWork',
      observedGeneration: 1,
    });
    expect(stalled.Ready).toMatchObject({ status: 'False', reason: 'SpecCannotWork' });
    expect(stalled.Reconciling).toBeUndefined();
    expect(t.events.map((e) => e.input.reason)).toEqual(['SpecCannotWork']);

    // A resync, or the watch bringing our own status write: the object is unchanged, nothing runs.
    expect(await t.reconcile()).toBeUndefined();
    const written = t.store.fresh(KEY)!;
    t.store.upsert(written);
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(1);
    expect(t.ops()).toEqual(['writeStatus']);

    // The spec changes (generation 2): apply runs again, and the Stalled condition goes.
    t.store.upsert({
      ...written,
      metadata: { ...written.metadata, generation: 2, resourceVersion: '200' },
      spec: { size: 3 },
    });
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(2);
    const recovered = conditionsOf(t.lastStatus());
    expect(Object.keys(recovered).sort()).toEqual(['Ready']);
    expect(recovered.Ready).toMatchObject({ status: 'True', observedGeneration: 2 });
    expect(t.lastStatus()?.observedGeneration).toBe(2);
  });

  test("an outcome that stalls: Stalled=True beside the controller's own conditions in one write, the error rethrown, nothing more until the object changes", async () => {
    const t = setup({
      statusOf: (obj) => ({ size: obj.spec.size }),
      apply: async (obj) =>
        obj.spec.size > 2
          ? { ready: { status: 'True', reason: 'Converged', message: 'as asked' } }
          : {
              ready: { status: 'False', reason: 'Ignored', message: 'the error says' },
              reconciling: { reason: 'Ignored', message: 'the error says' },
              conditions: [{ type: 'Sized', status: 'False', reason: 'TooSmall', message: 'size 2' }],
              requeueAfter: 1_000,
              stalled: new SpecCannotWork('size 2 cannot work'),
            },
    });
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(SpecCannotWork);
    expect(t.ops()).toEqual(['writeStatus']);
    expect(t.lastStatus()).toMatchObject({ observedGeneration: 1, size: 2 });
    const stalled = conditionsOf(t.lastStatus());
    expect(Object.keys(stalled).sort()).toEqual(['Ready', 'Sized', 'Stalled']);
    expect(stalled).toMatchObject({
      Ready: { status: 'False', reason: 'SpecCannotWork', message: 'size 2 cannot work' },
      Stalled: { status: 'True', reason: 'SpecCannotWork', message: 'size 2 cannot work' },
      Sized: { status: 'False', reason: 'TooSmall' },
    });
    expect(t.events.map((e) => [e.input.type, e.input.reason])).toEqual([['Warning', 'SpecCannotWork']]);

    // Unchanged: nothing runs.
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(1);

    // A new spec: it converges, Stalled goes, the controller's conditions stay as they were set.
    const written = t.store.fresh(KEY)!;
    t.store.upsert({
      ...written,
      metadata: { ...written.metadata, generation: 2, resourceVersion: '200' },
      spec: { size: 3 },
    });
    expect(await t.reconcile()).toBeUndefined();
    expect(Object.keys(conditionsOf(t.lastStatus())).sort()).toEqual(['Ready', 'Sized']);
  });

  test('stalledOn: a stalled object is looked at again when what it depends on changes, not only when it does', async () => {
    /** What the stall depends on besides the object (a namespace's project, say). */
    let outside = 'elsewhere';
    const t = setup({
      stalledOn: () => outside,
      apply: async () => {
        if (outside === 'elsewhere') throw new SpecCannotWork('not in the project');
        return { ready: { status: 'True', reason: 'Converged', message: 'as asked' } };
      },
    });
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(SpecCannotWork);
    // Neither the object nor what it depends on changed: nothing runs.
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(1);
    // What it depends on changed (the object did not): apply runs again and the stall goes.
    outside = 'in the project';
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(2);
    expect(conditionsOf(t.lastStatus()).Stalled).toBeUndefined();
  });

  test('stalledOn is read before apply: a change while apply runs is not taken for the state it stalled in', async () => {
    let outside = 'before';
    const t = setup({
      stalledOn: () => outside,
      apply: async () => {
        // The change lands while apply runs (apply still saw the old state and stalls).
        outside = 'after';
        throw new SpecCannotWork('as it was');
      },
    });
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(SpecCannotWork);
    // The event of that change enqueued the key again: apply runs.
    await expect(t.reconcile()).rejects.toBeInstanceOf(SpecCannotWork);
    expect(t.applied).toHaveLength(2);
    // And now that it stalled with it: nothing more.
    expect(await t.reconcile()).toBeUndefined();
    expect(t.applied).toHaveLength(2);
  });

  test('deletion first: cleanup, then our finalizers removed (former ones too), nothing else', async () => {
    const t = setup({ formerFinalizers: ['test.platform/former'] });
    t.store.upsert(
      widget({
        deletionTimestamp: new Date('2026-01-01T00:00:00Z'),
        finalizers: ['someone.else/hold', FINALIZER, 'test.platform/former'],
      }),
    );
    expect(await t.reconcile()).toBeUndefined();
    expect(t.steps).toEqual([
      { op: 'cleanup', key: KEY, resourceVersion: '10' },
      { op: 'removeFinalizer', finalizer: FINALIZER, resourceVersion: '10' },
      { op: 'removeFinalizer', finalizer: 'test.platform/former', resourceVersion: '100' },
    ]);
    expect(t.applied).toEqual([]);
    expect(t.store.fresh(KEY)?.metadata.finalizers).toEqual(['someone.else/hold']);

    // Held by someone else's finalizer only: nothing of ours is left to do.
    expect(await t.reconcile()).toBeUndefined();
    expect(t.steps).toHaveLength(3);
  });

  test('deletion: a failed cleanup keeps the finalizer and is retried', async () => {
    class CleanupFailed extends RuntimeError {}
    const t = setup({
      cleanup: async () => {
        throw new CleanupFailed('the namespace could not be deleted');
      },
    });
    t.store.upsert(widget({ deletionTimestamp: new Date('2026-01-01T00:00:00Z'), finalizers: [FINALIZER] }));
    await expect(t.reconcile()).rejects.toBeInstanceOf(CleanupFailed);
    expect(t.steps).toEqual([]);
    expect(t.applied).toEqual([]);
  });

  test('gone: cleanup of whatever was left behind, and no write', async () => {
    const t = setup();
    expect(await t.reconcile()).toBeUndefined();
    expect(t.steps).toEqual([{ op: 'cleanup', key: KEY, resourceVersion: undefined }]);
    expect(t.applied).toEqual([]);
  });

  test('a finalizer the object no longer needs: cleanup, the finalizer removed, then apply on the object written', async () => {
    const t = setup({ needsFinalizer: (obj) => obj.spec.size > 2 });
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    await t.reconcile();
    expect(t.ops()).toEqual(['cleanup', 'removeFinalizer', 'writeStatus']);
    expect(t.applied.map((obj) => obj.metadata)).toMatchObject([{ resourceVersion: '100', finalizers: [] }]);
    // Not needed and not there: neither added nor cleaned up.
    t.steps.length = 0;
    t.store.upsert(widget({ resourceVersion: '11' }));
    await t.reconcile();
    expect(t.ops()).toEqual(['writeStatus']);
  });

  class StatusRefused extends RuntimeError {}
  /** A reconcile whose status write is refused: what it threw and the warnings it logged. */
  const withRefusedStatusWrite = async (apply?: () => Promise<Converged<WidgetStatus>>) => {
    const t = setup(apply ? { apply } : {});
    t.failures.status = new StatusRefused('the object changed since it was read');
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    const thrown = await t.reconcile().then(
      () => undefined,
      (err: unknown) => err,
    );
    const warnings = t.logs.filter((line) => line.level === 40).map((line) => [line.msg, line.reason]);
    return { thrown, warnings, events: t.events.map((e) => e.input.reason) };
  };

  test('a failed status write is logged and fails the reconcile (retried)', async () => {
    const { thrown, warnings } = await withRefusedStatusWrite();
    expect(thrown).toBeInstanceOf(StatusRefused);
    expect(warnings).toEqual([['writing the status failed; retrying', 'StatusRefused']]);
  });

  test("a failed status write after a failed apply is logged; apply's error is the one rethrown", async () => {
    const { thrown, warnings, events } = await withRefusedStatusWrite(async () => {
      throw new SomethingBroke('boom');
    });
    expect(thrown).toBeInstanceOf(SomethingBroke);
    expect(warnings).toEqual([['writing the failure status failed', 'StatusRefused']]);
    expect(events).toEqual(['SomethingBroke']);
  });

  test('deleted while it converged (the status write answered 404): done, nothing to retry', async () => {
    const t = setup();
    t.failures.status = new ApiException(404, 'not found', { kind: 'Status', reason: 'NotFound' }, {});
    t.store.upsert(widget({ finalizers: [FINALIZER] }));
    expect(await t.reconcile()).toBeUndefined();
    expect(t.logs.filter((line) => (line.level as number) >= 40)).toEqual([]);
  });

  test('status: false: no status write; failures are Warning Events and retried, a TerminalError stalls the key', async () => {
    const store = new Store<Widget>();
    const writes: ScaffoldWrites<Widget> = {
      addFinalizer: async () => expect.fail('no finalizer'),
      removeFinalizer: async () => expect.fail('no finalizer'),
      writeStatus: async () => expect.fail('no status'),
    };
    const events: EventInput[] = [];
    const errors: Error[] = [new SomethingBroke('boom'), new SpecCannotWork('never')];
    let calls = 0;
    const reconcile = objectReconciler<Widget, never>({
      kind: 'Widget',
      writes,
      clock: new FakeClock(),
      events: { record: async (_regarding, input) => void events.push(input) },
      store,
      action: 'FillWidget',
      status: false,
      async apply() {
        calls++;
        const err = errors.shift();
        if (err) throw err;
        return { requeueAfter: 1_000 };
      },
    });
    const ctx: ReconcileContext = { signal: new AbortController().signal, logger: pino({ level: 'silent' }) };
    store.upsert(widget());
    await expect(reconcile(KEY, ctx)).rejects.toBeInstanceOf(SomethingBroke);
    await expect(reconcile(KEY, ctx)).rejects.toBeInstanceOf(SpecCannotWork);
    expect(await reconcile(KEY, ctx)).toBeUndefined();
    expect(calls).toBe(2);
    expect(events.map((e) => [e.type, e.reason])).toEqual([
      ['Warning', 'SomethingBroke'],
      ['Warning', 'SpecCannotWork'],
    ]);
    store.upsert(widget({ resourceVersion: '11' }));
    expect(await reconcile(KEY, ctx)).toEqual({ requeueAfter: 1_000 });
    expect(calls).toBe(3);
  });
});
