import { describe, expect, test } from 'vitest';
import type { Condition } from '../../api/meta.ts';
import {
  ActivityThrottle,
  activityStamp,
  DEFAULT_WAKE_WAIT_MS,
  isAwake,
  MAX_WAKE_WAIT_MS,
  notAwakeInTime,
  sleepingSince,
  wakeAction,
  wakeWaitMs,
} from './sleep-wake.ts';

const T1 = '2026-01-01T10:00:00Z';
const T2 = '2026-01-01T10:05:00Z';
const condition = (type: string, status: Condition['status'], at: string): Condition => ({
  type,
  status,
  reason: 'Any',
  message: '',
  lastTransitionTime: at,
});
const PROVISIONED = { templateRef: { name: 'small' } };
const withConditions = (...conditions: Condition[]) => ({ spec: PROVISIONED, status: { conditions } });

describe('wakeAction: what a request allowed to a virtual cluster does first', () => {
  test('an instance asleep is woken, whatever Ready says', () => {
    expect(
      wakeAction(withConditions(condition('Ready', 'False', T1), condition('Sleeping', 'True', T1))),
    ).toEqual({ kind: 'wake' });
    expect(wakeAction(withConditions(condition('Sleeping', 'True', T1)))).toEqual({ kind: 'wake' });
  });

  test('an awake, ready instance is relayed to at once, the request counted as its activity', () => {
    const awake = withConditions(condition('Ready', 'True', T2), condition('Sleeping', 'False', T1));
    expect(wakeAction(awake)).toEqual({ kind: 'relay', activity: true });
    expect(isAwake(awake)).toBe(true);
  });

  test('an instance woken and still starting (Sleeping went False after Ready went False) is waited for', () => {
    const starting = withConditions(condition('Ready', 'False', T1), condition('Sleeping', 'False', T2));
    expect(wakeAction(starting)).toEqual({ kind: 'wait' });
    expect(isAwake(starting)).toBe(false);
  });

  test('an instance being made for the first time (both conditions written at once) is relayed to: the relay answers for it', () => {
    const provisioning = withConditions(condition('Ready', 'False', T1), condition('Sleeping', 'False', T1));
    expect(wakeAction(provisioning)).toEqual({ kind: 'relay', activity: false });
    expect(wakeAction(withConditions(condition('Sleeping', 'False', T1)))).toEqual({
      kind: 'relay',
      activity: false,
    });
  });

  test('an awake instance whose API server went away later is relayed to (the relay answers for it), not waited for', () => {
    const down = withConditions(condition('Sleeping', 'False', T1), condition('Ready', 'False', T2));
    expect(wakeAction(down)).toEqual({ kind: 'relay', activity: false });
  });

  test('a provisioned instance without a Sleeping condition yet: relayed to, its activity counted once it is Ready', () => {
    expect(wakeAction(withConditions(condition('Ready', 'True', T1)))).toEqual({
      kind: 'relay',
      activity: true,
    });
    expect(wakeAction(withConditions(condition('Ready', 'False', T1)))).toEqual({
      kind: 'relay',
      activity: false,
    });
    expect(wakeAction({ spec: PROVISIONED, status: {} })).toEqual({ kind: 'relay', activity: false });
  });

  test('a registered instance (spec.endpoint: it has no sleep mode) and one not in the cache: relayed to, no activity', () => {
    const registered = { spec: { endpoint: 'https://dev.example.com' } };
    const ready = { ...registered, status: { conditions: [condition('Ready', 'True', T1)] } };
    expect(wakeAction(ready)).toEqual({ kind: 'relay', activity: false });
    const sleepingAnyway = { ...registered, status: { conditions: [condition('Sleeping', 'True', T1)] } };
    expect(wakeAction(sleepingAnyway)).toEqual({ kind: 'relay', activity: false });
    expect(wakeAction(undefined)).toEqual({ kind: 'relay', activity: false });
  });
});

