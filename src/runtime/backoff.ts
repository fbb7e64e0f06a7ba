import { jitter, type Random } from './clock.ts';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  factor: number;
  /** Adds up to `jitter * delay` at random (client-go's wait.Jitter). */
  jitter: number;
}

/** client-go's reflector defaults: 800 ms doubling to 30 s, with full jitter. */
export const defaultReflectorBackoff: BackoffOptions = {
  initialMs: 800,
  maxMs: 30_000,
  factor: 2,
  jitter: 1,
};

/** Exponential backoff for reconnect loops. `reset()` after a success. */
export class Backoff {
  private attempts = 0;

  constructor(
    private readonly options: BackoffOptions,
    private readonly random: Random,
  ) {}

  next(): number {
    const base = Math.min(this.options.maxMs, this.options.initialMs * this.options.factor ** this.attempts);
    this.attempts++;
    return Math.min(this.options.maxMs, jitter(base, this.options.jitter, this.random));
  }

  reset(): void {
    this.attempts = 0;
  }
}
