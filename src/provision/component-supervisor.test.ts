import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { ComponentSupervisor, type SupervisorOptions } from './component-supervisor.ts';

const dirs: string[] = [];
const supervisors: ComponentSupervisor[] = [];
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
}

function supervisor(command: string, args: string[], options: Partial<SupervisorOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'supervisor-test-'));
  dirs.push(dir);
  const logs: string[] = [];
  const started: number[] = [];
  const s = new ComponentSupervisor(
    { name: 'component', command, args, logPath: join(dir, 'component.log') },
    {
      mayRestart: () => true,
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
    const { s, logs, started } = supervisor('/bin/sleep', ['300'], { mayRestart: () => mine });
    const first = await s.start();
    mine = false;
    process.kill(first.pid, 'SIGKILL');
    await until(() => logs.some((m) => m.includes('not restarting')));
    expect(s.running).toBe(false);
    expect(started).toEqual([first.pid]);
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
