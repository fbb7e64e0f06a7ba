import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException } from '@kubernetes/client-node';
import { afterEach, describe, expect, test } from 'vitest';
import type { KubeApi } from '../runtime/kube-api.ts';
import { SupervisionLost } from './component-supervisor.ts';
import { instancePaths } from './instance-state.ts';
import { ProcessesProvisioner } from './processes.ts';

/**
 * The processes provisioner losing an instance while it starts it (issue 27): another provisioner
 * over the same state directory (another replica, now holding the instance's Lease) takes it over
 * between two components. A stand-in binary plays the components: etcd answers its probe only
 * once the test opens a gate, so the takeover lands, deterministically, while the first
 * provisioner waits for etcd; any other component leaves a mark and sleeps.
 */

const dirs: string[] = [];
const provisioners: ProcessesProvisioner[] = [];
afterEach(async () => {
  delete process.env.MARKS;
  for (const p of provisioners.splice(0)) await p.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The host's Secrets in memory: what the provisioner reads and writes through `KubeApi`. */
function secretsApi(): KubeApi {
  const secrets = new Map<string, unknown>();
  const request = async (options: { method: string; path: string; body?: unknown }) => {
    const { method, path, body } = options;
    if (method === 'GET') {
      if (!secrets.has(path)) throw new ApiException(404, 'not found', {}, {});
      return secrets.get(path);
    }
    if (method === 'DELETE') {
      secrets.delete(path);
      return {};
    }
    const named = body as { metadata: { name: string } };
    const at = method === 'POST' ? `${path}/${named.metadata.name}` : path;
    secrets.set(at, { ...named, metadata: { ...named.metadata, resourceVersion: '1' } });
    return {};
  };
  return { request } as unknown as KubeApi;
}

const STAND_IN = `
const { existsSync, writeFileSync } = require('node:fs');
const { createServer } = require('node:http');
const { dirname, join } = require('node:path');
const [component, ...flags] = process.argv.slice(2);
const flag = (name) => flags.find((f) => f.startsWith('--' + name + '='))?.split('=').slice(1).join('=');
if (component === 'etcd') {
  const gate = join(dirname(flag('data-dir')), 'gate');
  const port = Number(new URL(flag('listen-client-url')).port);
  createServer((_, res) => {
    res.statusCode = existsSync(gate) ? 200 : 503;
    res.end();
  }).listen(port, '127.0.0.1');
} else {
  writeFileSync(join(process.env.MARKS, component), String(process.pid));
  setInterval(() => {}, 60_000);
}
`;

function standIn(dir: string): string {
  const path = join(dir, 'control-plane');
  writeFileSync(path, `#!${process.execPath}\n${STAND_IN}`);
  chmodSync(path, 0o755);
  return path;
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 20));
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('ProcessesProvisioner taken over while it starts an instance', () => {
  test('starts no further component, ends the one it started and leaves the new owner its pid file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'processes-takeover-'));
    dirs.push(dir);
    const marks = join(dir, 'marks');
    const stateDir = join(dir, 'state');
    // The stand-in's environment (the supervisor's children inherit it) says where marks go.
    process.env.MARKS = marks;
    mkdirSync(marks);
    const first = new ProcessesProvisioner({
      stateDir,
      binary: standIn(dir),
      api: secretsApi(),
      readyTimeoutMs: 30_000,
    });
    provisioners.push(first);
    const instance = { namespace: 'p-team', name: 'dev', uid: 'u-1' };
    const paths = instancePaths(stateDir, instance);
    const ensured = first.ensure(instance, { controllerManager: true });
    const outcome = ensured.then(
      () => undefined,
      (err: unknown) => err,
    );

    // etcd runs and is recorded as the first provisioner's; it waits at the gate.
    const recorded = () =>
      existsSync(paths.pidFile) ? (JSON.parse(readFileSync(paths.pidFile, 'utf8')) as { pid: number }[]) : [];
    await until(() => recorded().length === 1);
    const etcd = recorded()[0]!.pid;
    // The other provisioner takes over as its ensure does: its id in `owner`, its own records.
    writeFileSync(paths.ownerFile, 'the-other-provisioner');
    const othersRecords = JSON.stringify([{ pid: 1, command: 'the-other-provisioners-binary' }]);
    writeFileSync(paths.pidFile, othersRecords);
    writeFileSync(join(paths.dataDir, 'gate'), '');

    expect(await outcome).toBeInstanceOf(SupervisionLost);
    expect(existsSync(join(marks, 'kube-apiserver'))).toBe(false);
    expect(existsSync(join(marks, 'kube-controller-manager'))).toBe(false);
    expect(alive(etcd)).toBe(false);
    expect(readFileSync(paths.pidFile, 'utf8')).toBe(othersRecords);
    expect(readFileSync(paths.ownerFile, 'utf8')).toBe('the-other-provisioner');
  });
});
