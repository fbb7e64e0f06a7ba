import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION, SLEEPING_LABEL } from '../../api/labels.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import { findCondition } from '../../runtime/conditions.ts';
import type { EventInput } from '../../runtime/events.ts';
import { ownValue } from '../../runtime/json.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import { SYNCING_CONDITION } from './desired.ts';

/**
 * Sleep mode of a provisioned VirtualClusterInstance (issue 27), pure: what its last activity is,
 * whether it is asleep, woken or deleted for inactivity, when that can next change, and the
 * conditions and Events of each. The edges (`sleep-edge.ts`) stop and start what these say.
 *
 * Last activity is the latest of: the creation; the `sleepmode.platform/last-activity`
 * annotation (requests through the access proxy; a time in the future counts as now); the last
 * change the syncer carried (kept in memory by the replica running it, and persisted in
 * `status.lastActivity`); the last wake (the `Sleeping=False` transition). An awake instance falls
 * asleep when `spec.sleepAfter` > 0 and that long has passed since, or when the
 * `sleepmode.platform/sleep-requested` annotation is later than it (a request dated in the future
 * takes effect at that time); an asleep one wakes on any activity later than `status.sleepingSince`.
 * Either is deleted when `spec.deleteAfter` > 0 and that long has passed since its last activity.
 */

export const SLEEPING_CONDITION = 'Sleeping';
/** The reason of `Ready=False` while asleep. */
export const SLEEPING_REASON = 'Sleeping';
/** `status.lastActivity` is written at most this often, unless the instance falls asleep, wakes or is deleted. */
export const LAST_ACTIVITY_WRITE_INTERVAL_MS = 60_000;

export type SleepReason = 'Inactive' | 'SleepRequested';

/** What the controller knows of an instance's activity besides the instance itself. */
export interface SleepObservation {
  now: number;
  /** When its syncer last carried a change, as this replica saw it (undefined: none seen). */
  syncerActivity?: number | undefined;
}

export type SleepAction =
  /** Awake, and stays so. */
  | 'stayAwake'
  /** Awake until now: put to sleep. */
  | 'sleep'
  /** Asleep, and stays so. */
  | 'stayAsleep'
  /** Asleep until now: woken by activity later than `sleepingSince`. */
  | 'wake'
  /** Inactive for `spec.deleteAfter`: the instance is deleted. */
  | 'delete';

export interface SleepDecision {
  action: SleepAction;
  /** Why it is asleep (`sleep`, `stayAsleep`). */
  reason?: SleepReason;
  /** The last activity, ms since the epoch. */
  lastActivity: number;
  /** When it fell asleep, RFC 3339 UTC with milliseconds (`sleep`: now; `stayAsleep`: as recorded). */
  sleepingSince?: string;
  /** When it woke (`wake`: now), the `Sleeping=False` transition time. */
  wokeAt?: string;
  /** `status.lastActivity` to write: the new last activity, or the recorded one while throttled. */
  statusLastActivity: string;
  /** How long until the decision can change by time alone; undefined: only activity changes it. */
  requeueAfter?: number;
}

const parseTime = (value: string | null | undefined): number | undefined => {
  if (value === undefined || value === null) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
};

const annotation = (vci: Pick<VirtualClusterInstance, 'metadata'>, name: string) =>
  parseTime(ownValue(vci.metadata.annotations ?? {}, name));

/** RFC 3339 UTC with milliseconds: the precision of the activity annotations. */
export const formatActivityTime = (ms: number): string => new Date(ms).toISOString();

/** Whether the instance's status says it is asleep, and since when (ms). */
export function asleepSince(vci: Pick<VirtualClusterInstance, 'status'>): number | undefined {
  const sleeping = findCondition(vci.status?.conditions, SLEEPING_CONDITION);
  if (sleeping?.status !== 'True') return undefined;
  return parseTime(vci.status?.sleepingSince) ?? parseTime(sleeping.lastTransitionTime) ?? 0;
}

/**
 * Each source of activity of the instance (ms since the epoch; absent when it has none). The
 * annotation is capped at `now`: a time in the future counts as now.
 */
export function activitySources(
  vci: Pick<VirtualClusterInstance, 'metadata' | 'status'>,
  observed: SleepObservation,
): { created?: number; annotation?: number; syncer?: number; recorded?: number; woke?: number } {
  const fromAnnotation = annotation(vci, LAST_ACTIVITY_ANNOTATION);
  const sleeping = findCondition(vci.status?.conditions, SLEEPING_CONDITION);
  const sources = {
    created: parseTime(vci.metadata.creationTimestamp),
    annotation: fromAnnotation === undefined ? undefined : Math.min(fromAnnotation, observed.now),
    syncer: observed.syncerActivity,
    recorded: parseTime(vci.status?.lastActivity),
    woke: sleeping?.status === 'False' ? parseTime(sleeping.lastTransitionTime) : undefined,
  };
  return Object.fromEntries(Object.entries(sources).filter(([, v]) => v !== undefined));
}

