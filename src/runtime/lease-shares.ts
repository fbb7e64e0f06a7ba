import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { assignKeys } from './assignment.ts';
import type { Clock, Random, Timer } from './clock.ts';
import { isApiError, isNotFound, LeaderElectionLostError } from './errors.ts';
import { LeaseTerms, type WriteFence } from './fencing.ts';
import type { Informer } from './informer.ts';
import type { KubeApi } from './kube-api.ts';
import { objectPath } from './kube-client.ts';
import { type LeaderElectionConfig, LeaderElector, type Lease, leaseResource } from './leader-election.ts';

/** The label naming the share group a Lease belongs to (its value: the group). */
export const SHARE_GROUP_LABEL = 'management.platform/lease-share-group';
/** `member` (a replica's presence) or `key` (one shared key's holder). */
export const SHARE_ROLE_LABEL = 'management.platform/lease-share-role';

const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);
/** The Lease by which `identity` is a live member of `group`. */
export const memberLeaseName = (group: string, identity: string) => `${group}-member-${digest(identity)}`;
/** The Lease whose holder alone acts for `key`. */
export const keyLeaseName = (group: string, key: string) => `${group}-key-${digest(key)}`;

const recordOf = (lease: Lease) => `${lease.spec?.holderIdentity ?? ''}|${lease.spec?.renewTime ?? ''}`;

export interface LeaseSharesOptions {
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  /** Namespace, identity and timings; `name` is the share group (the leases' name prefix). */
  election: LeaderElectionConfig;
  /** The group's Leases (`SHARE_GROUP_LABEL=<group>` in the namespace), watched by every replica. */
  leases: Informer<Lease>;
  /** Every key to be shared (the same on every replica once their caches agree). */
  keys: () => readonly string[];
  /** This replica's term for `key` began or ended (its fence changed). */
  onAcquired: (key: string) => void;
  onLost: (key: string) => void;
}

interface HeldKey {
  stop: AbortController;
  terms: LeaseTerms;
  done: Promise<void>;
}

/**
 * Keys shared out between the live replicas, each acted on by exactly one of them.
 *
 * Membership: each replica holds a member Lease of its own, renewed like a leader's; a member is
 * live while the renewals of its lease keep coming (judged from when this replica saw them,
 * never from the remote renewTime). Assignment: `assignKeys` over the keys and the live members
 * (pure, balanced: floor or ceil of keys/members each), so replicas agree without talking.
 * Exclusion: a replica campaigns for the Lease of each key assigned to it and acts on the key
 * only during a term of that Lease, with writes fenced by the term (`fence`); it releases the
 * Lease of a key no longer assigned to it, so the new assignee takes over at once. A replica that
 * dies stops renewing: its member Lease and its key Leases expire together, and the keys' new
 * assignees, which watched those Leases, take them over within leaseDuration (plus one retry
 * period) of its last renewal. Views that differ for a moment (a cache behind) cost a wait, never
 * a second holder: the key Lease decides.
 */
export class LeaseShares {
  private readonly member: LeaderElector;
  /** Lease name -> the record last seen by the watch and since when (our clock). */
  private readonly sightings = new Map<string, { record: string; at: number; lease: Lease }>();
  private readonly held = new Map<string, HeldKey>();
  private expiryTimer: Timer | undefined;
  private signal: AbortSignal | undefined;

  constructor(private readonly options: LeaseSharesOptions) {
    const { election } = options;
    this.member = new LeaderElector({
      ...this.electorOptions(memberLeaseName(election.name, election.identity), 'member'),
      onStartedLeading: () => this.refresh(),
      onStoppedLeading: () => this.refresh(),
    });
    options.leases.addEventHandler({
      onAdd: (lease) => this.sight(lease),
      onUpdate: (_old, lease) => this.sight(lease),
      onDelete: (lease) => {
        this.sightings.delete(lease.metadata.name);
        this.refresh();
      },
    });
  }

  /** Holds the member Lease and the keys' until `signal` aborts; then releases them all. */
  async run(signal: AbortSignal): Promise<void> {
    this.signal = signal;
    const membership = this.member.run(signal);
    this.refresh();
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    this.expiryTimer?.cancel();
    for (const entry of this.held.values()) entry.stop.abort();
    await Promise.all([...this.held.values()].map((entry) => entry.done));
    await membership;
  }

