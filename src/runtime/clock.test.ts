import { afterEach, describe, expect, test, vi } from 'vitest';
import { MAX_TIMEOUT_MS, systemClock } from './clock.ts';

describe('systemClock.setTimer', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test('a deadline beyond what setTimeout can hold fires once, at the deadline, not at once', () => {
    vi.useFakeTimers();
    const fired = vi.fn();
    const thirtyDays = 30 * 86_400_000;
    expect(thirtyDays).toBeGreaterThan(MAX_TIMEOUT_MS);
    systemClock.setTimer(thirtyDays, fired);
    vi.advanceTimersByTime(1000);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(thirtyDays - 1001);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  test('cancel works before and after the first step', () => {
    vi.useFakeTimers();
    const fired = vi.fn();
    systemClock.setTimer(10, fired).cancel();
    const long = systemClock.setTimer(MAX_TIMEOUT_MS + 5000, fired);
    vi.advanceTimersByTime(MAX_TIMEOUT_MS + 1);
    long.cancel();
    vi.advanceTimersByTime(10_000);
    expect(fired).not.toHaveBeenCalled();
  });
});