describe('activityStamp and sleepingSince', () => {
  test('the annotation is the time in RFC 3339 UTC with milliseconds', () => {
    expect(activityStamp(Date.parse('2026-01-01T10:00:01.234Z'))).toBe('2026-01-01T10:00:01.234Z');
    expect(activityStamp(Date.parse('2026-01-01T10:00:01Z'), T1)).toBe('2026-01-01T10:00:01.000Z');
  });

  test('a clock at or behind the time the instance fell asleep still writes a later time (else it would not wake)', () => {
    expect(activityStamp(Date.parse(T1) - 5000, T1)).toBe('2026-01-01T10:00:00.001Z');
    expect(activityStamp(Date.parse(T1), T1)).toBe('2026-01-01T10:00:00.001Z');
  });

  test("sleepingSince is the status field, else the Sleeping condition's transition time", () => {
    expect(
      sleepingSince({ status: { sleepingSince: T2, conditions: [condition('Sleeping', 'True', T1)] } }),
    ).toBe(T2);
    expect(sleepingSince(withConditions(condition('Sleeping', 'True', T1)))).toBe(T1);
    expect(sleepingSince({})).toBeUndefined();
  });
});

describe('the bound of a wait: the client timeout', () => {
  test('the timeout query parameter bounds the wait, else 60 s; at most 5 minutes', () => {
    expect(wakeWaitMs('')).toBe(DEFAULT_WAKE_WAIT_MS);
    expect(DEFAULT_WAKE_WAIT_MS).toBe(60_000);
    expect(wakeWaitMs('?timeout=5s')).toBe(5000);
    expect(wakeWaitMs('?watch=1&timeout=250ms&timeoutSeconds=600')).toBe(250);
    expect(wakeWaitMs('?timeout=1h')).toBe(MAX_WAKE_WAIT_MS);
    expect(wakeWaitMs('?timeout=0s')).toBe(DEFAULT_WAKE_WAIT_MS);
    expect(wakeWaitMs('?timeout=soon')).toBe(DEFAULT_WAKE_WAIT_MS);
    expect(wakeWaitMs('?timeout=-1s')).toBe(DEFAULT_WAKE_WAIT_MS);
    expect(wakeWaitMs('?timeout=1m30s')).toBe(90_000);
    // A watch's own duration is not the client's timeout.
    expect(wakeWaitMs('?watch=1&timeoutSeconds=5')).toBe(DEFAULT_WAKE_WAIT_MS);
  });

  test('not ready in time: a 503 Status naming the instance, saying it is waking, with Retry-After', () => {
    const error = notAwakeInTime('virtual cluster "web/dev"', 5000);
    expect(error.code).toBe(503);
    expect(error.toStatus()).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
    expect(error.message).toBe(
      'virtual cluster "web/dev" is waking up from sleep and was not ready within 5s; try again shortly',
    );
    expect(error.headers['Retry-After']).toBe('5');
  });
});

describe('ActivityThrottle', () => {
  test('one write per key per interval', () => {
    const throttle = new ActivityThrottle(10_000);
    expect(throttle.due('a', 0)).toBe(true);
    expect(throttle.due('a', 9_999)).toBe(false);
    expect(throttle.due('b', 9_999)).toBe(true);
    expect(throttle.due('a', 10_000)).toBe(true);
    expect(throttle.due('a', 10_001)).toBe(false);
  });

  test('a clock that went back does not silence a key', () => {
    const throttle = new ActivityThrottle(10_000);
    expect(throttle.due('a', 50_000)).toBe(true);
    expect(throttle.due('a', 1_000)).toBe(true);
  });

  test('bounded: beyond its size the least recently written key is forgotten (and may write again)', () => {
    const throttle = new ActivityThrottle(10_000, 2);
    throttle.due('a', 0);
    throttle.due('b', 1);
    throttle.due('c', 2);
    expect(throttle.size).toBe(2);
    expect(throttle.due('b', 3)).toBe(false);
    expect(throttle.due('c', 3)).toBe(false);
    expect(throttle.due('a', 3)).toBe(true);
    throttle.forget('a');
    expect(throttle.size).toBe(1);
  });
});
