import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';

/**
 * Child processes of the launcher. Three layers make sure none outlives us:
 * - each child runs in its own process group, so stopping it also stops anything it forked;
 * - each child is started through `setpriv --pdeathsig KILL`, so the kernel kills it when we die,
 *   even by SIGKILL, when no exit handler of ours can run;
 * - a pid file records every child, and the next start kills any that are somehow still alive.
 */

const SETPRIV = '/usr/bin/setpriv';
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pgid of liveGroups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/** The last `lines` lines of a log file, for error messages. */
export async function logTail(path: string, lines = 40): Promise<string> {
  try {
    const handle = await open(path, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size, 64 * 1024);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, size - length);
      return buffer
        .toString('utf8')
        .split('\n')
        .slice(-lines - 1)
        .join('\n')
        .trimEnd();
    } finally {
      await handle.close();
    }
  } catch {
    return '(no log written)';
  }
}

export interface ProcessSpec {
  /** A short name for messages, e.g. `kube-apiserver[host]`. */
  name: string;
  command: string;
  args: string[];
  logPath: string;
  env?: NodeJS.ProcessEnv;
}

export class ManagedProcess {
  readonly name: string;
  readonly logPath: string;
  readonly pid: number;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;

  private constructor(spec: ProcessSpec, child: ChildProcess) {
    this.name = spec.name;
    this.logPath = spec.logPath;
    if (child.pid === undefined) throw new Error(`${spec.name}: process did not start`);
    this.pid = child.pid;
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        liveGroups.delete(this.pid);
        resolve();
      });
    });
  }

  static async start(spec: ProcessSpec): Promise<ManagedProcess> {
    if (!existsSync(spec.command)) {
      throw new ControlPlaneStartError(`${spec.name}: binary not found at ${spec.command}`, '');
    }
    installExitHook();
    const log = openSync(spec.logPath, 'a');
    try {
      const useSetpriv = existsSync(SETPRIV);
      const command = useSetpriv ? SETPRIV : spec.command;
      const args = useSetpriv ? ['--pdeathsig', 'KILL', '--', spec.command, ...spec.args] : spec.args;
      const child = spawn(command, args, {
        detached: true, // own process group
        stdio: ['ignore', log, log],
        env: spec.env ?? process.env,
      });
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
      const managed = new ManagedProcess(spec, child);
      liveGroups.add(managed.pid);
      // Detached children would otherwise keep our event loop alive.
      child.unref();
      return managed;
    } finally {
      closeSync(log);
    }
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** How the process ended, for messages; undefined while running. */
  get exitDescription(): string | undefined {
    if (!this.exitInfo) return undefined;
    return this.exitInfo.signal
      ? `was killed by ${this.exitInfo.signal}`
      : `exited with code ${this.exitInfo.code}`;
  }

  /** Resolves when the process has exited. */
  whenExited(): Promise<void> {
    return this.exited;
  }

  /** SIGTERM to the whole group, then SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    signalGroup(this.pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(this.pid, 'SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    // The leader may be gone while something it forked lingers in the group.
    signalGroup(this.pid, 'SIGKILL');
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // group already gone
  }
}

/** Raised when a component cannot start; `logTail` holds the end of its log. */
export class ControlPlaneStartError extends Error {
  override readonly name = 'ControlPlaneStartError';
  constructor(
    message: string,
    readonly logTail: string,
    /** The process could not bind a port it was given: another process took it after `freePort` found it free. */
    readonly portTaken = false,
  ) {
    super(logTail ? `${message}\n--- last lines of the log ---\n${logTail}` : message);
  }
}

/**
 * Runs `start` again, picking its ports anew, when a port it picked was taken before its process
 * bound it (`freePort` can only say a port is free now: on a busy machine an outgoing connection
 * may get it as its ephemeral port a moment later). At most `attempts` runs.
 */
export async function retryWhenPortTaken<T>(start: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof ControlPlaneStartError && err.portTaken) || attempt >= attempts) throw err;
    }
  }
}

interface PidRecord {
  pid: number;
  command: string;
}

/**
 * Records the children of one launcher in `<stateDir>/pids.json`. `reapStale` kills the
 * processes a previous launcher left behind (the check of /proc/<pid>/cmdline guards against
 * a recycled pid belonging to somebody else).
 */
export class PidFile {
  constructor(private readonly path: string) {}

  record(processes: { pid: number; command: string }[]): void {
    writeFileSync(this.path, JSON.stringify(processes satisfies PidRecord[], null, 2));
  }

  reapStale(): number {
    if (!existsSync(this.path)) return 0;
    let records: PidRecord[];
    try {
      records = JSON.parse(readFileSync(this.path, 'utf8')) as PidRecord[];
    } catch {
      return 0;
    }
    let killed = 0;
    for (const { pid, command } of records) {
      let cmdline: string;
      try {
        cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue; // not running
      }
      // Empty: exec'd a moment ago (the kernel fills it in after the exec pipe libuv waits on closes).
      if (cmdline !== '' && !cmdline.includes(command)) continue;
      signalGroup(pid, 'SIGKILL');
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
      killed++;
    }
    writeFileSync(this.path, '[]');
    return killed;
  }
}
