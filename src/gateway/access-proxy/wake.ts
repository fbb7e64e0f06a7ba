import type { Logger } from 'pino';
import { LAST_ACTIVITY_ANNOTATION } from '../../api/labels.ts';
import { API_GROUP, API_VERSION } from '../../api/meta.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import {
  reviewAllowed,
  SUBJECT_ACCESS_REVIEWS_PATH,
  subjectAccessReview,
} from '../../authz/subject-access-review.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { keyUserInfo } from '../../identity/user-info.ts';
import { type Clock, systemClock } from '../../runtime/clock.ts';
import { errorReason } from '../../runtime/errors.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectPath } from '../../runtime/kube-client.ts';
import { instanceKey } from './managed-targets.ts';
import {
  ActivityThrottle,
  activityStamp,
  isAwake,
  MAX_WAITING_PER_INSTANCE,
  notAwakeInTime,
  sleepingSince,
  tooManyWaiting,
  wakeAction,
  wakeNotRequested,
  wakeRefused,
  wakeWaitMs,
} from './sleep-wake.ts';
import type { ProxyTarget } from './target.ts';

/**
 * The I/O of sleep mode at the access proxy (the decisions are `sleep-wake.ts`'s): before a
 * request to a project's virtual cluster is relayed, and only once the pipeline authenticated it,
 * its key's scope allowed it and its caller may get the VirtualClusterInstance (`mayWake`: a key
 * reaching the path is not enough, an unscoped key of someone outside the project reaches it), an
 * asleep instance is asked to wake (the last-activity
 * annotation written at once, a merge patch as the gateway) and the request waits, following the
 * gateway's informer (no polling), until the instance is Ready and not Sleeping, at most its
 * client's timeout and never after the client went away. An awake instance's requests are its
 * activity, written in the background at most once per 10 s per instance; a failed write is
 * logged (the instance and the apiserver's reason, nothing else) and the request goes on.
 */

/** `C`: who made the request (the pipeline's authenticated identity). */
export interface InstanceWakerOptions<C> {
  readonly virtualClusters: Informer<Stored<VirtualClusterInstance>>;
  /** Writes the annotation, as the gateway (`patch` on virtualclusterinstances). */
  readonly api: KubeApi;
  /** The namespace of a project (`projectNamespaceName`). */
  readonly projectNamespace: (project: string) => string;
  /**
   * Whether `caller` may get the instance (a SubjectAccessReview): only such a caller wakes it or
   * counts as its activity. Rejects when it cannot be told (the request then fails, 503).
   */
  readonly mayWake: (
    caller: C,
    instance: Stored<VirtualClusterInstance>,
    signal: AbortSignal,
  ) => Promise<boolean>;
  readonly logger: Pick<Logger, 'warn'>;
  readonly clock?: Clock;
  readonly throttle?: ActivityThrottle;
}

export class InstanceWaker<C> {
  private readonly clock: Clock;
  private readonly throttle: ActivityThrottle;
  /** Requests waiting for an instance (by instance key): each checks the instance again when it changes. */
  private readonly waiters = new Map<string, Set<() => void>>();
  /** A wake request being written, per instance: requests arriving meanwhile wait for it, not write again. */
  private readonly waking = new Map<string, Promise<void>>();
  /** The last wake request written per instance, and the sleep it ended (its `sleepingSince`). */
  private readonly woken = new Map<string, string>();
  private readonly unsubscribe: () => void;

  constructor(private readonly options: InstanceWakerOptions<C>) {
    this.clock = options.clock ?? systemClock;
    this.throttle = options.throttle ?? new ActivityThrottle();
    const changed = (vci: Stored<VirtualClusterInstance>) => this.notify(instanceKey(vci));
    this.unsubscribe = options.virtualClusters.addEventHandler({
      onAdd: changed,
      onUpdate: changed,
      onDelete: (vci) => {
        this.throttle.forget(instanceKey(vci));
        this.woken.delete(instanceKey(vci));
        changed(vci);
      },
    });
  }

  /**
   * Call once the request is allowed, before it is relayed: returns when the target may be
   * relayed to. Throws a 503 `Status` when an asleep instance did not get ready within the
   * request's bound, the signal's reason when the client went away.
   */
  async ready(target: ProxyTarget, caller: C, search: string, signal: AbortSignal): Promise<void> {
    if (target.kind !== 'ProjectVirtualCluster') return;
    const { virtualClusters } = this.options;
    // Before the first list, the relay's resolve waits for the cache and answers for it.
    if (!virtualClusters.hasSynced()) return;
    const namespace = this.options.projectNamespace(target.project);
    const instance = virtualClusters.store.getByName(namespace, target.virtualCluster);
    const action = wakeAction(instance);
    if (!instance || action.kind === 'relay') {
      if (instance && action.kind === 'relay' && action.activity) this.recordActivity(instance, caller);
      return;
    }
    const description = `virtual cluster "${target.project}/${target.virtualCluster}"`;
    const key = instanceKey(instance);
    const waitMs = wakeWaitMs(search);
    const deadline = this.clock.now() + waitMs;
    if (action.kind === 'wake') {
      if (!(await this.mayWake(caller, instance, signal, description))) throw wakeRefused(description);
      await this.requestWake(instance, description);
    }
    signal.throwIfAborted();
    await this.untilAwake(key, () => virtualClusters.store.getByName(namespace, target.virtualCluster), {
      remainingMs: Math.max(0, deadline - this.clock.now()),
      waitMs,
      signal,
      description,
    });
  }

