import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { ControlPlane, freePort } from '../../src/dev/controlplane.ts';
import { ControlPlaneStartError } from '../../src/provision/child-processes.ts';

/** Processes whose command line mentions `marker` (every component's flags name its state dir). */
function processesMentioning(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

async function noneLeft(marker: string): Promise<number[]> {
  for (let i = 0; i < 60 && processesMentioning(marker).length > 0; i++) await sleep(250);
  return processesMentioning(marker);
}

describe('launcher failure paths', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const stateDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'platform-launcher-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };
  const sharedEtcd = async (dir: string, readyTimeoutMs?: number) => {
    const plane = await ControlPlane.start({
      stateDir: dir,
      binary: inject('controlPlaneBinary'),
      etcdUrl: inject('etcdUrl'),
      ...(readyTimeoutMs ? { readyTimeoutMs } : {}),
    });
    cleanups.push(() => plane.stop());
    return plane;
  };

  test('a missing binary is named in a clear error and nothing starts', async () => {
    const dir = stateDir();
    const missing = join(dir, 'no-such-controlplane');
    const error = await ControlPlane.start({ stateDir: dir, binary: missing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ControlPlaneStartError);
    expect((error as Error).message).toContain(`binary not found at ${missing}`);
    expect(await noneLeft(dir)).toEqual([]);
  });

  test('a port in use fails with the port named and the apiserver log tail', async () => {
    const dir = stateDir();
    const plane = await sharedEtcd(dir);
    const port = await freePort();
    // Something else owns the port; it drops whatever connects (our readiness probe included).
    const blocker: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

    const error = await plane.startCluster({ name: 'busy', port }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ControlPlaneStartError);
    expect((error as Error).message).toMatch(
      /kube-apiserver "busy" exited with code \d+ before it became ready \(its port is already in use\)/,
    );
    expect((error as ControlPlaneStartError).logTail).toContain(`127.0.0.1:${port}`);
    expect((error as ControlPlaneStartError).logTail).toContain('address already in use');
    // Taken, not broken: a port the launcher picks itself is picked again; this one was the caller's.
    expect((error as ControlPlaneStartError).portTaken).toBe(true);
    expect(await noneLeft(dir)).toEqual([]);
  });

  test('an apiserver that never becomes ready is stopped and reported with its log tail', async () => {
    const dir = stateDir();
    const plane = await sharedEtcd(dir, 6_000);
    const deadEtcd = `http://127.0.0.1:${await freePort()}`;

    const error = await plane.startCluster({ name: 'stuck', etcdServers: deadEtcd }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ControlPlaneStartError);
    expect((error as Error).message).toContain('kube-apiserver "stuck" did not become ready within 6s');
    expect((error as ControlPlaneStartError).logTail).toContain(deadEtcd.replace('http://', ''));
    expect(await noneLeft(dir)).toEqual([]);
  });

  test('killing the launcher with SIGKILL leaves no process behind', async () => {
    const dir = stateDir();
    const script = `
      import { ControlPlane } from ${JSON.stringify(new URL('../../src/dev/controlplane.ts', import.meta.url).pathname)};
      const plane = await ControlPlane.start({ stateDir: ${JSON.stringify(dir)}, binary: ${JSON.stringify(inject('controlPlaneBinary'))} });
      await plane.startCluster({ name: 'doomed', controllerManager: true });
      process.stdout.write('ready\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
      child.on('exit', (code) => reject(new Error(`launcher exited early with ${code}`)));
    });
    // etcd, kube-apiserver and kube-controller-manager are running now.
    expect(processesMentioning(dir).length).toBeGreaterThanOrEqual(3);
    child.kill('SIGKILL');
    expect(await noneLeft(dir)).toEqual([]);
  });
});
