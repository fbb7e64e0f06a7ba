import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { tokenOfKubeconfig } from '../../src/dev/admin-objects.ts';
import { kubectl } from './cluster.ts';
import { processesNaming } from './instance-processes.ts';

/**
 * `platform dev` as a user runs it, for the tests that need the whole local platform (the
 * provisioned virtual clusters' tests and docs/virtual-clusters.md): the real command in a child
 * process on a state directory of the test's, started, stopped with a signal as Ctrl-C stops it,
 * and started again. e2e/foundation/dev.test.ts checks `platform dev` itself.
 */

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface DevRun {
  readonly stateDir: string;
  readonly child: ChildProcess;
  readonly output: { stdout: string; stderr: string };
  readonly exited: Promise<number | null>;
}

/** What a running `platform dev` gives its user, read from its state directory. */
export interface DevPlatform {
  /** Platform admin through the gateway (the bootstrap admin's key). */
  readonly adminKubeconfig: string;
  /** Cluster admin of the host apiserver. */
  readonly hostKubeconfig: string;
  /** The gateway's URL without a path, `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** The gateway's local CA (PEM), which its clients trust. */
  readonly caPem: string;
  /** The CA file itself. */
  readonly caFile: string;
  /** The admin's access key (never print it). */
  readonly adminKey: string;
  /** Where the processes provisioner keeps virtual cluster `<namespace>/<name>`. */
  instanceDir(namespace: string, name: string): string;
}

export function startDev(stateDir: string, extraArgs: readonly string[] = []): DevRun {
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      join(repoRoot, 'bin', 'platform.js'),
      'dev',
      '--state-dir',
      stateDir,
      ...extraArgs,
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = { stdout: '', stderr: '' };
  child.stdout?.on('data', (chunk: Buffer) => {
    output.stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output.stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { stateDir, child, output, exited };
}

/** Resolves once the summary is printed; fails with the progress output when the command exits first. */
export async function untilRunning(run: DevRun, timeoutMs = 240_000): Promise<DevPlatform> {
  const deadline = Date.now() + timeoutMs;
  let exitCode: number | null | undefined;
  void run.exited.then((code) => {
    exitCode = code;
  });
  while (!run.output.stdout.includes('Press Ctrl-C to stop')) {
    if (exitCode !== undefined)
      throw new Error(`platform dev exited with ${exitCode} before running:\n${run.output.stderr}`);
    if (Date.now() > deadline)
      throw new Error(`platform dev did not report running in time:\n${run.output.stderr}`);
    await sleep(200);
  }
  return devPlatform(run.stateDir);
}

export function devPlatform(stateDir: string): DevPlatform {
  const adminKubeconfig = join(stateDir, 'admin.kubeconfig');
  const adminText = readFileSync(adminKubeconfig, 'utf8');
  const server = new URL(parseYaml(adminText).clusters[0].cluster.server as string);
  const caFile = join(stateDir, 'gateway', 'ca.crt');
  const adminKey = tokenOfKubeconfig(adminText);
  if (!adminKey) throw new Error('admin.kubeconfig holds no key');
  return {
    adminKubeconfig,
    hostKubeconfig: join(stateDir, 'host.kubeconfig'),
    url: server.origin,
    caPem: readFileSync(caFile, 'utf8'),
    caFile,
    adminKey,
    instanceDir: (namespace, name) => join(stateDir, 'virtualclusters', namespace, name),
  };
}

/** Stops it as Ctrl-C does (SIGINT, or `signal`); answers its exit code. */
export async function stopDev(run: DevRun, signal: NodeJS.Signals = 'SIGINT'): Promise<number | null> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill(signal);
  return run.exited;
}

/** For afterAll: a run still going is killed (its control planes die with it: parent-death signal). */
export async function killDev(run: DevRun | undefined): Promise<void> {
  if (!run || run.child.exitCode !== null || run.child.signalCode !== null) return;
  run.child.kill('SIGKILL');
  await run.exited;
}

/**
 * For afterAll: kills a run still going (killDev), waits a little for every process naming the
 * state directory to end, and removes the directory.
 */
export async function discardDev(run: DevRun | undefined, stateDir: string): Promise<void> {
  await killDev(run);
  for (let i = 0; i < 40 && processesNaming(stateDir).length > 0; i++) await sleep(250);
  rmSync(stateDir, { recursive: true, force: true });
}

/**
 * kubectl on a dev platform's kubeconfigs, with a discovery cache in `cacheDir` (not the user's):
 * `run` answers the result, `ok` expects exit 0 and answers the output.
 */
export function devKubectl(cacheDir: string) {
  const run = (kubeconfig: string, args: string[], stdin?: string) =>
    kubectl(['--cache-dir', cacheDir, ...args], { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
  const ok = async (kubeconfig: string, args: string[], stdin?: string) => {
    const result = await run(kubeconfig, args, stdin);
    expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };
  return { run, ok };
}

/** The last `chars` of its operator's log, for failure messages. */
export function devLogTail(stateDir: string, chars = 3000): string {
  const path = join(stateDir, 'operator.log');
  return existsSync(path) ? readFileSync(path, 'utf8').slice(-chars) : '';
}
