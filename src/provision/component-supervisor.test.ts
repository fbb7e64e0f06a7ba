import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ComponentSupervisor, SupervisionLost, type SupervisorOptions } from './component-supervisor.ts';

const dirs: string[] = [];
const supervisors: ComponentSupervisor[] = [];
/** Children this process had before the test (another file's, in a reused worker): not the test's. */
let before = new Set<number>();
beforeEach(() => {
  before = new Set(childPids());
});
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/**
 * The pids of this test process's live (not zombie) children that it did not have before the
 * test: the processes a supervisor spawned and has not reaped. By parent, not by command line:
 * a child's parent is set when it is forked, while its /proc cmdline can still be empty for a
 * moment after `spawn` resolved (the kernel closes the exec pipe libuv waits on before it sets up
 * the new program's arguments).
 */
function pidsRunning(): number[] {
  return childPids().filter((pid) => !before.has(pid));
}

function childPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [state, parent] = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ');
      if (Number(parent) === process.pid && state !== 'Z') pids.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * `mayRun` as two provisioners over one owner file see it: this one's for the first `allowed`
 * questions, then the other's (it took the instance over); each question asked with the pids of
 * this process's children running at that moment.
 */
function takenOverAfter(allowed: number) {
  const seen: number[][] = [];
  return {
    seen,
    mayRun: () => {
      seen.push(pidsRunning());
      return seen.length <= allowed;
    },
  };
}

function supervisor(command: string, args: string[], options: Partial<SupervisorOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'supervisor-test-'));
  dirs.push(dir);
  const logs: string[] = [];
  const started: number[] = [];
  const s = new ComponentSupervisor(
    { name: 'component', command, args, logPath: join(dir, 'component.log') },
    {
      mayRun: () => true,
      onStarted: (p) => started.push(p.pid),
      log: (m) => logs.push(m),
      backoff: { initialMs: 10, maxMs: 40, factor: 2, jitter: 0 },
      ...options,
    },
  );
  supervisors.push(s);
  return { s, logs, started };
}

