import type { Logger } from 'pino';
import { type Clock, formatMicroTime, jitter, type Random, sleep, type Timer } from './clock.ts';
import { isApiError, isNotFound } from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import { collectionPath, objectPath, type ResourceRef } from './kube-client.ts';
import type { RuntimeMetrics } from './metrics.ts';

export const leaseResource: ResourceRef = {
  group: 'coordination.k8s.io',
  version: 'v1',
  plural: 'leases',
  namespaced: true,
};

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

export interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string; labels?: Record<string, string> };
  spec?: LeaseSpec;
}

export type LeaseDecision =
  | { action: 'create'; spec: LeaseSpec }
  | { action: 'update'; spec: LeaseSpec }
  | { action: 'wait'; holder: string; expiresAt: number };

export interface LeaseDecisionInput {
  identity: string;
  now: number;
  leaseDurationMs: number;
  /**
   * Our local clock's time when we first saw the current lease record (holder/renewTime) as it
   * is now. Expiry is judged from this, never from the remote `renewTime`, so clock skew between
   * candidates does not matter (client-go's observedTime).
   */
  observedAt: number;
}

/**
 * The pure decision of client-go's tryAcquireOrRenew: given the lease as read (undefined when it
 * does not exist), create it, take it over / renew it, or wait for it to expire.
 */
export function decideLease(current: LeaseSpec | undefined, input: LeaseDecisionInput): LeaseDecision {
  const { identity, now, leaseDurationMs, observedAt } = input;
  const renewTime = formatMicroTime(now);
  const leaseDurationSeconds = Math.ceil(leaseDurationMs / 1000);
  if (!current) {
    return {
      action: 'create',
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: renewTime,
        renewTime,
        leaseTransitions: 0,
      },
    };
  }
  const holder = current.holderIdentity ?? '';
  const recordDurationMs = (current.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
  const expiresAt = observedAt + recordDurationMs;
  if (holder !== '' && holder !== identity && expiresAt > now) return { action: 'wait', holder, expiresAt };
  if (holder === identity) {
    return {
      action: 'update',
      spec: { ...current, holderIdentity: identity, leaseDurationSeconds, renewTime },
    };
  }
  return {
    action: 'update',
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: renewTime,
      renewTime,
      leaseTransitions: (current.leaseTransitions ?? 0) + 1,
    },
  };
}

export interface LeaderElectionConfig {
  namespace: string;
  name: string;
  /** Unique per candidate (e.g. pod name + random suffix). */
  identity: string;
  /** How long a non-renewed lease blocks other candidates (default 15 s). */
  leaseDurationMs?: number;
  /** A leader that could not renew for this long stops leading (default 10 s; must be < leaseDuration). */
  renewDeadlineMs?: number;
  /**
   * Time between renewals of the leader (default 2 s). A candidate looks at the lease at least
   * this often (every 0.4 to 0.6 of it, jittered) and again at the moment the lease it saw
   * expires, so it takes over within leaseDuration + retryPeriod of the holder's last renewal.
   */
  retryPeriodMs?: number;
  /** Clear the holder on graceful stop so another candidate takes over at once (default true). */
  releaseOnCancel?: boolean;
  /** Labels the Lease is written with (how a replica's watch selects the leases of its kind). */
  labels?: Record<string, string>;
}

export interface LeaderElectorOptions extends LeaderElectionConfig {
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  metrics?: RuntimeMetrics;
  onStartedLeading: () => void;
  /**
   * When this replica first saw `lease`'s current record (holder and renewTime) before reading it
   * itself, e.g. through a watch of the leases; undefined if it did not. Expiry is then judged from
   * that earlier sighting, still on our own clock: a candidate that starts to campaign for a lease
   * it has watched need not wait a whole leaseDuration more.
   */
  sightedAt?: (lease: Lease) => number | undefined;
  /** Called when leadership ends (lost or released); always before the lease can be taken over. */
  onStoppedLeading: () => void;
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package.
 *
 * Safety: a leader stops leading (onStoppedLeading) once `renewDeadline` has passed since its
 * last successful renewal, measured on its own clock from before the renewing request was sent.
 * Other candidates only take over `leaseDuration` after they observed that renewal, which is
 * later; renewDeadline < leaseDuration leaves the margin for clock rate differences.
 * Writes use the lease's resourceVersion (optimistic concurrency): two candidates cannot both win.
 * `leadingUntil()` tells a write fence (see fencing.ts) the end of the current term, so writes can
 * be refused on the clock even before the deadline timer has run.
 *
 * Unlike client-go (a candidate retries every retryPeriod jittered up to 2.2x, so a takeover can
 * take up to leaseDuration + 4.4 retryPeriods after the last renewal), a candidate polls every
 * 0.4-0.6 retryPeriod and wakes exactly when the lease it observed expires: the takeover comes
 * within leaseDuration + retryPeriod of the holder's last renewal. Safety does not change: the
 * expiry is still judged from our own observation time.
 */
export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private observed: { key: string; at: number; lease: Lease } | undefined;
  private leading = false;
  /** While leading: renewDeadline after the start of the last successful acquire/renew attempt. */
  private validUntil = 0;
  /** When the last attempt saw another holder: the moment that holder's lease expires. */
  private waitUntil: number | undefined;
  private deadlineTimer: Timer | undefined;
  private renewAbort: AbortController | undefined;

  constructor(private readonly options: LeaderElectorOptions) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new Error('renewDeadline must be shorter than leaseDuration');
    if (this.retryPeriodMs * 1.2 >= this.renewDeadlineMs)
      throw new Error('retryPeriod * 1.2 must be shorter than renewDeadline');
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * While leading, the time (clock ms) until which this replica may act as the leader:
   * renewDeadline after the start of its last successful acquire or renew attempt. 0 otherwise.
   */
  leadingUntil(): number {
    return this.leading ? this.validUntil : 0;
  }

