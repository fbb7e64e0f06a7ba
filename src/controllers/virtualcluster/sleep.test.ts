import { describe, expect, it } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../../api/labels.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { Condition } from '../../runtime/conditions.ts';
import { convergedConditions } from '../../runtime/reconcile-conditions.ts';
import {
  activitySources,
  asleepOutcome,
  decideSleep,
  lastActivityOf,
  sleepAnnotationsChanged,
  sleepEvent,
  withAwake,
} from './sleep.ts';

const T0 = Date.parse('2026-11-27T12:00:00Z');
const at = (seconds: number) => T0 + seconds * 1000;
const iso = (seconds: number) => new Date(at(seconds)).toISOString();

/** A provisioned instance created at T0, with `spec`, annotations and the Sleeping condition given. */
function instance(
  options: {
    sleepAfter?: number;
    deleteAfter?: number;
    annotations?: Record<string, string>;
    sleeping?: { status: 'True' | 'False'; since: number; reason?: string };
    lastActivity?: number;
  } = {},
): VirtualClusterInstance {
  const { sleeping } = options;
  const conditions: Condition[] = sleeping
    ? [
        {
          type: 'Sleeping',
          status: sleeping.status,
          reason: sleeping.reason ?? (sleeping.status === 'True' ? 'Inactive' : 'Awake'),
          message: '',
          lastTransitionTime: iso(sleeping.since),
        },
      ]
    : [];
  return {
    apiVersion: 'management.platform/v1',
    kind: 'VirtualClusterInstance',
    metadata: {
      name: 'vc',
      namespace: 'p-a',
      creationTimestamp: iso(0),
      ...(options.annotations ? { annotations: options.annotations } : {}),
    },
    spec: {
      templateRef: { name: 'small' },
      ...(options.sleepAfter !== undefined ? { sleepAfter: options.sleepAfter } : {}),
      ...(options.deleteAfter !== undefined ? { deleteAfter: options.deleteAfter } : {}),
    },
    status: {
      conditions,
      ...(sleeping?.status === 'True' ? { sleepingSince: iso(sleeping.since) } : {}),
      ...(options.lastActivity !== undefined ? { lastActivity: iso(options.lastActivity) } : {}),
    },
  };
}

describe('last activity', () => {
  it('is the latest of creation, the annotation, the syncer, the recorded one and the last wake', () => {
    const vci = instance({
      annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(30) },
      sleeping: { status: 'False', since: 50 },
      lastActivity: 40,
    });
    expect(activitySources(vci, { now: at(100), syncerActivity: at(20) })).toEqual({
      created: at(0),
      annotation: at(30),
      syncer: at(20),
      recorded: at(40),
      woke: at(50),
    });
    expect(lastActivityOf(vci, { now: at(100), syncerActivity: at(60) })).toBe(at(60));
    expect(lastActivityOf(vci, { now: at(100) })).toBe(at(50));
  });

  it('counts an annotation in the future as now, and ignores one that is not a time', () => {
    const future = instance({ annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(10_000) } });
    expect(lastActivityOf(future, { now: at(100) })).toBe(at(100));
    const garbage = instance({ annotations: { [LAST_ACTIVITY_ANNOTATION]: 'soon' } });
    expect(lastActivityOf(garbage, { now: at(100) })).toBe(at(0));
  });

  it('does not count the Sleeping=True transition (falling asleep) as a wake', () => {
    const vci = instance({ sleeping: { status: 'True', since: 70 } });
    expect(lastActivityOf(vci, { now: at(100) })).toBe(at(0));
  });
});

