import type { ComponentName } from './control-plane.ts';
import type { ProvisionPhase } from './provisioner.ts';

/**
 * What a running instance's status says, from what was seen of each component (pure): Ready when
 * every one answers its probe; Failed when one keeps ending on its own (its supervisor keeps
 * starting it, so it may still recover); else Starting, saying which are not ready yet.
 */

export interface ComponentObservation {
  readonly name: ComponentName;
  readonly running: boolean;
  readonly ready: boolean;
  /** Times it ended on its own since it last ran long enough to count as healthy. */
  readonly crashesInARow: number;
  readonly lastExit?: string | undefined;
  readonly logPath: string;
}

/** This many ends in a row without a healthy run make the instance Failed. */
export const FAILED_AFTER_CRASHES = 3;

export function phaseOf(observed: readonly ComponentObservation[]): {
  phase: Extract<ProvisionPhase, 'Ready' | 'Starting' | 'Failed'>;
  message?: string;
} {
  const failing = observed.filter((c) => !c.ready && c.crashesInARow >= FAILED_AFTER_CRASHES);
  if (failing.length > 0) {
    const why = failing.map(
      (c) =>
        `${c.name} ended ${c.crashesInARow} times in a row (last ${c.lastExit ?? 'unknown'}; log ${c.logPath})`,
    );
    return { phase: 'Failed', message: why.join('; ') };
  }
  const notReady = observed
    .filter((c) => !c.ready)
    .map((c) =>
      c.running ? `${c.name} is not ready` : `${c.name} is not running (${c.lastExit ?? 'not started'})`,
    );
  return notReady.length === 0 ? { phase: 'Ready' } : { phase: 'Starting', message: notReady.join('; ') };
}
