import type { Condition } from '../api/meta.ts';
import { formatTime } from './clock.ts';

export type { Condition, ConditionStatus } from '../api/meta.ts';

/**
 * A condition as a controller states it: every field but the transition time, which `setCondition`
 * keeps. `lastTransitionTime`, when given, is the time used if the status flips (a controller
 * that records the same moment elsewhere in the status, as `status.sleepingSince`), else `now`.
 */
export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'reason' | 'message'> & {
  reason: string;
  message: string;
  lastTransitionTime?: string;
};

/**
 * Returns a new list with `cond` set (order preserved, new types appended). `lastTransitionTime`
 * is `now` only when the status flips (or the type is new); a change of reason, message or
 * observedGeneration alone keeps the previous transition time, as apimachinery's
 * meta.SetStatusCondition does.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  cond: ConditionInput,
  now: Date,
): Condition[] {
  const list = [...(conditions ?? [])];
  const index = list.findIndex((existing) => existing.type === cond.type);
  const existing = index >= 0 ? list[index] : undefined;
  const lastTransitionTime =
    existing && existing.status === cond.status
      ? existing.lastTransitionTime
      : (cond.lastTransitionTime ?? formatTime(now.getTime()));
  const next: Condition = { ...cond, lastTransitionTime };
  if (index >= 0) list[index] = next;
  else list.push(next);
  return list;
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((cond) => cond.type === type);
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((cond) => cond.type !== type);
}