describe('decideSleep, awake', () => {
  it('stays awake until sleepAfter has passed, looked at again exactly then', () => {
    const vci = instance({ sleepAfter: 60, annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(20) } });
    expect(decideSleep(vci, { now: at(50) })).toMatchObject({
      action: 'stayAwake',
      lastActivity: at(20),
      requeueAfter: 30_000,
    });
    expect(decideSleep(vci, { now: at(80) })).toMatchObject({
      action: 'sleep',
      reason: 'Inactive',
      sleepingSince: iso(80),
    });
  });

  it('never sleeps for inactivity with sleepAfter 0 or absent, and needs no requeue then', () => {
    for (const sleepAfter of [0, undefined]) {
      const decision = decideSleep(instance(sleepAfter === undefined ? {} : { sleepAfter }), {
        now: at(1_000_000),
      });
      expect(decision.action).toBe('stayAwake');
      expect(decision.requeueAfter).toBeUndefined();
    }
  });

  it('a change its syncer carried keeps it awake, and moves the next look to sleepAfter after it', () => {
    const vci = instance({ sleepAfter: 60 });
    expect(decideSleep(vci, { now: at(70) }).action).toBe('sleep');
    expect(decideSleep(vci, { now: at(70), syncerActivity: at(65) })).toMatchObject({
      action: 'stayAwake',
      requeueAfter: 55_000,
    });
  });

  it('sleeps at once on a sleep request later than the last activity, and not on an older one', () => {
    const requested = (req: number, activity: number) =>
      instance({
        annotations: { [SLEEP_REQUESTED_ANNOTATION]: iso(req), [LAST_ACTIVITY_ANNOTATION]: iso(activity) },
      });
    expect(decideSleep(requested(40, 30), { now: at(41) })).toMatchObject({
      action: 'sleep',
      reason: 'SleepRequested',
      sleepingSince: iso(41),
    });
    expect(decideSleep(requested(30, 40), { now: at(41) }).action).toBe('stayAwake');
  });

  it('takes a sleep request dated in the future at its time', () => {
    const vci = instance({ annotations: { [SLEEP_REQUESTED_ANNOTATION]: iso(100) } });
    expect(decideSleep(vci, { now: at(40) })).toMatchObject({ action: 'stayAwake', requeueAfter: 60_000 });
    expect(decideSleep(vci, { now: at(100) })).toMatchObject({ action: 'sleep', reason: 'SleepRequested' });
  });

  it('a wake after a sleep request counts as activity: it does not fall asleep again for that request', () => {
    const vci = instance({
      annotations: { [SLEEP_REQUESTED_ANNOTATION]: iso(40) },
      sleeping: { status: 'False', since: 45 },
    });
    expect(decideSleep(vci, { now: at(50) }).action).toBe('stayAwake');
  });
});

describe('decideSleep, asleep', () => {
  it('stays asleep while no activity is later than sleepingSince, with no requeue without deleteAfter', () => {
    const vci = instance({
      sleepAfter: 10,
      annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(5) },
      sleeping: { status: 'True', since: 15, reason: 'SleepRequested' },
    });
    const decision = decideSleep(vci, { now: at(1000) });
    expect(decision).toMatchObject({
      action: 'stayAsleep',
      reason: 'SleepRequested',
      sleepingSince: iso(15),
    });
    expect(decision.requeueAfter).toBeUndefined();
  });

  it('wakes on activity later than sleepingSince, however short sleepAfter is', () => {
    const vci = instance({
      sleepAfter: 1,
      annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(100) },
      sleeping: { status: 'True', since: 15 },
    });
    expect(decideSleep(vci, { now: at(500) })).toMatchObject({
      action: 'wake',
      wokeAt: iso(500),
      statusLastActivity: iso(500),
      requeueAfter: 1000,
    });
  });

  it('is looked at again when deleteAfter runs out, and deleted then, asleep or not', () => {
    const asleep = instance({ deleteAfter: 100, sleeping: { status: 'True', since: 15 } });
    expect(decideSleep(asleep, { now: at(40) })).toMatchObject({
      action: 'stayAsleep',
      requeueAfter: 60_000,
    });
    expect(decideSleep(asleep, { now: at(100) }).action).toBe('delete');
    expect(decideSleep(instance({ deleteAfter: 100, sleepAfter: 500 }), { now: at(100) }).action).toBe(
      'delete',
    );
  });
});

describe('status.lastActivity', () => {
  it('is written at most once a minute while nothing changes a decision', () => {
    const vci = instance({ sleepAfter: 600, lastActivity: 0 });
    expect(decideSleep(vci, { now: at(70), syncerActivity: at(50) }).statusLastActivity).toBe(iso(0));
    expect(decideSleep(vci, { now: at(70), syncerActivity: at(65) }).statusLastActivity).toBe(iso(65));
  });

  it('is written at once when the instance falls asleep', () => {
    const vci = instance({
      sleepAfter: 600,
      lastActivity: 0,
      annotations: { [SLEEP_REQUESTED_ANNOTATION]: iso(30), [LAST_ACTIVITY_ANNOTATION]: iso(20) },
    });
    expect(decideSleep(vci, { now: at(31) })).toMatchObject({ action: 'sleep', statusLastActivity: iso(20) });
  });
});

