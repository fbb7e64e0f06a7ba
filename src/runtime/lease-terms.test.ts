import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test-support/fake-clock.ts';
import { LeaderElectionLostError } from './errors.ts';
import { LeaseTerms } from './fencing.ts';

function terms(clock: FakeClock, validForMs: number) {
  let validUntil = 0;
  const leaseTerms = new LeaseTerms(
    clock,
    () => validUntil,
    () => new LeaderElectionLostError('not the holder'),
  );
  return {
    leaseTerms,
    begin: () => {
      validUntil = clock.now() + validForMs;
      leaseTerms.begin();
    },
  };
}

describe('LeaseTerms', () => {
  it("a term's own fence refuses writes once it ended, even during the next term", () => {
    const clock = new FakeClock();
    const { leaseTerms, begin } = terms(clock, 10_000);
    expect(leaseTerms.termFence()).toBeUndefined();
    begin();
    const first = leaseTerms.termFence();
    const firstSignal = first?.term();
    expect(firstSignal?.aborted).toBe(false);
    expect(leaseTerms.termFence()).toBe(first);

    leaseTerms.end(new LeaderElectionLostError('lost'));
    expect(firstSignal?.aborted).toBe(true);
    expect(() => first?.term()).toThrow(LeaderElectionLostError);
    expect(leaseTerms.isCurrent()).toBe(false);

    begin();
    expect(leaseTerms.fence.term().aborted).toBe(false);
    expect(leaseTerms.termFence()).not.toBe(first);
    // What was started in the first term (a syncer) stays fenced out.
    expect(() => first?.term()).toThrow(LeaderElectionLostError);
  });

  it('refuses writes on the clock once the renew deadline passed', async () => {
    const clock = new FakeClock();
    const { leaseTerms, begin } = terms(clock, 10_000);
    begin();
    const fence = leaseTerms.termFence();
    await clock.advance(9_999);
    expect(leaseTerms.isCurrent()).toBe(true);
    expect(() => fence?.term()).not.toThrow();
    await clock.advance(1);
    expect(leaseTerms.isCurrent()).toBe(false);
    expect(() => fence?.term()).toThrow(LeaderElectionLostError);
    expect(() => leaseTerms.fence.term()).toThrow(LeaderElectionLostError);
  });
});
