import { describe, expect, it } from 'vitest';
import {
  anyOf,
  generationChanged,
  lifecycleChanged,
  passesCreate,
  passesDelete,
  passesUpdate,
} from './predicates.ts';

const secret = (metadata: Record<string, unknown>) => ({
  metadata: { name: 'db', namespace: 'ns', generation: 1, resourceVersion: '10', ...metadata },
});

describe('generationChanged', () => {
  it('passes a spec change, not a write of status or metadata alone', () => {
    const before = secret({});
    expect(passesUpdate([generationChanged], before, secret({ generation: 2, resourceVersion: '11' }))).toBe(
      true,
    );
    expect(passesUpdate([generationChanged], before, secret({ resourceVersion: '11' }))).toBe(false);
    expect(
      passesUpdate([generationChanged], before, secret({ labels: { a: 'b' }, resourceVersion: '11' })),
    ).toBe(false);
  });

  it('passes every creation and deletion', () => {
    expect(passesCreate([generationChanged], secret({}))).toBe(true);
    expect(passesDelete([generationChanged], secret({}))).toBe(true);
  });
});

describe('lifecycleChanged', () => {
  it('passes the start of a deletion and a change of finalizers, nothing else', () => {
    const before = secret({ finalizers: ['management.platform/cleanup'] });
    const deleting = secret({
      finalizers: ['management.platform/cleanup'],
      deletionTimestamp: '2026-01-01T00:00:00Z',
    });
    expect(passesUpdate([lifecycleChanged], before, deleting)).toBe(true);
    expect(passesUpdate([lifecycleChanged], before, secret({}))).toBe(true);
    expect(passesUpdate([lifecycleChanged], before, secret({ finalizers: ['other'] }))).toBe(true);
    expect(
      passesUpdate(
        [lifecycleChanged],
        before,
        secret({ finalizers: ['management.platform/cleanup'], resourceVersion: '11' }),
      ),
    ).toBe(false);
  });
});

describe('anyOf', () => {
  it('passes what any of its predicates passes', () => {
    const specOrLifecycle = anyOf(generationChanged, lifecycleChanged);
    const before = secret({ finalizers: ['f'] });
    expect(passesUpdate([specOrLifecycle], before, secret({ finalizers: ['f'], generation: 2 }))).toBe(true);
    expect(passesUpdate([specOrLifecycle], before, secret({}))).toBe(true);
    expect(
      passesUpdate([specOrLifecycle], before, secret({ finalizers: ['f'], resourceVersion: '11' })),
    ).toBe(false);
  });

  it('passes creations and deletions unless every predicate refuses them', () => {
    const never = { create: () => false, delete: () => false };
    expect(passesCreate([anyOf(never, generationChanged)], secret({}))).toBe(true);
    expect(passesCreate([anyOf(never, never)], secret({}))).toBe(false);
    expect(passesDelete([anyOf(never, never)], secret({}))).toBe(false);
  });
});