describe('outcomes and Events', () => {
  it('asleep: Sleeping=True whose transition time is status.sleepingSince, Ready=False Sleeping', () => {
    const decision = decideSleep(instance({ sleepAfter: 10 }), { now: at(12) });
    const outcome = asleepOutcome(decision);
    expect(outcome.ready).toMatchObject({ status: 'False', reason: 'Sleeping' });
    expect(outcome.status).toEqual({ sleepingSince: iso(12), lastActivity: iso(0) });
    const written = convergedConditions(
      [{ type: 'Sleeping', status: 'False', reason: 'Awake', message: '', lastTransitionTime: iso(0) }],
      outcome,
      1,
      new Date(at(13)),
    );
    expect(written.find((c) => c.type === 'Sleeping')).toMatchObject({
      status: 'True',
      reason: 'Inactive',
      lastTransitionTime: iso(12),
    });
    expect(written.find((c) => c.type === 'Syncing')).toMatchObject({ status: 'False', reason: 'Sleeping' });
    expect(written.find((c) => c.type === 'Provisioned')).toBeUndefined();
  });

  it('awake: Sleeping=False Awake, no sleepingSince, the sooner of the two requeues', () => {
    const decision = decideSleep(instance({ sleepAfter: 10 }), { now: at(4) });
    const outcome = withAwake(
      { ready: { status: 'True', reason: 'Ready', message: '' }, requeueAfter: 60_000 },
      decision,
    );
    expect(outcome.requeueAfter).toBe(6000);
    expect(outcome.status).toEqual({ sleepingSince: undefined, lastActivity: iso(0) });
    expect(outcome.conditions).toContainEqual(expect.objectContaining({ type: 'Sleeping', status: 'False' }));
  });

  it('woken: the Sleeping=False transition is the wake time', () => {
    const vci = instance({
      annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(30) },
      sleeping: { status: 'True', since: 20 },
    });
    const outcome = withAwake(
      { ready: { status: 'True', reason: 'Ready', message: '' } },
      decideSleep(vci, { now: at(31) }),
    );
    const written = convergedConditions(vci.status?.conditions ?? [], outcome, 1, new Date(at(40)));
    expect(written.find((c) => c.type === 'Sleeping')?.lastTransitionTime).toBe(iso(31));
  });

  it('one Event per transition: FellAsleep, Woke, DeletedForInactivity; none otherwise', () => {
    expect(sleepEvent(decideSleep(instance({ sleepAfter: 10 }), { now: at(12) }))?.reason).toBe('FellAsleep');
    const woken = instance({
      annotations: { [LAST_ACTIVITY_ANNOTATION]: iso(30) },
      sleeping: { status: 'True', since: 20 },
    });
    expect(sleepEvent(decideSleep(woken, { now: at(31) }))?.reason).toBe('Woke');
    expect(sleepEvent(decideSleep(instance({ deleteAfter: 10 }), { now: at(12) }))?.reason).toBe(
      'DeletedForInactivity',
    );
    expect(sleepEvent(decideSleep(instance({ sleepAfter: 10 }), { now: at(2) }))).toBeUndefined();
  });
});

describe('sleepAnnotationsChanged (the watch predicate)', () => {
  const annotated = (annotations: Record<string, string>, asleep: boolean) =>
    instance({ annotations, ...(asleep ? { sleeping: { status: 'True', since: 10 } } : {}) });

  it('passes a new sleep request, and a new last activity of an asleep instance (the wake request)', () => {
    expect(
      sleepAnnotationsChanged(
        annotated({}, false),
        annotated({ [SLEEP_REQUESTED_ANNOTATION]: iso(1) }, false),
      ),
    ).toBe(true);
    expect(
      sleepAnnotationsChanged(
        annotated({ [LAST_ACTIVITY_ANNOTATION]: iso(1) }, true),
        annotated({ [LAST_ACTIVITY_ANNOTATION]: iso(2) }, true),
      ),
    ).toBe(true);
  });

  it("lets an awake instance's activity and unrelated annotations through to nothing", () => {
    expect(
      sleepAnnotationsChanged(
        annotated({ [LAST_ACTIVITY_ANNOTATION]: iso(1) }, false),
        annotated({ [LAST_ACTIVITY_ANNOTATION]: iso(2) }, false),
      ),
    ).toBe(false);
    expect(sleepAnnotationsChanged(annotated({ other: 'a' }, true), annotated({ other: 'b' }, true))).toBe(
      false,
    );
  });
});