  /** The holder identity last read from the lease. */
  observedHolder(): string | undefined {
    return this.observed?.lease.spec?.holderIdentity ?? undefined;
  }

  /** Campaigns, leads, and campaigns again after losing, until `signal` aborts; then releases. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, random, logger } = this.options;
    while (!signal.aborted) {
      // Measured before the request is sent: others observe our write later than that.
      const attemptStartedAt = clock.now();
      const acquired = await this.tryAcquireOrRenew(signal, this.retryPeriodMs);
      if (!acquired) {
        let delay = jitter(this.retryPeriodMs * 0.4, 0.5, random);
        if (this.waitUntil !== undefined) delay = Math.min(delay, Math.max(0, this.waitUntil - clock.now()));
        await sleep(clock, delay, signal);
        continue;
      }
      this.startLeading(attemptStartedAt);
      while (this.leading && !signal.aborted) {
        await sleep(clock, this.retryPeriodMs, signal);
        if (!this.leading || signal.aborted) break;
        const attemptStartedAt = clock.now();
        this.renewAbort = new AbortController();
        const onStop = () => this.renewAbort?.abort();
        signal.addEventListener('abort', onStop, { once: true });
        const renewed = await this.tryAcquireOrRenew(this.renewAbort.signal, this.retryPeriodMs);
        signal.removeEventListener('abort', onStop);
        if (renewed && this.leading) this.armDeadline(attemptStartedAt);
        else if (!renewed) logger.warn({ lease: this.options.name }, 'failed to renew lease');
      }
    }
    if (this.leading) {
      if (this.options.releaseOnCancel ?? true) await this.release();
      this.stopLeading('released on shutdown');
    }
  }

  private startLeading(acquiredAt: number): void {
    this.leading = true;
    this.armDeadline(acquiredAt);
    this.options.metrics?.leaderStatus.set({ name: this.options.name }, 1);
    this.options.logger.info({ lease: this.options.name, identity: this.options.identity }, 'became leader');
    this.options.onStartedLeading();
  }

  /** Stops leading `renewDeadline` after `renewedAt` unless a later renewal re-arms it. */
  private armDeadline(renewedAt: number): void {
    this.deadlineTimer?.cancel();
    this.validUntil = renewedAt + this.renewDeadlineMs;
    const remaining = this.validUntil - this.options.clock.now();
    this.deadlineTimer = this.options.clock.setTimer(remaining, () => {
      this.renewAbort?.abort();
      this.stopLeading('renew deadline exceeded');
    });
  }

  private stopLeading(why: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.validUntil = 0;
    this.deadlineTimer?.cancel();
    this.deadlineTimer = undefined;
    this.options.metrics?.leaderStatus.set({ name: this.options.name }, 0);
    this.options.logger.info(
      { lease: this.options.name, identity: this.options.identity, why },
      'stopped leading',
    );
    this.options.onStoppedLeading();
  }

  /** One attempt; false on any failure (logged), including conflicts and timeouts. */
  private async tryAcquireOrRenew(signal: AbortSignal, timeoutMs: number): Promise<boolean> {
    const { api, namespace, name, identity, clock, logger } = this.options;
    this.waitUntil = undefined;
    try {
      let current: Lease | undefined;
      try {
        current = await api.request<Lease>({
          method: 'GET',
          path: objectPath(leaseResource, namespace, name),
          signal,
          timeoutMs,
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      const now = clock.now();
      if (current) this.observe(current, now);
      const decision = decideLease(current?.spec, {
        identity,
        now,
        leaseDurationMs: this.leaseDurationMs,
        observedAt: this.observed?.at ?? now,
      });
      if (decision.action === 'wait') {
        this.waitUntil = decision.expiresAt;
        return false;
      }
      const body: Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name,
          namespace,
          ...(this.options.labels ? { labels: this.options.labels } : {}),
          ...(current ? { resourceVersion: current.metadata.resourceVersion } : {}),
        },
        spec: decision.spec,
      };
      const written = await api.request<Lease>(
        decision.action === 'create'
          ? { method: 'POST', path: collectionPath(leaseResource, namespace), body, signal, timeoutMs }
          : { method: 'PUT', path: objectPath(leaseResource, namespace, name), body, signal, timeoutMs },
      );
      this.observe(written, now);
      return true;
    } catch (err) {
      if (!signal.aborted && !isApiError(err, 409))
        logger.warn({ err, lease: name }, 'lease acquire/renew failed');
      return false;
    }
  }

  private observe(lease: Lease, now: number): void {
    const spec = lease.spec ?? {};
    const key = `${spec.holderIdentity ?? ''}|${spec.renewTime ?? ''}|${lease.metadata.resourceVersion ?? ''}`;
    if (this.observed?.key !== key) {
      const sighted = this.options.sightedAt?.(lease);
      this.observed = { key, at: sighted === undefined ? now : Math.min(now, sighted), lease };
    } else this.observed.lease = lease;
  }

  /** Clears the holder so that another candidate can take over at once. */
  private async release(): Promise<void> {
    const lease = this.observed?.lease;
    if (!lease || lease.spec?.holderIdentity !== this.options.identity) return;
    const now = formatMicroTime(this.options.clock.now());
    try {
      await this.options.api.request({
        method: 'PUT',
        path: objectPath(leaseResource, this.options.namespace, this.options.name),
        body: {
          ...lease,
          spec: {
            holderIdentity: null,
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: lease.spec?.leaseTransitions ?? 0,
          },
        },
        timeoutMs: this.retryPeriodMs,
      });
    } catch (err) {
      this.options.logger.warn({ err, lease: this.options.name }, 'failed to release lease');
    }
  }
}