/** The instance's last activity (ms): the latest of its sources (0 when it has none). */
export function lastActivityOf(
  vci: Pick<VirtualClusterInstance, 'metadata' | 'status'>,
  observed: SleepObservation,
): number {
  return Math.max(0, ...Object.values(activitySources(vci, observed)));
}

/** The soonest of the moments (ms) after `now`, as a delay; undefined when there is none. */
function soonest(now: number, moments: ReadonlyArray<number | undefined>): number | undefined {
  const ahead = moments.filter((m): m is number => m !== undefined).map((m) => Math.max(1, m - now));
  return ahead.length > 0 ? Math.min(...ahead) : undefined;
}

/** Whether an awake instance is put to sleep now, and why (pure). */
function sleepReason(
  vci: Pick<VirtualClusterInstance, 'metadata' | 'spec'>,
  last: number,
  now: number,
): SleepReason | undefined {
  const requested = annotation(vci, SLEEP_REQUESTED_ANNOTATION);
  if (requested !== undefined && requested <= now && requested > last) return 'SleepRequested';
  const after = (vci.spec.sleepAfter ?? 0) * 1000;
  if (after > 0 && now - last >= after) return 'Inactive';
  return undefined;
}

/**
 * The sleep-mode decision for a provisioned instance (pure), from the instance (annotations,
 * spec, status) and what the controller observed (now, its syncer's last carried change).
 */
export function decideSleep(vci: VirtualClusterInstance, observed: SleepObservation): SleepDecision {
  const { now } = observed;
  const last = lastActivityOf(vci, observed);
  const deleteAfter = (vci.spec.deleteAfter ?? 0) * 1000;
  const sleepAfter = (vci.spec.sleepAfter ?? 0) * 1000;
  const deleteAt = deleteAfter > 0 ? last + deleteAfter : undefined;
  const recorded = parseTime(vci.status?.lastActivity);
  const throttled = recorded !== undefined && last - recorded < LAST_ACTIVITY_WRITE_INTERVAL_MS;
  const statusLastActivity = (transition: boolean) =>
    formatActivityTime(throttled && !transition ? (recorded ?? last) : last);
  const base = { lastActivity: last };
  if (deleteAt !== undefined && now >= deleteAt)
    return { ...base, action: 'delete', statusLastActivity: statusLastActivity(true) };
  const since = asleepSince(vci);
  if (since !== undefined) {
    if (last > since)
      return wakeDecision(vci, { ...base, now, statusLastActivity: statusLastActivity(true) });
    const sleeping = findCondition(vci.status?.conditions, SLEEPING_CONDITION);
    return {
      ...base,
      action: 'stayAsleep',
      reason: sleeping?.reason === 'SleepRequested' ? 'SleepRequested' : 'Inactive',
      sleepingSince: formatActivityTime(since),
      statusLastActivity: statusLastActivity(false),
      ...optional('requeueAfter', soonest(now, [deleteAt])),
    };
  }
  const reason = sleepReason(vci, last, now);
  if (reason)
    return {
      ...base,
      action: 'sleep',
      reason,
      sleepingSince: formatActivityTime(now),
      statusLastActivity: statusLastActivity(true),
      ...optional('requeueAfter', soonest(now, [deleteAt])),
    };
  const requested = annotation(vci, SLEEP_REQUESTED_ANNOTATION);
  return {
    ...base,
    action: 'stayAwake',
    statusLastActivity: statusLastActivity(false),
    ...optional(
      'requeueAfter',
      soonest(now, [
        deleteAt,
        sleepAfter > 0 ? last + sleepAfter : undefined,
        requested !== undefined && requested > now ? requested : undefined,
      ]),
    ),
  };
}

