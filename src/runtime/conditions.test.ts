import { describe, expect, it } from 'vitest';
import { findCondition, removeCondition, setCondition } from './conditions.ts';

const t0 = new Date('2025-01-01T00:00:00.123Z');
const t1 = new Date('2025-01-01T01:00:00Z');

describe('setCondition', () => {
  it('stamps a new condition with now (second precision)', () => {
    const list = setCondition(
      undefined,
      { type: 'Ready', status: 'False', reason: 'Pending', message: '', observedGeneration: 1 },
      t0,
    );
    expect(list).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'Pending',
        message: '',
        observedGeneration: 1,
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ]);
  });

  it('keeps lastTransitionTime when only reason, message or observedGeneration change', () => {
    const first = setCondition(
      [],
      { type: 'Ready', status: 'False', reason: 'A', message: 'a', observedGeneration: 1 },
      t0,
    );
    const second = setCondition(
      first,
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 2 },
      t1,
    );
    expect(second[0]).toMatchObject({
      reason: 'B',
      message: 'b',
      observedGeneration: 2,
      lastTransitionTime: '2025-01-01T00:00:00Z',
    });
    expect(first[0]?.reason).toBe('A');
  });

  it('moves lastTransitionTime when the status flips, and leaves other types alone', () => {
    let list = setCondition([], { type: 'Stalled', status: 'False', reason: 'Ok', message: '' }, t0);
    list = setCondition(list, { type: 'Ready', status: 'False', reason: 'Pending', message: '' }, t0);
    list = setCondition(list, { type: 'Ready', status: 'True', reason: 'Done', message: '' }, t1);
    expect(list.map((c) => [c.type, c.lastTransitionTime])).toEqual([
      ['Stalled', '2025-01-01T00:00:00Z'],
      ['Ready', '2025-01-01T01:00:00Z'],
    ]);
    expect(findCondition(list, 'Ready')?.status).toBe('True');
    expect(findCondition(removeCondition(list, 'Ready'), 'Ready')).toBeUndefined();
  });

  it('uses a given lastTransitionTime when the status flips, and only then', () => {
    const given = '2025-01-01T00:30:00.500Z';
    let list = setCondition([], { type: 'Sleeping', status: 'False', reason: 'Awake', message: '' }, t0);
    list = setCondition(
      list,
      { type: 'Sleeping', status: 'False', reason: 'Awake', message: '', lastTransitionTime: given },
      t1,
    );
    expect(list[0]?.lastTransitionTime).toBe('2025-01-01T00:00:00Z');
    list = setCondition(
      list,
      { type: 'Sleeping', status: 'True', reason: 'Inactive', message: '', lastTransitionTime: given },
      t1,
    );
    expect(list[0]?.lastTransitionTime).toBe(given);
  });
});
