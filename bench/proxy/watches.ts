import { type Dispatcher, request } from 'undici';
import { type Impersonation, residentBytes } from '../platform-gateway.ts';
import { pool, type WaitBound, waitUntil, within } from '../support.ts';

/**
 * Watches for bench/proxy, over undici as a client-go program holds them (HTTP/1.1, one
 * connection per watch): events counted as the lines of the JSON stream (kube-apiserver writes one
 * event per line), every wait bounded and ended by the death of the process served through.
 */

/** One watch held open: its status, the events it received so far, and its end. */
export interface HeldWatch {
  readonly status: number;
  events(): number;
  /** Settles once `count` events came; fails when the answer ends before. */
  received(count: number): Promise<void>;
  close(): Promise<void>;
}

const NEWLINE = 0x0a;

/**
 * Opens a watch and counts its events as they come, until `close()` (or the server ends it);
 * fails, quoting the answer, unless it is 200.
 */
export async function openWatch(
  url: string,
  headers: Impersonation,
  dispatcher: Dispatcher,
): Promise<HeldWatch> {
  const controller = new AbortController();
  const response = await request(url, { dispatcher, headers, signal: controller.signal });
  if (response.statusCode !== 200) {
    const answer = await response.body.text();
    throw new Error(`a watch of ${url} was answered ${response.statusCode}: ${answer.slice(0, 300)}`);
  }
  let events = 0;
  let ended = false;
  let waiter: { count: number; resolve: () => void; reject: (error: Error) => void } | undefined;
  const settle = () => {
    if (waiter && events >= waiter.count) waiter.resolve();
    else if (waiter && ended)
      waiter.reject(new Error(`the watch ended after ${events} of ${waiter.count} events`));
    else return;
    waiter = undefined;
  };
  const reading = (async () => {
    try {
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, at + 1)) events++;
        settle();
      }
    } catch {
      // closed by us, or by the server
    }
    ended = true;
    settle();
  })();
  return {
    status: response.statusCode,
    events: () => events,
    received: (count) =>
      new Promise<void>((resolve, reject) => {
        waiter = { count, resolve, reject };
        settle();
      }),
    close: async () => {
      controller.abort();
      await reading;
    },
  };
}

/**
 * Receives `expected` events on a new watch of `url` (a watch without a resourceVersion starts
 * with an ADDED event per object), then closes it. Returns the events received.
 */
async function receive(
  url: string,
  headers: Impersonation,
  expected: number,
  dispatcher: Dispatcher,
  bound: WaitBound,
): Promise<number> {
  const watch = await within(openWatch(url, headers, dispatcher), `a watch of ${url}`, bound);
  try {
    await within(watch.received(expected), `${expected} events on a watch of ${url}`, bound);
    return watch.events();
  } finally {
    await watch.close();
  }
}

export interface EventRate {
  readonly eventsPerSecond: number;
  readonly watches: number;
}

/**
 * `connections` watchers at once, each opening watch after watch of `url` (each receiving
 * `expected` initial events, then closed), for `seconds`: the events delivered per second.
 */
export async function eventRate(
  url: string,
  headers: Impersonation,
  options: {
    readonly expected: number;
    readonly seconds: number;
    readonly connections: number;
    readonly dispatcher: Dispatcher;
    readonly bound: WaitBound;
  },
): Promise<EventRate> {
  const started = performance.now();
  const deadline = started + options.seconds * 1000;
  let events = 0;
  let watches = 0;
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < deadline) {
        events += await receive(url, headers, options.expected, options.dispatcher, options.bound);
        watches++;
      }
    }),
  );
  return { eventsPerSecond: events / ((performance.now() - started) / 1000), watches };
}

export interface HeldWatches {
  /** Resident memory each process gained per held watch, in bytes. */
  readonly bytesPerWatch: Record<string, number>;
  close(): Promise<void>;
}

/**
 * Opens `count` watches of `url` (the headers of watch i from `headersOf(i)`), `concurrency` at a
 * time, and proves each one live: `touch()` writes an object the watches see, and every watch
 * must receive its event. Measures the resident memory `processes` gained meanwhile, each reading
 * after `collect()` (a full collection in the Node processes: otherwise the difference is mostly
 * how much garbage each reading happened to find).
 */
export async function holdWatches(
  url: string,
  headersOf: (i: number) => Impersonation,
  options: {
    readonly count: number;
    readonly concurrency: number;
    readonly dispatcher: Dispatcher;
    readonly processes: Record<string, number | undefined>;
    readonly touch: () => Promise<void>;
    readonly collect: () => Promise<void>;
    readonly bound: WaitBound;
  },
): Promise<HeldWatches> {
  const { processes } = options;
  await options.collect();
  const before = Object.fromEntries(
    Object.entries(processes).map(([name, pid]) => [name, residentBytes(pid)]),
  );
  const watches: HeldWatch[] = [];
  const close = () => Promise.all(watches.map((watch) => watch.close())).then(() => undefined);
  try {
    await pool(options.count, options.concurrency, async (i) => {
      const watch = await within(
        openWatch(url, headersOf(i), options.dispatcher),
        `watch ${i}`,
        options.bound,
      );
      watches.push(watch);
    });
    await options.touch();
    await waitUntil(
      `an event on each of ${options.count} held watches`,
      () => watches.every((watch) => watch.events() > 0),
      { ...options.bound, intervalMs: 100 },
    );
    await options.collect();
    const bytesPerWatch = Object.fromEntries(
      Object.entries(processes).map(([name, pid]) => [
        name,
        (residentBytes(pid) - (before[name] ?? Number.NaN)) / options.count,
      ]),
    );
    return { bytesPerWatch, close };
  } catch (error) {
    await close();
    throw error;
  }
}
