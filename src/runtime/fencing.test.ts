import { ApiException } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FakeClock, flushMicrotasks } from '../../test-support/fake-clock.ts';
import type { Clock } from './clock.ts';
import { LeaderElectionLostError } from './errors.ts';
import { FencedKubeApi, type WriteFence } from './fencing.ts';
import type { KubeApi, RequestOptions } from './kube-api.ts';
import type { WatchStream } from './kube-watch.ts';
import { LeaderElector, type Lease } from './leader-election.ts';
import { Manager } from './manager.ts';

const quiet = pino({ level: 'silent' });
const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/ns/leases';

/** A request that never answers: it fails only when its signal aborts or its timeout passes. */
function hang<T>(options: RequestOptions, clock: Clock): Promise<T> {
  return new Promise<T>((_resolve, reject) => {
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : clock.setTimer(options.timeoutMs, () => reject(new Error('timed out')));
    const onAbort = () => {
      timer?.cancel();
      reject(options.signal?.reason ?? new Error('aborted'));
    };
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * One Lease in memory with optimistic concurrency, and clients on it that can be cut off (their
 * requests then hang until aborted or timed out, as behind a partition). Other paths: `/write`
 * answers at once, `/hang` never; every request is recorded with the client and the time.
 */
class LeaseServer {
  lease: Lease | undefined;
  private version = 0;
  readonly requests: Array<{ client: string; method: string; path: string; at: number }> = [];
  readonly cut = new Set<string>();

  constructor(private readonly clock: Clock) {}

  client(name: string): KubeApi {
    const request = async <T>(options: RequestOptions): Promise<T> => {
      await Promise.resolve();
      if (this.cut.has(name)) return hang<T>(options, this.clock);
      this.requests.push({ client: name, method: options.method, path: options.path, at: this.clock.now() });
      if (options.path === '/write') return undefined as T;
      if (options.path === '/hang') return hang<T>(options, this.clock);
      return this.lease_(options) as T;
    };
    return {
      request,
      watch: () => Promise.reject(new Error('no watches here')) as Promise<WatchStream>,
    };
  }

  private lease_(options: RequestOptions): Lease {
    const conflict = () => new ApiException(409, 'Conflict', { reason: 'Conflict' }, {});
    if (options.method === 'GET') {
      if (!this.lease) throw new ApiException(404, 'NotFound', { reason: 'NotFound' }, {});
      return structuredClone(this.lease);
    }
    const body = structuredClone(options.body) as Lease;
    if (options.method === 'POST' && this.lease) throw conflict();
    if (options.method === 'PUT' && body.metadata.resourceVersion !== this.lease?.metadata.resourceVersion)
      throw conflict();
    body.metadata.resourceVersion = String(++this.version);
    this.lease = body;
    return structuredClone(body);
  }

  /** Times of the successful lease writes of `client`. */
  leaseWrites(client: string): number[] {
    return this.requests
      .filter((r) => r.client === client && r.path.startsWith(LEASE_PATH) && r.method !== 'GET')
      .map((r) => r.at);
  }
}

const timings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

function elector(server: LeaseServer, clock: Clock, identity: string, random: () => number) {
  const events: Array<{ what: string; at: number }> = [];
  const le = new LeaderElector({
    ...timings,
    namespace: 'ns',
    name: 'lease',
    identity,
    api: server.client(identity),
    clock,
    random,
    logger: quiet,
    onStartedLeading: () => events.push({ what: 'started', at: clock.now() }),
    onStoppedLeading: () => events.push({ what: 'stopped', at: clock.now() }),
  });
  const abort = new AbortController();
  const done = le.run(abort.signal);
  return { le, events, stop: () => abort.abort(), done };
}

describe('FencedKubeApi', () => {
  const recorder = () => {
    const seen: RequestOptions[] = [];
    const pending: Array<() => void> = [];
    const inner: KubeApi = {
      request: <T>(options: RequestOptions) => {
        seen.push(options);
        if (options.path === '/hang') return hang<T>(options, new FakeClock());
        return new Promise<T>((resolve) => pending.push(() => resolve(undefined as T)));
      },
      watch: () => Promise.reject(new Error('unused')),
    };
    const answerAll = () => {
      for (const answer of pending.splice(0)) answer();
    };
    return { seen, inner, answerAll };
  };

  it('passes reads through even when writes are refused', async () => {
    const { seen, inner, answerAll } = recorder();
    const api = new FencedKubeApi(inner, {
      term: () => {
        throw new LeaderElectionLostError('no');
      },
    });
    const read = api.request({ method: 'GET', path: '/x' });
    answerAll();
    await read;
    expect(seen.map((r) => r.method)).toEqual(['GET']);
  });

  it('refuses a write without sending it when there is no term', async () => {
    const { seen, inner } = recorder();
    const api = new FencedKubeApi(inner, {
      term: () => {
        throw new LeaderElectionLostError('not the leader');
      },
    });
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      await expect(api.request({ method, path: '/x', body: {} })).rejects.toBeInstanceOf(
        LeaderElectionLostError,
      );
    }
    expect(seen).toEqual([]);
  });

  it('aborts a write in flight when the term ends, with the reason, and leaves no listener', async () => {
    const { inner } = recorder();
    const term = new AbortController();
    let listeners = 0;
    const signal = term.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<typeof add>) => {
      listeners++;
      add(...args);
    }) as typeof add;
    signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      listeners--;
      remove(...args);
    }) as typeof remove;
    const fence: WriteFence = { term: () => signal };
    const api = new FencedKubeApi(inner, fence);
    const caller = new AbortController();
    const inFlight = api.request({ method: 'PATCH', path: '/hang', signal: caller.signal });
    const other = api.request({ method: 'DELETE', path: '/hang' });
    expect(listeners).toBe(2);
    const reason = new LeaderElectionLostError('leadership lost');
    term.abort(reason);
    await expect(inFlight).rejects.toBe(reason);
    await expect(other).rejects.toBe(reason);
    expect(listeners).toBe(0);
  });

  it('still aborts on the caller signal', async () => {
    const { inner } = recorder();
    const api = new FencedKubeApi(inner, { term: () => new AbortController().signal });
    const caller = new AbortController();
    const inFlight = api.request({ method: 'POST', path: '/hang', signal: caller.signal });
    caller.abort(new Error('caller gave up'));
    await expect(inFlight).rejects.toThrow('caller gave up');
  });
});

