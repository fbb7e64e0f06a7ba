import { describe, expect, it } from 'vitest';
import { decideLease, type LeaseSpec } from './leader-election.ts';

const now = Date.UTC(2025, 0, 1, 0, 0, 10);
const base = { identity: 'me', now, leaseDurationMs: 15_000 };

describe('decideLease', () => {
  it('creates a missing lease held by us with zero transitions', () => {
    const decision = decideLease(undefined, { ...base, observedAt: now });
    expect(decision).toEqual({
      action: 'create',
      spec: {
        holderIdentity: 'me',
        leaseDurationSeconds: 15,
        acquireTime: '2025-01-01T00:00:10.000000Z',
        renewTime: '2025-01-01T00:00:10.000000Z',
        leaseTransitions: 0,
      },
    });
  });

  it('waits while another holder observed less than leaseDuration ago', () => {
    const held: LeaseSpec = { holderIdentity: 'other', leaseDurationSeconds: 15, leaseTransitions: 3 };
    expect(decideLease(held, { ...base, observedAt: now - 14_999 })).toEqual({
      action: 'wait',
      holder: 'other',
      expiresAt: now + 1,
    });
  });

  it('takes over an expired lease, incrementing leaseTransitions', () => {
    const held: LeaseSpec = { holderIdentity: 'other', leaseDurationSeconds: 15, leaseTransitions: 3 };
    const decision = decideLease(held, { ...base, observedAt: now - 15_000 });
    expect(decision).toMatchObject({ action: 'update', spec: { holderIdentity: 'me', leaseTransitions: 4 } });
  });

  it('takes over a released lease (empty holder) at once', () => {
    const released: LeaseSpec = { holderIdentity: null, leaseDurationSeconds: 1, leaseTransitions: 2 };
    expect(decideLease(released, { ...base, observedAt: now })).toMatchObject({
      action: 'update',
      spec: { holderIdentity: 'me', leaseTransitions: 3 },
    });
  });

  it('renews its own lease keeping acquireTime and transitions', () => {
    const mine: LeaseSpec = {
      holderIdentity: 'me',
      leaseDurationSeconds: 15,
      acquireTime: '2025-01-01T00:00:00.000000Z',
      renewTime: '2025-01-01T00:00:08.000000Z',
      leaseTransitions: 5,
    };
    const decision = decideLease(mine, { ...base, observedAt: now - 60_000 });
    expect(decision).toEqual({
      action: 'update',
      spec: { ...mine, renewTime: '2025-01-01T00:00:10.000000Z' },
    });
  });

  it('judges expiry by the lease record duration, not our own', () => {
    const held: LeaseSpec = { holderIdentity: 'other', leaseDurationSeconds: 60 };
    expect(decideLease(held, { ...base, observedAt: now - 30_000 }).action).toBe('wait');
  });
});
