import { readFileSync } from 'node:fs';
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

/** Reads a file's text; undefined when it cannot be read (absent, no permission). */
export type ReadText = (path: string) => string | undefined;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * cgroup v1 says "no limit" with the largest page-aligned 64-bit number (9223372036854771712);
 * v2 with `max`. Anything this large is no limit.
 */
const NO_LIMIT_BYTES = 2 ** 62;

/** `/a/b/c` and its ancestors, deepest first, ending with `` (the mount point itself). */
function selfAndAncestors(path: string): string[] {
  const parts = path.split('/').filter(Boolean);
  return parts.map((_, i) => `/${parts.slice(0, parts.length - i).join('/')}`).concat('');
}

/**
 * The memory limit of the cgroup this process runs in (a container's `resources.limits.memory`),
 * in bytes; undefined when there is none. cgroup v2 (`memory.max`) and v1
 * (`memory.limit_in_bytes`), for the process's own cgroup as `/proc/self/cgroup` names it and each
 * of its ancestors (a parent's limit holds for its children too), as well as the mount point
 * itself (where a container sees its own cgroup, whatever `/proc/self/cgroup` says): the
 * smallest limit found.
 */
export function cgroupMemoryLimitBytes(read: ReadText = readText): number | undefined {
  const v2: string[] = ['/'];
  const v1: string[] = ['/'];
  for (const line of (read('/proc/self/cgroup') ?? '').split('\n')) {
    const match = /^\d+:([^:]*):(\/.*)$/.exec(line.trim());
    if (!match) continue;
    const [, controllers, path] = match as unknown as [string, string, string];
    if (controllers === '') v2.push(path);
    else if (controllers.split(',').includes('memory')) v1.push(path);
  }
  const files = new Set([
    ...v2.flatMap((path) => selfAndAncestors(path).map((p) => `/sys/fs/cgroup${p}/memory.max`)),
    ...v1.flatMap((path) =>
      selfAndAncestors(path).map((p) => `/sys/fs/cgroup/memory${p}/memory.limit_in_bytes`),
    ),
  ]);
  let limit: number | undefined;
  for (const file of files) {
    const text = read(file)?.trim();
    if (text === undefined || !/^\d+$/.test(text)) continue; // absent, or `max`
    const bytes = Number(text);
    if (bytes > 0 && bytes < NO_LIMIT_BYTES) limit = Math.min(limit ?? bytes, bytes);
  }
  return limit;
}

/** The memory this process may use: the machine's, or its cgroup's limit when that is smaller. */
export function processMemoryBytes(options: { totalBytes?: number; read?: ReadText } = {}): number {
  const total = options.totalBytes ?? totalmem();
  const limit = cgroupMemoryLimitBytes(options.read);
  return limit === undefined ? total : Math.min(total, limit);
}

/**
 * A quarter of the memory this process may use (the machine's, or its container's limit when
 * smaller), between 64 MiB and 1 GiB: 32 isolates at the default 32 MiB heap at most; 8 under the
 * chart's controller limit of 1 GiB.
 */
export function defaultSandboxMemoryBudgetMiB(memoryBytes = processMemoryBytes()): number {
  return Math.max(64, Math.min(1024, Math.floor(memoryBytes / 4 / 1024 / 1024)));
}

/** The environment variable that sets the process's budget (MiB), overriding the default. */
export const MEMORY_BUDGET_ENV = 'PLATFORM_SANDBOX_MEMORY_BUDGET_MIB';

/** The budget from the environment when it holds a positive number, else the default. */
export function processBudgetMiB(
  env: NodeJS.ProcessEnv = process.env,
  memoryBytes = processMemoryBytes(),
): number {
  const configured = Number(env[MEMORY_BUDGET_ENV]);
  return Number.isFinite(configured) && configured > 0
    ? configured
    : defaultSandboxMemoryBudgetMiB(memoryBytes);
}

/** The budget every sandbox of this process shares unless it is given another one. */
export const processSandboxMemoryBudget = new SandboxMemoryBudget(processBudgetMiB());