describe('LeaderElector timings', () => {
  it.each([0, 137, 900, 1_999])(
    'a candidate takes over within leaseDuration + retryPeriod of the last renewal (cut %i ms into a cycle, slowest jitter)',
    async (offset) => {
      const clock = new FakeClock();
      const server = new LeaseServer(clock);
      const slowest = () => 0.999_999;
      const a = elector(server, clock, 'a', slowest);
      await clock.advance(1);
      expect(a.le.isLeader()).toBe(true);
      const b = elector(server, clock, 'b', slowest);
      await clock.advance(10_000 + offset);
      expect(b.le.isLeader()).toBe(false);
      server.cut.add('a');
      const cutAt = clock.now();
      const lastRenewal = server.leaseWrites('a').at(-1)!;
      while (!b.le.isLeader()) await clock.advance(10);
      const takeover = server.leaseWrites('b').at(-1)!;
      const bound = timings.leaseDurationMs + timings.retryPeriodMs;
      expect(takeover - lastRenewal).toBeLessThanOrEqual(bound);
      expect(takeover - cutAt).toBeLessThanOrEqual(bound);
      // Safety: the old leader stopped leading before its lease could be taken.
      const stopped = a.events.filter((e) => e.what === 'stopped').at(-1)!;
      expect(stopped.at).toBeLessThan(lastRenewal + timings.leaseDurationMs);
      expect(stopped.at).toBeLessThan(takeover);
      a.stop();
      b.stop();
      await clock.advance(30_000);
    },
  );

  it('leadingUntil is renewDeadline after the start of the last successful attempt, 0 after losing', async () => {
    const clock = new FakeClock();
    const server = new LeaseServer(clock);
    const a = elector(server, clock, 'a', () => 0);
    await clock.advance(1);
    const acquiredAt = server.leaseWrites('a')[0]!;
    expect(a.le.leadingUntil()).toBe(acquiredAt + timings.renewDeadlineMs);
    await clock.advance(timings.retryPeriodMs);
    const renewedAt = server.leaseWrites('a')[1]!;
    expect(a.le.leadingUntil()).toBe(renewedAt + timings.renewDeadlineMs);
    server.cut.add('a');
    await clock.advance(timings.renewDeadlineMs);
    expect(a.le.isLeader()).toBe(false);
    expect(a.le.leadingUntil()).toBe(0);
    a.stop();
    await clock.advance(timings.retryPeriodMs * 3);
  });
});

