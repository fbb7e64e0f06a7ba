import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, test } from 'vitest';
import {
  asInstanceOwner,
  holderAlive,
  holderToken,
  InstanceLockTimeout,
  startTimeOf,
  takeOverInstance,
  withInstanceLock,
} from './instance-lock.ts';
import { instancePaths } from './instance-state.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const lockPath = () => {
  const dir = mkdtempSync(join(tmpdir(), 'instance-lock-'));
  dirs.push(dir);
  return join(dir, 'owner.lock');
};

/** The pid of a process that ran and has ended (and was reaped). */
const endedPid = () => spawnSync('/bin/true').pid;

describe('withInstanceLock', () => {
  test('runs the section holding the lock (this process named in it) and releases it, also when it throws', () => {
    const path = lockPath();
    const seen = withInstanceLock(path, () => readFileSync(path, 'utf8'));
    expect(seen).toBe(holderToken());
    expect(seen).toBe(`${process.pid} ${startTimeOf(process.pid)}`);
    expect(existsSync(path)).toBe(false);
    expect(() =>
      withInstanceLock(path, () => {
        throw new Error('inside');
      }),
    ).toThrow('inside');
    expect(existsSync(path)).toBe(false);
  });

  test('waits for a live holder, bounded: InstanceLockTimeout naming it; the holder keeps its lock', () => {
    const path = lockPath();
    const parent = `${process.ppid} ${startTimeOf(process.ppid)}`;
    expect(holderAlive(parent)).toBe(true);
    writeFileSync(path, parent);
    let ran = false;
    expect(() =>
      withInstanceLock(
        path,
        () => {
          ran = true;
        },
        50,
      ),
    ).toThrow(InstanceLockTimeout);
    expect(ran).toBe(false);
    expect(readFileSync(path, 'utf8')).toBe(parent);
  });

  test('waits while another holder has it and enters once it is released, never before', async () => {
    const path = lockPath();
    const parent = `${process.ppid} ${startTimeOf(process.ppid)}`;
    writeFileSync(path, parent);
    // A holder on another thread (this process's own sections never overlap): it marks that it
    // let go, then removes its lock, while this thread is waiting in withInstanceLock.
    const released = new Int32Array(new SharedArrayBuffer(4));
    const holder = new Worker(
      `const { workerData } = require('node:worker_threads');
       const { unlinkSync } = require('node:fs');
       const flag = new Int32Array(workerData.released);
       Atomics.wait(flag, 0, 0, 200);
       Atomics.store(flag, 0, 1);
       unlinkSync(workerData.path);`,
      { eval: true, workerData: { path, released: released.buffer } },
    );
    const exited = new Promise((resolve) => holder.once('exit', resolve));
    const seen = withInstanceLock(path, () => Atomics.load(released, 0));
    await exited;
    expect(seen).toBe(1);
    expect(existsSync(path)).toBe(false);
  });

  test('breaks a stale lock: its holder ended, or its pid now belongs to a process started at another time', () => {
    const path = lockPath();
    for (const stale of [`${endedPid()} 12345`, `${process.ppid} 1`, 'garbage']) {
      expect(holderAlive(stale)).toBe(false);
      writeFileSync(path, stale);
      expect(withInstanceLock(path, () => readFileSync(path, 'utf8'), 5_000)).toBe(holderToken());
      expect(existsSync(path)).toBe(false);
    }
  });

  test('a section of this process inside another is refused (sections are synchronous, never nested)', () => {
    const path = lockPath();
    expect(() => withInstanceLock(path, () => withInstanceLock(path, () => 1))).toThrow(
      'held by this process already',
    );
    expect(existsSync(path)).toBe(false);
  });
});

describe('asInstanceOwner', () => {
  const pathsIn = (root: string) => instancePaths(root, { namespace: 'p', name: 'vc' });

  test('runs the section only for the owner; an instance whose directory is gone has none', () => {
    const root = mkdtempSync(join(tmpdir(), 'instance-owner-'));
    dirs.push(root);
    const paths = pathsIn(root);
    mkdirSync(paths.root, { recursive: true });
    expect(takeOverInstance(paths, 'a')).toBe(0);
    expect(asInstanceOwner(paths, 'a', () => 'done')).toEqual({ owner: true, result: 'done' });
    expect(asInstanceOwner(paths, 'b', () => 'done')).toEqual({ owner: false });
    rmSync(paths.root, { recursive: true });
    expect(asInstanceOwner(paths, 'a', () => 'done')).toEqual({ owner: false });
  });
});
