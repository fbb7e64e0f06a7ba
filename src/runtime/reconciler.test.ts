import { ApiException } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import type { Condition } from './conditions.ts';
import { RuntimeError, TerminalError } from './errors.ts';
import { convergedConditions, failedConditions, PROGRESSING_WITH_RETRY } from './reconciler.ts';

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