describe('Manager.leaderApi', () => {
  /** A clock whose `now` can run ahead of its timers (an event loop blocked past a deadline). */
  class LaggingClock implements Clock {
    lag = 0;
    constructor(readonly inner: FakeClock) {}
    now(): number {
      return this.inner.now() + this.lag;
    }
    setTimer(delayMs: number, fn: () => void) {
      return this.inner.setTimer(delayMs, fn);
    }
  }

  const start = async () => {
    const fake = new FakeClock();
    const clock = new LaggingClock(fake);
    const server = new LeaseServer(clock);
    const manager = new Manager({
      api: server.client('me'),
      clock,
      random: () => 0.5,
      logger: quiet,
      registry: new Registry(),
      leaderElection: { ...timings, namespace: 'ns', name: 'lease', identity: 'me' },
    });
    await manager.start();
    await fake.advance(1);
    expect(manager.isLeader()).toBe(true);
    return { fake, clock, server, manager, api: manager.leaderApi() };
  };
  const writes = (server: LeaseServer) => server.requests.filter((r) => r.path === '/write').length;

  it('writes while leading; once the renew deadline passed, in-flight writes abort and new ones are refused', async () => {
    const { fake, server, manager, api } = await start();
    await api.request({ method: 'POST', path: '/write', body: {} });
    expect(writes(server)).toBe(1);
    const inFlight = api.request({ method: 'PUT', path: '/hang', body: {} });
    inFlight.catch(() => {});
    server.cut.add('me');
    await fake.advance(timings.renewDeadlineMs);
    expect(manager.isLeader()).toBe(false);
    await expect(inFlight).rejects.toBeInstanceOf(LeaderElectionLostError);
    server.cut.delete('me');
    await expect(api.request({ method: 'DELETE', path: '/write' })).rejects.toBeInstanceOf(
      LeaderElectionLostError,
    );
    expect(writes(server)).toBe(1);
    // Reads are never fenced.
    await api.request({ method: 'GET', path: '/write' });
    const stopping = manager.stop();
    await fake.advance(60_000);
    await stopping;
  });

  it('refuses writes on the clock once the deadline passed, even before the deadline timer ran', async () => {
    const { fake, clock, server, manager, api } = await start();
    clock.lag = timings.renewDeadlineMs; // time moved on, no timer has fired yet
    await expect(api.request({ method: 'PATCH', path: '/write', body: {} })).rejects.toBeInstanceOf(
      LeaderElectionLostError,
    );
    expect(writes(server)).toBe(0);
    clock.lag = 0;
    await api.request({ method: 'PATCH', path: '/write', body: {} });
    expect(writes(server)).toBe(1);
    const stopping = manager.stop();
    await fake.advance(60_000);
    await stopping;
    await flushMicrotasks();
  });

  it('without leader election every write goes out', async () => {
    const clock = new FakeClock();
    const server = new LeaseServer(clock);
    const manager = new Manager({
      api: server.client('me'),
      clock,
      random: () => 0.5,
      logger: quiet,
      registry: new Registry(),
    });
    await manager.start();
    await manager.leaderApi().request({ method: 'POST', path: '/write', body: {} });
    expect(writes(server)).toBe(1);
    await manager.stop();
  });
});
