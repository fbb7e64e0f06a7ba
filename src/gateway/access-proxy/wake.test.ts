import { describe, expect, test } from 'vitest';
import { FakeClock } from '../../../test-support/fake-clock.ts';
import { LAST_ACTIVITY_ANNOTATION } from '../../api/labels.ts';
import type { Condition } from '../../api/meta.ts';
import type { Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import type { EventHandler, Informer } from '../../runtime/informer.ts';
import type { KubeApi, RequestOptions } from '../../runtime/kube-api.ts';
import { Store } from '../../runtime/store.ts';
import { MAX_WAITING_PER_INSTANCE } from './sleep-wake.ts';
import type { ProxyTarget } from './target.ts';
import { InstanceWaker } from './wake.ts';

type Instance = Stored<VirtualClusterInstance>;

const TARGET: ProxyTarget = { kind: 'ProjectVirtualCluster', project: 'web', virtualCluster: 'dev' };
const SLEPT_AT = '2025-01-01T00:00:00Z';

const condition = (type: string, status: Condition['status'], at = SLEPT_AT): Condition => ({
  type,
  status,
  reason: 'Any',
  message: '',
  lastTransitionTime: at,
});

function instance(conditions: Condition[], sleepingSince?: string): Instance {
  return {
    apiVersion: 'management.platform/v1',
    kind: 'VirtualClusterInstance',
    metadata: { name: 'dev', namespace: 'p-web', uid: 'u1', resourceVersion: String(Math.random()) },
    spec: { templateRef: { name: 'small' } },
    status: { conditions, ...(sleepingSince ? { sleepingSince } : {}) },
  } as Instance;
}
const asleep = () => instance([condition('Ready', 'False'), condition('Sleeping', 'True')], SLEPT_AT);
const awake = () =>
  instance([
    condition('Ready', 'True', '2025-01-01T00:01:00Z'),
    condition('Sleeping', 'False', '2025-01-01T00:00:30Z'),
  ]);

/** The informer as the waker reads it: a real store, handlers called as an informer calls them. */
function cache() {
  const store = new Store<Instance>();
  const handlers = new Set<EventHandler<Instance>>();
  const informer = {
    store,
    hasSynced: () => true,
    addEventHandler(handler: EventHandler<Instance>) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
  } as unknown as Informer<Instance>;
  return {
    informer,
    put(object: Instance) {
      const previous = store.upsert(object);
      for (const handler of handlers) {
        if (previous) handler.onUpdate?.(previous, object);
        else handler.onAdd?.(object);
      }
    },
    remove(object: Instance) {
      store.delete('p-web/dev');
      for (const handler of handlers) handler.onDelete?.(object, false);
    },
  };
}

/** Callers: `alice` may get the instance, `mallory` (an unscoped key of someone outside the project) may not. */
function world(options: { failWrites?: boolean; failReviews?: boolean } = {}) {
  const clock = new FakeClock(Date.parse('2025-01-01T00:02:00Z'));
  const written: RequestOptions[] = [];
  const warnings: unknown[] = [];
  const api = {
    request: async (request: RequestOptions) => {
      written.push(request);
      if (options.failWrites) throw new Error('apiserver said no (Bearer s3cret)');
      return {};
    },
  } as unknown as KubeApi;
  const instances = cache();
  const reviewed: string[] = [];
  const waker = new InstanceWaker<string>({
    virtualClusters: instances.informer,
    api,
    mayWake: async (caller, vci) => {
      reviewed.push(`${caller} ${vci.metadata.namespace}/${vci.metadata.name}`);
      if (options.failReviews) throw new Error('apiserver unreachable (Bearer s3cret)');
      return caller === 'alice';
    },
    projectNamespace: (project) => `p-${project}`,
    logger: { warn: (fields: unknown) => warnings.push(fields) } as never,
    clock,
  });
  const stamps = () =>
    written.map(
      (request) =>
        (request.body as { metadata: { annotations: Record<string, string> } }).metadata.annotations[
          LAST_ACTIVITY_ANNOTATION
        ],
    );
  return { clock, written, warnings, instances, waker, stamps, reviewed };
}

/** Settles `promise` into a record the test can look at without awaiting it. */
function track<T>(promise: Promise<T>) {
  const state: { settled: boolean; error?: unknown } = { settled: false };
  promise.then(
    () => {
      state.settled = true;
    },
    (error: unknown) => {
      state.settled = true;
      state.error = error;
    },
  );
  return state;
}

const signal = () => new AbortController().signal;

describe('InstanceWaker', () => {
  test('an awake instance: relayed at once, its activity written in the background at most once per 10 s', async () => {
    const w = world();
    w.instances.put(awake());
    await w.waker.ready(TARGET, 'alice', '', signal());
    await w.waker.ready(TARGET, 'alice', '', signal());
    await w.clock.advance(9_999);
    await w.waker.ready(TARGET, 'alice', '', signal());
    expect(w.stamps()).toEqual(['2025-01-01T00:02:00.000Z']);
    expect(w.written[0]).toMatchObject({
      method: 'PATCH',
      path: '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances/dev',
      contentType: 'application/merge-patch+json',
    });
    await w.clock.advance(1);
    await w.waker.ready(TARGET, 'alice', '', signal());
    expect(w.stamps()).toEqual(['2025-01-01T00:02:00.000Z', '2025-01-01T00:02:10.000Z']);
  });

  test("a failed activity write does not fail the request; it is logged with the instance and the reason, never the error's text", async () => {
    const w = world({ failWrites: true });
    w.instances.put(awake());
    await w.waker.ready(TARGET, 'alice', '', signal());
    await w.clock.advance(0);
    expect(w.warnings).toEqual([{ instance: 'VirtualClusterInstance/p-web/dev', reason: 'Error' }]);
    expect(JSON.stringify(w.warnings)).not.toContain('s3cret');
  });

  test('an asleep instance: the wake written at once, the request waits until it is Ready and not Sleeping', async () => {
    const w = world();
    w.instances.put(asleep());
    const first = track(w.waker.ready(TARGET, 'alice', '', signal()));
    const second = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(1000);
    expect(w.stamps()).toEqual(['2025-01-01T00:02:00.000Z']);
    // Woken, starting: still waiting.
    w.instances.put(
      instance([condition('Ready', 'False'), condition('Sleeping', 'False', '2025-01-01T00:02:01Z')]),
    );
    await w.clock.advance(1000);
    expect([first.settled, second.settled]).toEqual([false, false]);
    w.instances.put(awake());
    await w.clock.advance(0);
    expect(first).toEqual({ settled: true });
    expect(second).toEqual({ settled: true });
    expect(w.clock.pendingTimers).toBe(0);
    // The wake counted as activity: no second write right after it.
    await w.waker.ready(TARGET, 'alice', '', signal());
    expect(w.written).toHaveLength(1);
  });

  test('requests during the same sleep write the wake once, even while the cache still shows it asleep', async () => {
    const w = world();
    w.instances.put(asleep());
    const first = track(w.waker.ready(TARGET, 'alice', '?timeout=5s', signal()));
    await w.clock.advance(5000);
    const second = track(w.waker.ready(TARGET, 'alice', '?timeout=5s', signal()));
    await w.clock.advance(0);
    expect(w.written).toHaveLength(1);
    w.instances.put(awake());
    await w.clock.advance(0);
    expect(first.settled && second.settled).toBe(true);
    // Asleep again (a later sleep): woken again.
    w.instances.put(
      instance(
        [condition('Ready', 'False'), condition('Sleeping', 'True', '2025-01-01T01:00:00Z')],
        '2025-01-01T01:00:00Z',
      ),
    );
    void w.waker.ready(TARGET, 'alice', '?timeout=1s', signal()).catch(() => undefined);
    await w.clock.advance(0);
    expect(w.written).toHaveLength(2);
  });

  test("not ready within the client's timeout: a 503 naming the instance, with Retry-After, and nothing left waiting", async () => {
    const w = world();
    w.instances.put(asleep());
    const waiting = track(w.waker.ready(TARGET, 'alice', '?timeout=5s', signal()));
    await w.clock.advance(4_999);
    expect(waiting.settled).toBe(false);
    await w.clock.advance(1);
    expect(waiting.settled).toBe(true);
    expect(waiting.error).toMatchObject({
      code: 503,
      reason: 'ServiceUnavailable',
      message:
        'virtual cluster "web/dev" is waking up from sleep and was not ready within 5s; try again shortly',
      headers: { 'Retry-After': '5' },
    });
    expect(w.clock.pendingTimers).toBe(0);
  });

  test('without a timeout the wait is bounded by 60 s', async () => {
    const w = world();
    w.instances.put(asleep());
    const waiting = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(59_999);
    expect(waiting.settled).toBe(false);
    await w.clock.advance(1);
    expect(waiting.error).toMatchObject({ code: 503 });
  });

  test('a client that goes away stops waiting at once', async () => {
    const w = world();
    w.instances.put(asleep());
    const controller = new AbortController();
    const waiting = track(w.waker.ready(TARGET, 'alice', '', controller.signal));
    await w.clock.advance(100);
    const reason = new Error('client went away');
    controller.abort(reason);
    await w.clock.advance(0);
    expect(waiting.error).toBe(reason);
    expect(w.clock.pendingTimers).toBe(0);
  });

  test('the wake cannot be written: a 503 at once, no wait', async () => {
    const w = world({ failWrites: true });
    w.instances.put(asleep());
    const waiting = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(0);
    expect(waiting.error).toMatchObject({
      code: 503,
      message:
        'virtual cluster "web/dev" is asleep and the platform could not ask it to wake; try again shortly',
    });
    expect(w.clock.pendingTimers).toBe(0);
  });

  test('an instance deleted while a request waits: the wait ends (the relay then answers 404)', async () => {
    const w = world();
    const sleeping = asleep();
    w.instances.put(sleeping);
    const waiting = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(10);
    w.instances.remove(sleeping);
    await w.clock.advance(0);
    expect(waiting).toEqual({ settled: true });
  });

  test('a caller who may not get the instance does not wake it: 403, nothing written, nothing left waiting', async () => {
    const w = world();
    w.instances.put(asleep());
    const refused = track(w.waker.ready(TARGET, 'mallory', '', signal()));
    await w.clock.advance(0);
    expect(refused.error).toMatchObject({
      code: 403,
      reason: 'Forbidden',
      message:
        'virtual cluster "web/dev" is asleep, and only a person who may get its VirtualClusterInstance wakes it',
    });
    expect(w.reviewed).toEqual(['mallory p-web/dev']);
    expect(w.written).toEqual([]);
    expect(w.clock.pendingTimers).toBe(0);
    // The same instance is woken by one who may.
    void w.waker.ready(TARGET, 'alice', '', signal()).catch(() => undefined);
    await w.clock.advance(0);
    expect(w.written).toHaveLength(1);
  });

  test('a caller who may not get an awake instance keeps nothing awake; the next one who may does', async () => {
    const w = world();
    w.instances.put(awake());
    await w.waker.ready(TARGET, 'mallory', '', signal());
    await w.clock.advance(0);
    expect(w.written).toEqual([]);
    // Mallory's check still under way holds back no write of alice's.
    const both = [
      w.waker.ready(TARGET, 'mallory', '', signal()),
      w.waker.ready(TARGET, 'alice', '', signal()),
    ];
    await Promise.all(both);
    await w.clock.advance(0);
    expect(w.stamps()).toEqual(['2025-01-01T00:02:00.000Z']);
    expect(w.reviewed).toEqual(['mallory p-web/dev', 'mallory p-web/dev', 'alice p-web/dev']);
    // Counted once alice was allowed: none again within the interval.
    await w.waker.ready(TARGET, 'alice', '', signal());
    await w.clock.advance(0);
    expect(w.written).toHaveLength(1);
  });

  test('whether the caller may wake it cannot be told: a 503 at once, logged without the error text', async () => {
    const w = world({ failReviews: true });
    w.instances.put(asleep());
    const waiting = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(0);
    expect(waiting.error).toMatchObject({ code: 503 });
    expect(w.written).toEqual([]);
    expect(JSON.stringify(w.warnings)).not.toContain('s3cret');
  });

  test('at most 256 requests wait for one instance; more get a 503 at once, and all are answered when it wakes', async () => {
    const w = world();
    w.instances.put(asleep());
    const waiting = Array.from({ length: MAX_WAITING_PER_INSTANCE }, () =>
      track(w.waker.ready(TARGET, 'alice', '', signal())),
    );
    await w.clock.advance(0);
    const beyond = track(w.waker.ready(TARGET, 'alice', '', signal()));
    await w.clock.advance(0);
    expect(beyond.error).toMatchObject({ code: 503, headers: { 'Retry-After': '5' } });
    expect(waiting.some((state) => state.settled)).toBe(false);
    w.instances.put(awake());
    await w.clock.advance(0);
    expect(waiting.every((state) => state.settled && state.error === undefined)).toBe(true);
    expect(w.clock.pendingTimers).toBe(0);
  });

  test('a registered instance (spec.endpoint) has no sleep mode: no activity written', async () => {
    const w = world();
    w.instances.put({ ...awake(), spec: { endpoint: 'https://dev.example.com' } } as Instance);
    await w.waker.ready(TARGET, 'alice', '', signal());
    await w.clock.advance(0);
    expect(w.written).toEqual([]);
  });

  test('a cluster, a space, or an instance not in the cache: nothing written, nothing waited for', async () => {
    const w = world();
    await w.waker.ready({ kind: 'Cluster', cluster: 'edge' }, 'alice', '', signal());
    await w.waker.ready({ kind: 'ProjectSpace', project: 'web', space: 'p-web' }, 'alice', '', signal());
    await w.waker.ready(TARGET, 'alice', '', signal());
    expect(w.written).toEqual([]);
  });
});
