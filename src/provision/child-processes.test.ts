import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, test } from 'vitest';
import {
  ControlPlaneStartError,
  logTail,
  ManagedProcess,
  PidFile,
  retryWhenPortTaken,
} from './child-processes.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'processes-test-'));
  dirs.push(d);
  return d;
};
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(safeStatus(pid));
/** Polls until `check` holds (the test's own timeout bounds it). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await sleep(10);
}
const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};
const safeStatus = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return 'State: Z';
  }
};

describe('PidFile', () => {
  test('reaps a process a previous launcher left behind, and only that one', async () => {
    const dir = tempDir();
    const marker = join(dir, 'marker');
    // `sleep` is started through bash so its command line carries our marker.
    const leftover = spawn('bash', ['-c', `exec -a "${marker}" sleep 300`], {
      detached: true,
      stdio: 'ignore',
    });
    const unrelated = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    leftover.unref();
    unrelated.unref();
    // bash has exec'd: the leftover's command line is the marker.
    await until(() => cmdline(leftover.pid!).startsWith(marker));
    const pidFile = new PidFile(join(dir, 'pids.json'));
    pidFile.record([
      { pid: leftover.pid!, command: marker },
      // The pid of somebody else's process under our command name must not be killed.
      { pid: unrelated.pid!, command: marker },
    ]);

    expect(pidFile.reapStale()).toBe(1);
    await until(() => !alive(leftover.pid!));
    expect(alive(unrelated.pid!)).toBe(true);
    process.kill(unrelated.pid!, 'SIGKILL');
    expect(pidFile.reapStale()).toBe(0);
  });
});

describe('ManagedProcess', () => {
  test('stop() ends the whole process group and logTail shows the last lines', async () => {
    const dir = tempDir();
    const logPath = join(dir, 'out.log');
    const childPidFile = join(dir, 'child.pid');
    const proc = await ManagedProcess.start({
      name: 'sh',
      command: '/bin/bash',
      // A child of the process, in its group: stop must end it too, not only bash.
      args: [
        '-c',
        `for i in $(seq 1 100); do echo line-$i; done; sleep 300 & echo $! > ${childPidFile}.tmp; mv ${childPidFile}.tmp ${childPidFile}; wait`,
      ],
      logPath,
    });
    await until(() => existsSync(childPidFile));
    const child = Number(readFileSync(childPidFile, 'utf8'));
    expect(proc.running).toBe(true);
    expect(alive(child)).toBe(true);
    await proc.stop(2_000);
    expect(proc.running).toBe(false);
    await until(() => !alive(child));
    expect(proc.exitDescription).toMatch(/killed by SIGTERM|exited with code/);
    const tail = await logTail(logPath, 3);
    expect(tail.split('\n')).toEqual(['line-98', 'line-99', 'line-100']);
  });
});

describe('retryWhenPortTaken', () => {
  const taken = () =>
    new ControlPlaneStartError(
      'etcd exited (its port is already in use)',
      'bind: address already in use',
      true,
    );

  test('starts again while a port it picked was taken, at most three times', async () => {
    let runs = 0;
    const started = await retryWhenPortTaken(async () => {
      runs += 1;
      if (runs < 3) throw taken();
      return 'running';
    });
    expect([started, runs]).toEqual(['running', 3]);

    runs = 0;
    const always = retryWhenPortTaken(async () => {
      runs += 1;
      throw taken();
    });
    await expect(always).rejects.toMatchObject({ portTaken: true });
    expect(runs).toBe(3);
  });

  test('any other failure ends it at once', async () => {
    let runs = 0;
    const broken = retryWhenPortTaken(async () => {
      runs += 1;
      throw new ControlPlaneStartError(
        'kube-apiserver exited with code 1 before it became ready',
        'flag error',
      );
    });
    await expect(broken).rejects.toMatchObject({ portTaken: false });
    expect(runs).toBe(1);
  });
});
