import { Backoff, type BackoffOptions } from '../runtime/backoff.ts';
import { ManagedProcess, type ProcessSpec } from './child-processes.ts';

/**
 * Keeps one component of a virtual control plane running: when its process ends without being
 * asked to, it is started again after a bounded exponential backoff (a component that crashes at
 * once does not spin; one that ran a while is restarted quickly). It stops restarting when
 * `mayRestart` says no (another provisioner took the instance over) and after `stop`.
 */

const RESTART_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, factor: 2, jitter: 0.2 };
/** A process that ran this long before it ended counts as healthy: the next restart is quick again. */
const HEALTHY_RUN_MS = 60_000;

export interface SupervisorOptions {
  /** Asked before each restart; false ends the supervision. */
  readonly mayRestart: () => boolean;
  /** Told after each start (first or restart), e.g. to record the pid. */
  readonly onStarted: (process: ManagedProcess) => void;
  readonly log: (message: string) => void;
  readonly backoff?: BackoffOptions;
  /** The clock a run's length is measured on (ms; tests set it). */
  readonly now?: () => number;
}

export class ComponentSupervisor {
  private current: ManagedProcess | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private readonly backoff: Backoff;
  private readonly now: () => number;
  /** How many times it was started again after ending on its own. */
  restarts = 0;
  /** How its process last ended on its own, for status messages. */
  lastExit: string | undefined;
  /** Times it ended on its own since it last ran long enough to count as healthy. */
  crashesInARow = 0;

  constructor(
    readonly spec: ProcessSpec,
    private readonly options: SupervisorOptions,
  ) {
    this.backoff = new Backoff(options.backoff ?? RESTART_BACKOFF, Math.random);
    this.now = options.now ?? Date.now;
  }

  /** Starts the process (first start: a failure is the caller's). */
  async start(): Promise<ManagedProcess> {
    const process = await ManagedProcess.start(this.spec);
    this.adopt(process);
    return process;
  }

  get process(): ManagedProcess | undefined {
    return this.current;
  }

  get running(): boolean {
    return this.current?.running ?? false;
  }

  private adopt(process: ManagedProcess): void {
    this.current = process;
    this.startedAt = this.now();
    this.options.onStarted(process);
    void process.whenExited().then(() => {
      if (this.stopped || this.current !== process) return;
      this.lastExit = process.exitDescription;
      if (this.now() - this.startedAt >= HEALTHY_RUN_MS) {
        this.backoff.reset();
        this.crashesInARow = 0;
      }
      this.crashesInARow++;
      const delay = this.backoff.next();
      this.options.log(`${this.spec.name} ${this.lastExit}; starting it again in ${Math.round(delay)} ms`);
      this.timer = setTimeout(() => void this.restart(), delay);
    });
  }

  private async restart(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    if (!this.options.mayRestart()) {
      this.options.log(`${this.spec.name}: another provisioner supervises this instance now; not restarting`);
      this.stopped = true;
      return;
    }
    try {
      const process = await ManagedProcess.start(this.spec);
      if (this.stopped) {
        await process.stop();
        return;
      }
      this.restarts++;
      this.adopt(process);
    } catch (err) {
      this.crashesInARow++;
      const delay = this.backoff.next();
      this.options.log(
        `${this.spec.name} could not be started again (${String(err)}); next try in ${delay} ms`,
      );
      this.timer = setTimeout(() => void this.restart(), delay);
    }
  }

  /** Ends the process and the supervision. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.current?.stop();
  }
}
