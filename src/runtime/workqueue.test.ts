import { describe, expect, it } from 'vitest';
import { FakeClock, flushMicrotasks } from '../../test-support/fake-clock.ts';
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
} from './rate-limiter.ts';
import { WorkQueue } from './workqueue.ts';

function newQueue(clock = new FakeClock()) {
  // No global bucket unless a test asks for one, so per-key delays are exact.
  return {
    clock,
    queue: new WorkQueue({
      name: 'test',
      clock,
      rateLimiter: new ItemExponentialFailureRateLimiter(5, 1_000_000),
    }),
  };
}

describe('WorkQueue', () => {
  it('collapses duplicate adds of a waiting key', async () => {
    const { queue } = newQueue();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(queue.len()).toBe(2);
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
    expect(queue.len()).toBe(0);
  });

  it('never hands a key to two workers at once; a re-add during processing waits for done', async () => {
    const { queue } = newQueue();
    queue.add('a');
    const first = await queue.get();
    expect(first).toBe('a');
    queue.add('a');
    expect(queue.len()).toBe(0);
    let second: string | undefined;
    void queue.get().then((key) => {
      second = key;
    });
    await flushMicrotasks();
    expect(second).toBeUndefined();
    queue.done('a');
    await flushMicrotasks();
    expect(second).toBe('a');
  });

  it('re-adding several times during processing yields a single later run', async () => {
    const { queue } = newQueue();
    queue.add('a');
    await queue.get();
    queue.add('a');
    queue.add('a');
    queue.done('a');
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe('a');
    queue.done('a');
    expect(queue.len()).toBe(0);
  });

  it('addAfter delays, and the earlier of two delayed adds of a key wins', async () => {
    const { clock, queue } = newQueue();
    queue.addAfter('ttl', 10_000);
    queue.addAfter('ttl', 3_000);
    queue.addAfter('ttl', 20_000);
    expect(queue.delayedCount()).toBe(1);
    await clock.advance(2_999);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe('ttl');
    queue.done('ttl');
    await clock.advance(30_000);
    expect(queue.len()).toBe(0);
  });

  it('addAfter orders keys by due time', async () => {
    const { clock, queue } = newQueue();
    queue.addAfter('late', 200);
    queue.addAfter('early', 100);
    await clock.advance(300);
    expect(await queue.get()).toBe('early');
    expect(await queue.get()).toBe('late');
  });

  it('serves delayed adds that came due before keys added directly, in due order', async () => {
    const { clock, queue } = newQueue();
    queue.addAfter('deadline-1', 100);
    queue.addAfter('deadline-2', 150);
    await clock.advance(50);
    for (const key of ['new-1', 'new-2', 'new-3']) queue.add(key);
    await clock.advance(200);
    queue.add('new-4');
    const order: (string | undefined)[] = [];
    for (let i = 0; i < 6; i++) order.push(await queue.get());
    expect(order).toEqual(['deadline-1', 'deadline-2', 'new-1', 'new-2', 'new-3', 'new-4']);
  });

  it('a key already waiting behind others moves ahead when a delayed add of it comes due', async () => {
    const { clock, queue } = newQueue();
    for (const key of ['a', 'b', 'c']) queue.add(key);
    queue.addAfter('c', 10);
    await clock.advance(10);
    expect(queue.len()).toBe(3);
    expect(await queue.get()).toBe('c');
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
  });

  it('a key that came due while being processed is served first when it is done', async () => {
    const { clock, queue } = newQueue();
    queue.add('a');
    expect(await queue.get()).toBe('a');
    queue.addAfter('a', 10);
    await clock.advance(10);
    queue.add('b');
    queue.done('a');
    expect(queue.len()).toBe(2);
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
  });

  it('backs off per key exponentially on failure and forget resets it', async () => {
    const { clock, queue } = newQueue();
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      const before = clock.now();
      queue.addRateLimited('a');
      while (queue.len() === 0) await clock.advance(1);
      delays.push(clock.now() - before);
      await queue.get();
      queue.done('a');
    }
    expect(delays).toEqual([5, 10, 20, 40]);
    expect(queue.numRequeues('a')).toBe(4);
    queue.forget('a');
    expect(queue.numRequeues('a')).toBe(0);
  });

  it('shutDown releases waiting workers and rejects new work (the controller drains its workers)', async () => {
    const { queue } = newQueue();
    queue.add('a');
    queue.add('b');
    const inFlight = await queue.get();
    const idle = queue.get();
    const second = await idle;
    expect(second).toBe('b');
    const waiting = queue.get();
    queue.shutDown();
    expect(await waiting).toBeUndefined();
    queue.add('c');
    expect(queue.len()).toBe(0);
    expect(await queue.get()).toBeUndefined();
    queue.done(inFlight!);
    queue.done('b');
  });

  it('reports unfinished work and the longest running processor from the clock', async () => {
    const { clock, queue } = newQueue();
    queue.add('a');
    await queue.get();
    await clock.advance(2_000);
    queue.add('b');
    await queue.get();
    await clock.advance(1_000);
    expect(queue.longestRunningProcessorSeconds()).toBe(3);
    expect(queue.unfinishedWorkSeconds()).toBe(4);
  });
});

describe('rate limiters', () => {
  it('exponential per-key backoff grows from the base and caps at the maximum', () => {
    const limiter = new ItemExponentialFailureRateLimiter(5, 1_000_000);
    const delays = Array.from({ length: 30 }, () => limiter.when('k'));
    expect(delays.slice(0, 5)).toEqual([5, 10, 20, 40, 80]);
    expect(delays.at(-1)).toBe(1_000_000);
    expect(Math.max(...delays)).toBe(1_000_000);
    expect(limiter.when('other')).toBe(5);
  });

  it('token bucket allows the burst at once, then spaces at qps, and refills with time', async () => {
    const clock = new FakeClock();
    const bucket = new BucketRateLimiter(clock, 10, 100);
    const burst = Array.from({ length: 100 }, (_, i) => bucket.when(`k${i}`));
    expect(burst.every((delay) => delay === 0)).toBe(true);
    expect(bucket.when('x')).toBe(100);
    expect(bucket.when('y')).toBe(200);
    await clock.advance(10_000);
    expect(bucket.when('z')).toBe(0);
  });

  it('the default controller limiter is the max of per-key backoff and the global bucket', () => {
    const clock = new FakeClock();
    const limiter = defaultControllerRateLimiter(clock, { qps: 1, burst: 1 });
    expect(limiter.when('a')).toBe(5);
    // The bucket is empty now: the next key waits for a token even though its backoff is 5 ms.
    expect(limiter.when('b')).toBe(1_000);
    expect(new MaxOfRateLimiter().when('a')).toBe(0);
  });
});