/** Woken now: it stays awake at least `sleepAfter` (the wake counts as activity). */
function wakeDecision(
  vci: VirtualClusterInstance,
  input: { lastActivity: number; now: number; statusLastActivity: string },
): SleepDecision {
  const { now } = input;
  const deleteAfter = (vci.spec.deleteAfter ?? 0) * 1000;
  const sleepAfter = (vci.spec.sleepAfter ?? 0) * 1000;
  return {
    action: 'wake',
    lastActivity: input.lastActivity,
    wokeAt: formatActivityTime(now),
    statusLastActivity: formatActivityTime(Math.max(input.lastActivity, now)),
    ...optional(
      'requeueAfter',
      soonest(now, [
        deleteAfter > 0 ? now + deleteAfter : undefined,
        sleepAfter > 0 ? now + sleepAfter : undefined,
      ]),
    ),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

const SLEEP_MESSAGES: Record<SleepReason, string> = {
  Inactive: 'no activity for spec.sleepAfter: the control plane is stopped, its storage kept',
  SleepRequested: `put to sleep by the ${SLEEP_REQUESTED_ANNOTATION} annotation: the control plane is stopped, its storage kept`,
};

/**
 * The outcome of an asleep instance (pure): `Sleeping=True` since `sleepingSince` (the same time
 * as `status.sleepingSince`), `Ready=False` `Sleeping`, `Syncing=False` `Sleeping` (the syncer is
 * paused, what it wrote on the host stays, labelled), `Provisioned` left as it was; looked at again
 * when it may be deleted for inactivity (a wake comes from activity, which the watch brings).
 */
export function asleepOutcome(decision: SleepDecision): Converged<VirtualClusterInstanceStatus> {
  const reason = decision.reason ?? 'Inactive';
  const since = decision.sleepingSince ?? formatActivityTime(decision.lastActivity);
  return {
    ready: {
      status: 'False',
      reason: SLEEPING_REASON,
      message: `the virtual cluster is asleep since ${since}`,
    },
    conditions: [
      {
        type: SLEEPING_CONDITION,
        status: 'True',
        reason,
        message: SLEEP_MESSAGES[reason],
        lastTransitionTime: since,
      },
      {
        type: SYNCING_CONDITION,
        status: 'False',
        reason: SLEEPING_REASON,
        message: `the syncer is paused while the virtual cluster sleeps; what it wrote on the host stays, labelled ${SLEEPING_LABEL}`,
      },
    ],
    status: { sleepingSince: since, lastActivity: decision.statusLastActivity },
    ...optional('requeueAfter', decision.requeueAfter),
  };
}

/**
 * An awake instance's outcome with sleep mode added (pure): `Sleeping=False` `Awake` (its
 * transition time the wake's, when it just woke), no `sleepingSince`, `status.lastActivity`, and
 * looked at again no later than the moment it may fall asleep or be deleted.
 */
export function withAwake(
  outcome: Converged<VirtualClusterInstanceStatus>,
  decision: SleepDecision,
): Converged<VirtualClusterInstanceStatus> {
  const requeues = [outcome.requeueAfter, decision.requeueAfter].filter((v): v is number => v !== undefined);
  return {
    ...outcome,
    conditions: [
      ...(outcome.conditions ?? []),
      {
        type: SLEEPING_CONDITION,
        status: 'False',
        reason: 'Awake',
        message: 'the control plane runs',
        ...(decision.wokeAt ? { lastTransitionTime: decision.wokeAt } : {}),
      },
    ],
    status: { ...outcome.status, sleepingSince: undefined, lastActivity: decision.statusLastActivity },
    ...optional('requeueAfter', requeues.length > 0 ? Math.min(...requeues) : undefined),
  };
}

/** The Event of a sleep-mode transition (pure); undefined when the action is none. */
export function sleepEvent(decision: SleepDecision): EventInput | undefined {
  const lastActivity = formatActivityTime(decision.lastActivity);
  switch (decision.action) {
    case 'sleep':
      return {
        type: 'Normal',
        reason: 'FellAsleep',
        action: 'Sleep',
        note: `${SLEEP_MESSAGES[decision.reason ?? 'Inactive']} (last activity ${lastActivity})`,
      };
    case 'wake':
      return {
        type: 'Normal',
        reason: 'Woke',
        action: 'Wake',
        note: `activity at ${lastActivity}: starting the control plane again`,
      };
    case 'delete':
      return {
        type: 'Normal',
        reason: 'DeletedForInactivity',
        action: 'Delete',
        note: `no activity since ${lastActivity}, longer than spec.deleteAfter: the virtual cluster is deleted with its storage`,
      };
    default:
      return undefined;
  }
}

/**
 * Whether an update of an instance may change a sleep-mode decision at once (the watch's
 * predicate, pure): the sleep request changed, or the last-activity annotation changed while it
 * is asleep (the wake request). An awake instance's activity only postpones a sleep the
 * controller looks at when it is due, so those writes (every 10 s of a busy instance) reconcile
 * nothing.
 */
export function sleepAnnotationsChanged(
  oldObj: Pick<VirtualClusterInstance, 'metadata'>,
  newObj: Pick<VirtualClusterInstance, 'metadata' | 'status'>,
): boolean {
  const of = (obj: Pick<VirtualClusterInstance, 'metadata'>, name: string) =>
    ownValue(obj.metadata.annotations ?? {}, name);
  if (of(oldObj, SLEEP_REQUESTED_ANNOTATION) !== of(newObj, SLEEP_REQUESTED_ANNOTATION)) return true;
  return (
    of(oldObj, LAST_ACTIVITY_ANNOTATION) !== of(newObj, LAST_ACTIVITY_ANNOTATION) &&
    asleepSince(newObj) !== undefined
  );
}
