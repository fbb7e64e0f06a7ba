import { Backoff, type BackoffOptions } from '../runtime/backoff.ts';
import { ManagedProcess, type ProcessSpec } from './child-processes.ts';

/**
 * Keeps one component of a virtual control plane running: when its process ends without being
 * asked to, it is started again after a bounded exponential backoff (a component that crashes at
 * once does not spin; one that ran a while is restarted quickly). It stops when `mayRun` says no
 * (another provisioner took the instance over) and after `stop`.
 *
 * `mayRun` is asked before every start (the first, and each restart) and again once the process
 * is up, before `onStarted`: a provisioner that lost the instance while it was starting a
 * component (spawning takes a while, and so does waiting for the component before) starts
 * nothing more, ends what it just started, and never records it as the instance's.
 */

const RESTART_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, factor: 2, jitter: 0.2 };
/** A process that ran this long before it ended counts as healthy: the next restart is quick again. */
const HEALTHY_RUN_MS = 60_000;

export interface SupervisorOptions {
  /** Asked before each start and again once its process is up; false ends the supervision (and that process). */
  readonly mayRun: () => boolean;
  /** Told after each start (first or restart) that `mayRun` allowed, e.g. to record the pid. */
  readonly onStarted: (process: ManagedProcess) => void;
  readonly log: (message: string) => void;
  readonly backoff?: BackoffOptions;
  /**
   * Runs the question asked once a process is up together with its adoption (`onStarted`) as one
   * step no takeover can land inside (processes.ts: under the instance's lock). Synchronous.
   */
  readonly exclusive?: <T>(section: () => T) => T;
  /** The clock a run's length is measured on (ms; tests set it). */
  readonly now?: () => number;
}

/** The instance is another provisioner's now: this supervisor started nothing that still runs. */
export class SupervisionLost extends Error {
  constructor(component: string) {
    super(`${component}: another provisioner supervises this instance now; not started`);
    this.name = 'SupervisionLost';
  }
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

  /**
   * Starts the process (first start: a failure is the caller's). Throws `SupervisionLost`, with
   * nothing left running, when `mayRun` says no before or once the process is up.
   */
  async start(): Promise<ManagedProcess> {
    if (!this.options.mayRun()) {
      this.stopped = true;
      throw new SupervisionLost(this.spec.name);
    }
    const process = await ManagedProcess.start(this.spec);
    if (!(await this.adoptOrEnd(process, 'first'))) {
      this.stopped = true;
      throw new SupervisionLost(this.spec.name);
    }
    return process;
  }

  get process(): ManagedProcess | undefined {
    return this.current;
  }

  get running(): boolean {
    return this.current?.running ?? false;
  }

  /**
   * Asks `mayRun` and, allowed, adopts the process (counted when a restart), as one step
   * (`exclusive`); a process not adopted (refused, or the step threw) is ended.
   */
  private async adoptOrEnd(process: ManagedProcess, start: 'first' | 'restart'): Promise<boolean> {
    const exclusive = this.options.exclusive ?? ((section) => section());
    let adopted = false;
    try {
      adopted = exclusive(() => {
        if (this.stopped || !this.options.mayRun()) return false;
        if (start === 'restart') this.restarts++;
        this.adopt(process);
        return true;
      });
    } finally {
      if (!adopted) await process.stop();
    }
    return adopted;
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
    const lost = () => {
      this.options.log(`${this.spec.name}: another provisioner supervises this instance now; not restarting`);
      this.stopped = true;
    };
    if (!this.options.mayRun()) return lost();
    try {
      const process = await ManagedProcess.start(this.spec);
      const wasStopped = this.stopped;
      if (!(await this.adoptOrEnd(process, 'restart')) && !wasStopped) lost();
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