describe('ComponentSupervisor', () => {
  test('starts a killed process again and counts it', async () => {
    const { s, started } = supervisor('/bin/sleep', ['300']);
    const first = await s.start();
    process.kill(first.pid, 'SIGKILL');
    await until(() => started.length === 2 && s.running);
    expect(s.process?.pid).not.toBe(first.pid);
    expect(s.restarts).toBe(1);
    expect(s.crashesInARow).toBe(1);
    expect(s.lastExit).toBe('was killed by SIGKILL');
  });

  test('backs off, doubling up to its bound, while the process keeps failing', async () => {
    const { s, logs } = supervisor('/bin/false', []);
    await s.start();
    await until(() => logs.length >= 5);
    await s.stop();
    const delays = logs.slice(0, 5).map((m) => Number(/again in (\d+) ms/.exec(m)?.[1]));
    expect(delays).toEqual([10, 20, 40, 40, 40]);
    expect(s.crashesInARow).toBeGreaterThanOrEqual(5);
  });

  test('a component that ran a healthy minute before it ended counts its crashes, and backs off, from the start again', async () => {
    let now = 0;
    const { s, logs, started } = supervisor('/bin/sleep', ['300'], { now: () => now });
    const killAndAwaitRestart = async () => {
      const before = started.length;
      process.kill(s.process!.pid, 'SIGKILL');
      await until(() => started.length === before + 1 && s.running);
    };
    await s.start();
    await killAndAwaitRestart();
    await killAndAwaitRestart();
    expect(s.crashesInARow).toBe(2);
    now += 60_000;
    await killAndAwaitRestart();
    expect(s.crashesInARow).toBe(1);
    const delays = logs.map((m) => Number(/again in (\d+) ms/.exec(m)?.[1]));
    expect(delays).toEqual([10, 20, 10]);
  });

  test('does not restart once another supervisor owns the component', async () => {
    let mine = true;
    const { s, logs, started } = supervisor('/bin/sleep', ['300'], { mayRun: () => mine });
    const first = await s.start();
    mine = false;
    process.kill(first.pid, 'SIGKILL');
    await until(() => logs.some((m) => m.includes('not restarting')));
    expect(s.running).toBe(false);
    expect(started).toEqual([first.pid]);
  });

  test('starts nothing once another provisioner owns the instance', async () => {
    const owner = takenOverAfter(0);
    const { s, started } = supervisor('/bin/sleep', ['300'], { mayRun: owner.mayRun });
    await expect(s.start()).rejects.toBeInstanceOf(SupervisionLost);
    expect(owner.seen).toEqual([[]]);
    expect(pidsRunning()).toEqual([]);
    expect(started).toEqual([]);
    expect(s.running).toBe(false);
  });

  test('ends, and never reports, a process whose instance was taken over while it was being started', async () => {
    const owner = takenOverAfter(1);
    const { s, started } = supervisor('/bin/sleep', ['300'], { mayRun: owner.mayRun });
    await expect(s.start()).rejects.toBeInstanceOf(SupervisionLost);
    // Asked before the spawn (nothing ran) and once the process was up (it ran): now it does not.
    expect(owner.seen).toHaveLength(2);
    expect(owner.seen[0]).toEqual([]);
    const spawned = owner.seen[1]!;
    expect(spawned).toHaveLength(1);
    expect(alive(spawned[0]!)).toBe(false);
    expect(started).toEqual([]);
    expect(s.running).toBe(false);
  });

  test('ends, and never reports, a restarted process whose instance was taken over while it was being started', async () => {
    // Two questions for the first start, one before the restart's spawn; the fourth is the other's.
    const owner = takenOverAfter(3);
    const { s, logs, started } = supervisor('/bin/sleep', ['300'], { mayRun: owner.mayRun });
    const first = await s.start();
    process.kill(first.pid, 'SIGKILL');
    await until(() => logs.some((m) => m.includes('not restarting')));
    const told = `questions: ${JSON.stringify(owner.seen)}; log: ${logs.join('; ')}`;
    expect(owner.seen, told).toHaveLength(4);
    const respawned = owner.seen[3]!;
    expect(respawned, told).toHaveLength(1);
    expect(respawned[0]).not.toBe(first.pid);
    await until(() => !alive(respawned[0]!));
    expect(started).toEqual([first.pid]);
    expect(s.running).toBe(false);
    expect(s.restarts).toBe(0);
  });

  test('the check once a process is up and its adoption are one exclusive step: a takeover before it ends the process, one after it finds the pid recorded', async () => {
    // The pre-spawn question is asked outside the step (nothing follows it that a takeover could
    // undo); the takeover lands before the step: inside it, the instance is another's.
    let mine = true;
    const takenFirst = supervisor('/bin/sleep', ['300'], {
      mayRun: () => mine,
      exclusive: (section) => {
        mine = false;
        return section();
      },
    });
    await expect(takenFirst.s.start()).rejects.toBeInstanceOf(SupervisionLost);
    expect(takenFirst.started).toEqual([]);
    expect(pidsRunning()).toEqual([]);

    // A takeover after the step: the pid was recorded (onStarted) inside it, for the taker to end.
    const order: string[] = [];
    const { s } = supervisor('/bin/sleep', ['300'], {
      exclusive: (section) => {
        order.push('enter');
        const result = section();
        order.push('leave');
        return result;
      },
      onStarted: (p) => order.push(`recorded ${p.pid}`),
    });
    const process = await s.start();
    expect(order).toEqual(['enter', `recorded ${process.pid}`, 'leave']);
  });

  test('stop ends the process and the supervision', async () => {
    const { s, logs } = supervisor('/bin/sleep', ['300']);
    const first = await s.start();
    await s.stop();
    expect(first.running).toBe(false);
    expect(s.running).toBe(false);
    expect(logs).toEqual([]);
  });
});
