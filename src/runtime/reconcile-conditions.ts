import { type Condition, type ConditionInput, removeCondition, setCondition } from './conditions.ts';
import { errorMessage, errorReason, TerminalError } from './errors.ts';

/** The condition types the scaffold owns (kstatus reads Reconciling and Stalled; everyone reads Ready). */
export const READY = 'Ready';
export const RECONCILING = 'Reconciling';
export const STALLED = 'Stalled';
/** Reconciling's reason while a failed reconcile waits for its retry (Flux's word for it). */
export const PROGRESSING_WITH_RETRY = 'ProgressingWithRetry';

/** A condition for the outcome, before generation and transition time are stamped. */
export type ConditionState = Pick<ConditionInput, 'status' | 'reason' | 'message'>;

/** What an outcome says of the conditions: `Ready`, whether work is outstanding, the controller's own. */
export interface OutcomeConditions {
  /** Ready: True when converged, False (or Unknown) for a settled state that is not ready (a disabled key). */
  ready: ConditionState;
  /** Work still outstanding (waiting for something to finish): Reconciling=True with this reason. */
  reconciling?: Omit<ConditionState, 'status'>;
  /** Conditions of the controller's own besides Ready (for example `Syncing`), set as given. */
  conditions?: Array<Omit<ConditionInput, 'observedGeneration'>>;
  /** Condition types of the controller's own to remove. */
  removeConditions?: string[];
}

/**
 * The conditions after a reconcile that converged (pure): `Ready` as the outcome says, the
 * controller's own conditions, `Reconciling` only while work is outstanding, no `Stalled`.
 * Every condition written carries `generation`; transition times move only when a status flips.
 */
export function convergedConditions(
  conditions: readonly Condition[],
  outcome: OutcomeConditions,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const stamp = stamper(generation, now);
  let next = ownConditions(removeCondition(conditions, STALLED), outcome, generation, now);
  next = stamp(next, { type: READY, ...outcome.ready });
  return outcome.reconciling
    ? stamp(next, { type: RECONCILING, status: 'True', ...outcome.reconciling })
    : removeCondition(next, RECONCILING);
}

/**
 * The conditions after a reconcile that failed (pure): `Ready=False` with the error's class as
 * reason; a `TerminalError` sets `Stalled=True` (and clears `Reconciling`), any other error sets
 * `Reconciling=True` (`ProgressingWithRetry`: a retry is due) and clears `Stalled`.
 */
export function failedConditions(
  conditions: readonly Condition[],
  err: unknown,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const stamp = stamper(generation, now);
  const reason = errorReason(err);
  const message = errorMessage(err);
  const next = stamp(conditions, { type: READY, status: 'False', reason, message });
  return err instanceof TerminalError
    ? stamp(removeCondition(next, RECONCILING), { type: STALLED, status: 'True', reason, message })
    : stamp(removeCondition(next, STALLED), {
        type: RECONCILING,
        status: 'True',
        reason: PROGRESSING_WITH_RETRY,
        message: `retrying after: ${message}`,
      });
}

/**
 * The conditions after a reconcile whose outcome stalled (pure): the controller's own conditions
 * as the outcome says, then {@link failedConditions} with its `TerminalError`.
 */
export function stalledConditions(
  conditions: readonly Condition[],
  outcome: Pick<OutcomeConditions, 'conditions' | 'removeConditions'> & { stalled: TerminalError },
  generation: number | undefined,
  now: Date,
): Condition[] {
  return failedConditions(
    ownConditions(conditions, outcome, generation, now),
    outcome.stalled,
    generation,
    now,
  );
}

/** The controller's own conditions set and removed as an outcome says. */
function ownConditions(
  conditions: readonly Condition[],
  outcome: Pick<OutcomeConditions, 'conditions' | 'removeConditions'>,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const stamp = stamper(generation, now);
  let next = [...conditions];
  for (const type of outcome.removeConditions ?? []) next = removeCondition(next, type);
  for (const condition of outcome.conditions ?? []) next = stamp(next, condition);
  return next;
}

function stamper(generation: number | undefined, now: Date) {
  return (conditions: readonly Condition[], state: Omit<ConditionInput, 'observedGeneration'>) =>
    setCondition(
      conditions,
      { ...state, ...(generation !== undefined ? { observedGeneration: generation } : {}) },
      now,
    );
}
