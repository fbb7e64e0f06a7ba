import type { Clock, Timer } from '../src/runtime/clock.ts';

interface PendingTimer {
  dueAt: number;
  sequence: number;
  fn: () => void;
}

/**
 * A clock for tests: time moves only when `advance` is called, and timers fire in due order
 * (ties in creation order) with `now()` equal to their due time.
 */
export class FakeClock implements Clock {
  private current: number;
  private sequence = 0;
  private readonly timers = new Set<PendingTimer>();

  constructor(startMs = Date.UTC(2025, 0, 1)) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimer(delayMs: number, fn: () => void): Timer {
    const timer: PendingTimer = { dueAt: this.current + Math.max(0, delayMs), sequence: this.sequence++, fn };
    this.timers.add(timer);
    return { cancel: () => this.timers.delete(timer) };
  }

  get pendingTimers(): number {
    return this.timers.size;
  }

  /**
   * Moves time forward by `ms`, firing due timers one by one. Between timers (and at the end)
   * pending promise callbacks run, so async code woken by a timer gets to schedule its next one.
   */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await flushMicrotasks();
    for (;;) {
      const next = this.nextDue();
      if (!next || next.dueAt > target) break;
      this.timers.delete(next);
      this.current = next.dueAt;
      next.fn();
      await flushMicrotasks();
    }
    this.current = target;
    await flushMicrotasks();
  }

  private nextDue(): PendingTimer | undefined {
    let best: PendingTimer | undefined;
    for (const timer of this.timers) {
      if (
        !best ||
        timer.dueAt < best.dueAt ||
        (timer.dueAt === best.dueAt && timer.sequence < best.sequence)
      ) {
        best = timer;
      }
    }
    return best;
  }
}

/** Lets every already-queued promise continuation (and the ones they queue) run. */
export async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise<void>((resolve) => setImmediate(resolve));
}