  /** The live members' identities (this replica while its member Lease is held). */
  liveMembers(): string[] {
    const now = this.options.clock.now();
    const live = new Set<string>();
    for (const { lease, at } of this.sightings.values()) {
      const holder = lease.spec?.holderIdentity ?? '';
      if (lease.metadata.labels?.[SHARE_ROLE_LABEL] !== 'member' || holder === '') continue;
      if (at + (lease.spec?.leaseDurationSeconds ?? 0) * 1000 > now) live.add(holder);
    }
    if (this.member.isLeader()) live.add(this.options.election.identity);
    else live.delete(this.options.election.identity);
    return [...live].sort();
  }

  /**
   * The fence of this replica's current term for `key` (bound to that term: it refuses writes
   * once the term ends, even in a later one), or undefined while it holds no term for it.
   */
  fence(key: string): WriteFence | undefined {
    const entry = this.held.get(key);
    return entry?.terms.isCurrent() ? entry.terms.termFence() : undefined;
  }

  /** Campaigns for the keys assigned to this replica, releases the others. Call when the keys change. */
  refresh(): void {
    if (!this.signal || this.signal.aborted) return;
    const keys = this.options.keys();
    const identity = this.options.election.identity;
    const assignment = this.member.isLeader() ? assignKeys(keys, this.liveMembers()) : new Map();
    const mine = new Set([...assignment].filter(([, member]) => member === identity).map(([key]) => key));
    for (const key of mine) if (!this.held.has(key)) this.campaign(key);
    const known = new Set(keys);
    for (const [key, entry] of this.held) {
      if (mine.has(key)) continue;
      this.held.delete(key);
      entry.stop.abort();
      // A key that is gone leaves no Lease behind (once released).
      if (!known.has(key)) void entry.done.then(() => this.deleteKeyLease(key));
    }
  }

  private campaign(key: string): void {
    const stop = new AbortController();
    const name = keyLeaseName(this.options.election.name, key);
    let elector: LeaderElector | undefined;
    const terms = new LeaseTerms(
      this.options.clock,
      () => elector?.leadingUntil() ?? 0,
      () => new LeaderElectionLostError(`not the holder of lease ${name} (${key}): write refused`),
    );
    elector = new LeaderElector({
      ...this.electorOptions(name, 'key'),
      onStartedLeading: () => {
        terms.begin();
        this.options.onAcquired(key);
      },
      onStoppedLeading: () => {
        terms.end(new LeaderElectionLostError(`lease ${name} (${key}) lost: write aborted`));
        this.options.onLost(key);
      },
    });
    this.held.set(key, { stop, terms, done: elector.run(stop.signal) });
  }

  private electorOptions(name: string, role: 'member' | 'key') {
    const { api, clock, random, logger, election } = this.options;
    return {
      ...election,
      name,
      labels: { [SHARE_GROUP_LABEL]: election.name, [SHARE_ROLE_LABEL]: role },
      api,
      clock,
      random,
      logger,
      sightedAt: (lease: Lease) => {
        const seen = this.sightings.get(lease.metadata.name);
        return seen?.record === recordOf(lease) ? seen.at : undefined;
      },
    };
  }

  /** Records when a lease's record was first seen; membership may have changed. */
  private sight(lease: Lease): void {
    const record = recordOf(lease);
    const seen = this.sightings.get(lease.metadata.name);
    if (seen?.record === record) seen.lease = lease;
    else this.sightings.set(lease.metadata.name, { record, at: this.options.clock.now(), lease });
    // Only members' renewals change who is live (keys' renewals come by the hundred).
    if (lease.metadata.labels?.[SHARE_ROLE_LABEL] !== 'member') return;
    this.refresh();
    this.armExpiry();
  }

  /** Looks again when the next member's lease would expire unrenewed. */
  private armExpiry(): void {
    const now = this.options.clock.now();
    let next = Number.POSITIVE_INFINITY;
    for (const { lease, at } of this.sightings.values()) {
      if (lease.metadata.labels?.[SHARE_ROLE_LABEL] !== 'member' || !lease.spec?.holderIdentity) continue;
      const expiresAt = at + (lease.spec.leaseDurationSeconds ?? 0) * 1000;
      if (expiresAt > now) next = Math.min(next, expiresAt);
    }
    this.expiryTimer?.cancel();
    if (next === Number.POSITIVE_INFINITY || this.signal?.aborted) return;
    this.expiryTimer = this.options.clock.setTimer(next - now, () => {
      this.refresh();
      this.armExpiry();
    });
  }

  private async deleteKeyLease(key: string): Promise<void> {
    const { api, election, logger } = this.options;
    const name = keyLeaseName(election.name, key);
    try {
      await api.request({ method: 'DELETE', path: objectPath(leaseResource, election.namespace, name) });
    } catch (err) {
      if (!isNotFound(err) && !isApiError(err, 409))
        logger.warn({ err, lease: name }, 'could not delete a lease');
    }
  }
}