  /** `mayWake`, its failure a 503 (logged with the instance and the reason, nothing else). */
  private async mayWake(
    caller: C,
    instance: Stored<VirtualClusterInstance>,
    signal: AbortSignal,
    description: string,
  ): Promise<boolean> {
    try {
      return await this.options.mayWake(caller, instance, signal);
    } catch (err) {
      signal.throwIfAborted();
      this.options.logger.warn(
        { instance: instanceKey(instance), reason: errorReason(err) },
        'could not tell whether the caller may wake a virtual cluster',
      );
      throw wakeNotRequested(description);
    }
  }

  /** Stops following the informer; requests still waiting wait out their bound. */
  close(): void {
    this.unsubscribe();
  }

  /**
   * An awake instance's request: its activity, in the background, at most once per interval, and
   * only when its caller may get the instance. The interval is counted once the caller is known to
   * be allowed: one who may not keeps nothing awake, and a check of theirs still under way holds
   * back no allowed caller's write.
   */
  private recordActivity(instance: Stored<VirtualClusterInstance>, caller: C): void {
    const key = instanceKey(instance);
    if (!this.throttle.wouldBeDue(key, this.clock.now())) return;
    void (async () => {
      if (!(await this.options.mayWake(caller, instance, AbortSignal.timeout(10_000)))) return;
      const now = this.clock.now();
      if (this.throttle.due(key, now)) await this.writeActivity(instance, activityStamp(now));
    })().catch((err: unknown) =>
      this.options.logger.warn(
        { instance: key, reason: errorReason(err) },
        'could not record the activity of a virtual cluster',
      ),
    );
  }

  /**
   * Writes the wake request of an asleep instance, once per sleep whoever asks (requests arriving
   * while it is written, or after it was for the same sleep, only wait). Throws a 503 when the
   * write failed: nothing would wake the instance, waiting would only delay the answer.
   */
  private async requestWake(instance: Stored<VirtualClusterInstance>, description: string): Promise<void> {
    const key = instanceKey(instance);
    const since = sleepingSince(instance) ?? '';
    if (this.woken.get(key) === since) return;
    let pending = this.waking.get(key);
    if (!pending) {
      const stamp = activityStamp(this.clock.now(), since);
      this.throttle.due(key, this.clock.now());
      pending = this.writeActivity(instance, stamp)
        .then(() => {
          this.woken.set(key, since);
        })
        .finally(() => this.waking.delete(key));
      this.waking.set(key, pending);
    }
    try {
      await pending;
    } catch (err) {
      this.options.logger.warn(
        { instance: key, reason: errorReason(err) },
        'could not wake a virtual cluster',
      );
      throw wakeNotRequested(description);
    }
  }

  private async writeActivity(instance: Stored<VirtualClusterInstance>, stamp: string): Promise<void> {
    await this.options.api.request({
      method: 'PATCH',
      path: objectPath(
        resources.virtualClusterInstances,
        instance.metadata.namespace,
        instance.metadata.name ?? '',
      ),
      contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { [LAST_ACTIVITY_ANNOTATION]: stamp } } },
    });
  }

  /**
   * Resolves once the instance is awake (or gone: the relay then answers 404), checked now and at
   * each change the informer sees; rejects with a 503 after `remainingMs`, or with the signal's reason.
   */
  private untilAwake(
    key: string,
    current: () => Stored<VirtualClusterInstance> | undefined,
    bound: { remainingMs: number; waitMs: number; signal: AbortSignal; description: string },
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiting = this.waiters.get(key) ?? new Set<() => void>();
      // Bounded: each waiting request holds a connection and a timer for up to its bound.
      if (waiting.size >= MAX_WAITING_PER_INSTANCE) {
        reject(tooManyWaiting(bound.description));
        return;
      }
      const settle = (outcome: () => void) => {
        waiting.delete(check);
        if (waiting.size === 0 && this.waiters.get(key) === waiting) this.waiters.delete(key);
        timer.cancel();
        bound.signal.removeEventListener('abort', onAbort);
        outcome();
      };
      const check = () => {
        const instance = current();
        if (!instance || isAwake(instance)) settle(resolve);
      };
      const onAbort = () => settle(() => reject(bound.signal.reason));
      const timer = this.clock.setTimer(bound.remainingMs, () =>
        settle(() => reject(notAwakeInTime(bound.description, bound.waitMs))),
      );
      waiting.add(check);
      this.waiters.set(key, waiting);
      bound.signal.addEventListener('abort', onAbort, { once: true });
      check();
    });
  }

  private notify(key: string): void {
    const waiting = this.waiters.get(key);
    if (!waiting) return;
    for (const check of [...waiting]) check();
  }
}

/** The gateway's waker: its callers are the pipeline's authenticated identities. */
export type AccessProxyWaker = InstanceWaker<AuthenticatedIdentity>;

/** `mayWake` as the gateway asks it: {@link mayGetInstance} through `api`. */
export const mayGetInstanceThrough =
  (api: KubeApi) =>
  (caller: AuthenticatedIdentity, instance: Stored<VirtualClusterInstance>, signal: AbortSignal) =>
    mayGetInstance(api, caller, instance.metadata.namespace ?? '', instance.metadata.name ?? '', signal);

/**
 * Whether `caller` (as the gateway impersonates it: user, groups, uid, the key's extra) may get the
 * VirtualClusterInstance `namespace/name`: one SubjectAccessReview as the gateway.
 */
export async function mayGetInstance(
  api: KubeApi,
  caller: AuthenticatedIdentity,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<boolean> {
  const answer = await api.request<{ status?: { allowed?: boolean } }>({
    method: 'POST',
    path: SUBJECT_ACCESS_REVIEWS_PATH,
    body: subjectAccessReview(keyUserInfo(caller), {
      group: API_GROUP,
      version: API_VERSION,
      resource: resources.virtualClusterInstances.plural,
      namespace,
      name,
      verb: 'get',
    }),
    signal,
  });
  return reviewAllowed(answer);
}
