import { describe, expect, it } from 'vitest';
import { ActivityFlushFailed, ActivityRecorder, type ActivityWrite, type Timers } from './activity.ts';

/** A manual clock with timers: `advance` moves time and runs due callbacks, awaiting their work. */
class FakeTime implements Timers {
  nowMs = 0;
  private next = 1;
  private readonly scheduled = new Map<number, { at: number; callback: () => void }>();

  setTimeout(callback: () => void, ms: number): unknown {
    const handle = this.next++;
    this.scheduled.set(handle, { at: this.nowMs + ms, callback });
    return handle;
  }

  clearTimeout(handle: unknown): void {
    this.scheduled.delete(handle as number);
  }

  async advance(ms: number): Promise<void> {
    const end = this.nowMs + ms;
    for (;;) {
      const due = [...this.scheduled].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.scheduled.delete(due[0]);
      this.nowMs = due[1].at;
      due[1].callback();
      // Let the flush's promise chain (writer, finally, reschedule) settle.
      for (let i = 0; i < 20; i++) await Promise.resolve();
    }
    this.nowMs = end;
  }
}

function setup(options: { failures?: number; maxBatchSize?: number } = {}) {
  const time = new FakeTime();
  const writes: { atMs: number; batch: ActivityWrite[] }[] = [];
  let failuresLeft = options.failures ?? 0;
  const errors: number[] = [];
  const recorder = new ActivityRecorder({
    now: () => new Date(time.nowMs),
    timers: time,
    tickMs: 10_000,
    minWriteIntervalMs: 60_000,
    maxBatchSize: options.maxBatchSize ?? 100,
    onWriteError: (_error, size) => errors.push(size),
    writer: async (batch) => {
      if (failuresLeft > 0) {
        failuresLeft--;
        throw new Error('apiserver unavailable');
      }
      writes.push({ atMs: time.nowMs, batch: [...batch] });
    },
  });
  const at = (ms: number) => new Date(ms);
  const writtenFor = (key: string) =>
    writes.flatMap((w) =>
      w.batch
        .filter((e) => e.keyName === key)
        .map((e) => ({ atMs: w.atMs, activity: e.lastActivity.getTime() })),
    );
  return { time, writes, errors, recorder, at, writtenFor };
}

describe('ActivityRecorder', () => {
  it('writes each key at most once per minute, with its latest activity', async () => {
    const { time, recorder, writtenFor } = setup();
    recorder.start();
    for (let second = 0; second < 180; second++) {
      recorder.record('k1', new Date(time.nowMs));
      await time.advance(1000);
    }
    const writes = writtenFor('k1');
    expect(writes.length).toBe(3);
    for (let i = 1; i < writes.length; i++) {
      expect(writes[i]!.atMs - writes[i - 1]!.atMs).toBeGreaterThanOrEqual(60_000);
    }
    // Each write carries the newest activity known at that moment.
    for (const write of writes) expect(write.activity).toBe(write.atMs - 1000);
    await recorder.stop();
    expect(writtenFor('k1').at(-1)?.activity).toBe(179_000);
  });

  it('writes at once when the stored state would let the key expire before the next regular write', async () => {
    const { time, recorder, writtenFor } = setup();
    recorder.start();
    await time.advance(1000);
    // Expires by its stored state in 5 s: sooner than a regular write could happen.
    recorder.record('short', new Date(time.nowMs), new Date(time.nowMs + 5000));
    // Expires in a day: the regular schedule is early enough.
    recorder.record('long', new Date(time.nowMs), new Date(time.nowMs + 86_400_000));
    await time.advance(1);
    expect(writtenFor('short')).toEqual([{ atMs: 1000, activity: 1000 }]);
    expect(writtenFor('long')).toEqual([]);
    // Urgency overrides the per-minute limit for that key, again and again.
    await time.advance(2000);
    recorder.record('short', new Date(time.nowMs), new Date(time.nowMs + 3000));
    await time.advance(1);
    expect(writtenFor('short').map((w) => w.activity)).toEqual([1000, 3001]);
    await time.advance(10_000);
    expect(writtenFor('long').map((w) => w.activity)).toEqual([1000]);
    await recorder.stop();
  });

  it('batches keys that are due together', async () => {
    const { time, recorder, writes } = setup({ maxBatchSize: 2 });
    recorder.start();
    for (const key of ['a', 'b', 'c']) recorder.record(key, new Date(1));
    await time.advance(10_000);
    expect(writes.map((w) => w.batch.map((e) => e.keyName))).toEqual([['a', 'b'], ['c']]);
    await recorder.stop();
  });

  it('keeps activity through failed writes and retries on the next tick', async () => {
    const { time, recorder, writes, errors, writtenFor } = setup({ failures: 2 });
    recorder.start();
    recorder.record('k1', new Date(5));
    await time.advance(10_000);
    await time.advance(10_000);
    expect(writes).toEqual([]);
    expect(errors).toEqual([1, 1]);
    expect(recorder.lastActivityOf('k1')).toEqual(new Date(5));
    await time.advance(10_000);
    expect(writtenFor('k1')).toEqual([{ atMs: 30_000, activity: 5 }]);
    expect(recorder.pendingCount).toBe(0);
    await recorder.stop();
  });

  it('flushes everything on stop, ignoring the per-minute limit, and stops ticking', async () => {
    const { time, recorder, writtenFor, writes } = setup();
    recorder.start();
    recorder.record('k1', new Date(1));
    await time.advance(10_000);
    recorder.record('k1', new Date(12_000));
    await recorder.stop();
    expect(writtenFor('k1').map((w) => w.activity)).toEqual([1, 12_000]);
    recorder.record('k1', new Date(13_000));
    const before = writes.length;
    await time.advance(600_000);
    expect(writes.length).toBe(before);
  });

  it('retries on stop and reports what it could not write', async () => {
    const ok = setup({ failures: 2 });
    ok.recorder.record('k1', new Date(1));
    await ok.recorder.stop();
    expect(ok.writtenFor('k1')).toEqual([{ atMs: 0, activity: 1 }]);

    const broken = setup({ failures: 10 });
    broken.recorder.record('k1', new Date(1));
    broken.recorder.record('k2', new Date(1));
    const stopped = broken.recorder.stop();
    await expect(stopped).rejects.toBeInstanceOf(ActivityFlushFailed);
    await expect(stopped).rejects.toMatchObject({ pendingKeys: 2 });
  });

  it('never moves activity backwards', () => {
    const { recorder } = setup();
    recorder.record('k1', new Date(100));
    recorder.record('k1', new Date(50));
    expect(recorder.lastActivityOf('k1')).toEqual(new Date(100));
    expect(recorder.lastActivityOf('unknown')).toBeUndefined();
  });
});
