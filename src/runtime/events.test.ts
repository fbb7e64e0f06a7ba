import { describe, expect, it } from 'vitest';
import { EventDeduper, eventKey } from './events.ts';

describe('EventDeduper', () => {
  it('turns repeats within the window into an incrementing series of the first Event', () => {
    const deduper = new EventDeduper(60_000);
    expect(deduper.observe('k', 0)).toEqual({ kind: 'create' });
    deduper.created('k', 'obj.1', 0);
    expect(deduper.observe('k', 30_000)).toEqual({ kind: 'repeat', name: 'obj.1', count: 2 });
    // The window slides with each occurrence.
    expect(deduper.observe('k', 89_000)).toEqual({ kind: 'repeat', name: 'obj.1', count: 3 });
  });

  it('starts a new Event after the window has passed since the last occurrence', () => {
    const deduper = new EventDeduper(60_000);
    deduper.created('k', 'obj.1', 0);
    expect(deduper.observe('k', 60_001)).toEqual({ kind: 'create' });
  });

  it('keeps different keys apart and forgets the least recently used beyond its bound', () => {
    const deduper = new EventDeduper(60_000, 2);
    deduper.created('a', 'a.1', 0);
    deduper.created('b', 'b.1', 0);
    expect(deduper.observe('a', 1)).toMatchObject({ kind: 'repeat', name: 'a.1' });
    deduper.created('c', 'c.1', 2);
    expect(deduper.observe('b', 3)).toEqual({ kind: 'create' });
    expect(deduper.observe('a', 3)).toMatchObject({ kind: 'repeat', count: 3 });
  });

  it('keys on regarding object, type, reason, action and note', () => {
    const regarding = { kind: 'ConfigMap', namespace: 'ns', name: 'x', uid: 'u' };
    const input = { type: 'Warning' as const, reason: 'Conflict', action: 'Apply', note: 'n' };
    expect(eventKey(regarding, input)).toBe(eventKey({ ...regarding }, { ...input }));
    expect(eventKey(regarding, input)).not.toBe(eventKey(regarding, { ...input, note: 'other' }));
    expect(eventKey(regarding, input)).not.toBe(eventKey({ ...regarding, name: 'y' }, input));
  });
});
