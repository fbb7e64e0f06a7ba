import {
  closeSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { PidFile } from './child-processes.ts';
import { type InstancePaths, ownerOf } from './instance-state.ts';

/**
 * A lock on one provisioned instance's directory, between the provisioners of one host (operator
 * replicas, a restarted operator) that share the state directory. It makes "am I the owner?" and
 * what follows from the answer one step: a provisioner taking the instance over writes the
 * `owner` file and ends the processes the pid file records under it, and the owner checks the
 * `owner` file and adopts a just-started process (records its pid) under it, so a takeover can
 * no longer land between that check and that record.
 *
 * It is a file made with O_CREAT|O_EXCL (`wx`) holding the holder's pid and that process's start
 * time (field 22 of /proc/<pid>/stat, which a reused pid does not share). Sections are short and
 * synchronous (no await inside), so a waiter spins with short sleeps, bounded. A lock whose
 * holder is gone (killed while holding it) is stale: it is moved aside by rename, and deleted
 * only if what was moved is the lock judged stale; a lock taken meanwhile by a live holder is
 * linked back.
 */

export class InstanceLockTimeout extends Error {
  constructor(path: string, holder: string, boundMs: number) {
    super(
      `the instance lock ${path} is held by ${holder || 'an unknown process'} for more than ${boundMs} ms`,
    );
    this.name = 'InstanceLockTimeout';
  }
}

/** A lock file still empty after this long lost its maker between creating and writing it. */
const EMPTY_STALE_MS = 1000;
const WAIT = new Int32Array(new SharedArrayBuffer(4));
const pause = (ms: number) => Atomics.wait(WAIT, 0, 0, ms);

/** The start time (clock ticks since boot) of `pid`, or undefined when no such process runs. */
export function startTimeOf(pid: number): string | undefined {
  try {
    // The command's name is in parentheses and may hold spaces: fields count from after ') '.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ');
    return fields?.[19];
  } catch {
    return undefined;
  }
}

/** What this process writes into a lock it holds. */
export function holderToken(): string {
  return `${process.pid} ${startTimeOf(process.pid) ?? ''}`;
}

/** Whether the holder a lock's content names is still the process that wrote it. */
export function holderAlive(content: string): boolean {
  const [pid, started] = content.trim().split(' ');
  if (!pid || !/^\d+$/.test(pid)) return false;
  return started !== undefined && started !== '' && startTimeOf(Number(pid)) === started;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

function tryCreate(path: string, token: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, token);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Moves a stale lock aside; puts back a live one that was taken between the read and the move. */
function breakStale(path: string, judgedStale: string): void {
  const aside = `${path}.stale-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    renameSync(path, aside);
  } catch {
    return; // gone meanwhile: someone else broke or released it
  }
  const moved = readOr(aside, '');
  if (moved !== judgedStale && holderAlive(moved)) {
    try {
      linkSync(aside, path);
    } catch {
      // A third one holds it now too: both are live; the bounded sections keep that rare.
    }
  }
  try {
    unlinkSync(aside);
  } catch {
    // gone
  }
}

/**
 * Runs `section` (synchronous) holding the lock at `path`; waits for it up to `boundMs`, breaking
 * a stale one. The section's result is returned, its exception thrown; the lock is released either way.
 */
export function withInstanceLock<T>(path: string, section: () => T, boundMs = 10_000): T {
  const token = holderToken();
  const deadline = Date.now() + boundMs;
  let emptySince: number | undefined;
  for (;;) {
    if (tryCreate(path, token)) break;
    const holder = readOr(path, '');
    if (holder === token) throw new Error(`the instance lock ${path} is held by this process already`);
    // Empty: made and not written yet, or its maker died in between (stale after a second).
    emptySince = holder === '' ? (emptySince ?? Date.now()) : undefined;
    const stale =
      holder === '' ? Date.now() - (emptySince ?? Date.now()) > EMPTY_STALE_MS : !holderAlive(holder);
    if (stale) {
      breakStale(path, holder);
      continue;
    }
    if (Date.now() > deadline) throw new InstanceLockTimeout(path, holder.trim(), boundMs);
    pause(2);
  }
  try {
    return section();
  } finally {
    try {
      unlinkSync(path);
    } catch {
      // the directory was removed inside the section
    }
  }
}

/**
 * Takes the instance over for provisioner `id`: under its lock, writes `id` to the `owner` file
 * and ends what the pid file records (the previous owner's processes); returns how many it ended.
 * An owner adopting a process does so under the same lock (ComponentSupervisor's `exclusive`),
 * so it either saw this takeover (and ends its process) or recorded the process before it (and
 * it is ended here).
 */
export function takeOverInstance(paths: InstancePaths, id: string): number {
  return withInstanceLock(paths.lockFile, () => {
    writeFileSync(paths.ownerFile, id);
    return new PidFile(paths.pidFile).reapStale();
  });
}

/**
 * Runs `section` under the instance's lock if provisioner `id` owns the instance; else not at all
 * (also when the instance's directory is gone: another provisioner removed it).
 */
export function asInstanceOwner<T>(
  paths: InstancePaths,
  id: string,
  section: () => T,
): { owner: true; result: T } | { owner: false } {
  try {
    return withInstanceLock(paths.lockFile, () =>
      ownerOf(paths) === id ? { owner: true as const, result: section() } : { owner: false as const },
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && ownerOf(paths) === undefined)
      return { owner: false };
    throw err;
  }
}
