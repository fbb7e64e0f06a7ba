import { totalmem } from 'node:os';

/**
 * One memory budget for every sandbox isolate of a process. Each live isolate holds a reservation
 * of its heap limit (what it may grow to, not what it uses now) from the moment it is built until
 * it is disposed or dies. A sandbox that cannot reserve its limit is refused
 * (`SandboxMemoryBudgetExceeded`) instead of an isolate being built that could take the process
 * past its memory: the syncers of other virtual clusters keep running, and the refused one reports
 * the refusal on its objects (Event, `Syncing` condition) and retries with backoff.
 *
 * The reservation does not cover what an isolate needs outside its V8 heap (a few MiB each for
 * the isolate itself, its thread and compiled code); the default leaves room for that.
 */
export class SandboxMemoryBudget {
  private reserved = 0;

  constructor(readonly limitMiB: number) {}

  /** Reserves `mib`; false (nothing reserved) when that would exceed the budget. */
  tryReserve(mib: number): boolean {
    if (this.reserved + mib > this.limitMiB) return false;
    this.reserved += mib;
    return true;
  }

  release(mib: number): void {
    this.reserved = Math.max(0, this.reserved - mib);
  }

  get reservedMiB(): number {
    return this.reserved;
  }
}

/** A quarter of the machine's memory, at most 1 GiB: 32 isolates at the default 32 MiB heap. */
export function defaultSandboxMemoryBudgetMiB(totalBytes = totalmem()): number {
  return Math.max(64, Math.min(1024, Math.floor(totalBytes / 4 / 1024 / 1024)));
}

/** The environment variable that sets the process's budget (MiB), for a container's memory limit. */
export const MEMORY_BUDGET_ENV = 'PLATFORM_SANDBOX_MEMORY_BUDGET_MIB';

/** The budget from the environment when it holds a positive number, else the default. */
export function processBudgetMiB(env: NodeJS.ProcessEnv = process.env, totalBytes = totalmem()): number {
  const configured = Number(env[MEMORY_BUDGET_ENV]);
  return Number.isFinite(configured) && configured > 0
    ? configured
    : defaultSandboxMemoryBudgetMiB(totalBytes);
}

/** The budget every sandbox of this process shares unless it is given another one. */
export const processSandboxMemoryBudget = new SandboxMemoryBudget(processBudgetMiB());
