import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import {
  desiredSyncerIdentity,
  SYNCER_CLUSTER_ROLES,
  syncerServiceAccountName,
} from '../../src/controllers/virtualcluster/identity.ts';
import { type Cluster, freePort } from '../../src/dev/controlplane.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { applyObject } from '../../src/runtime/apply.ts';
import type { KubeClient } from '../../src/runtime/kube-client.ts';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { syncedKinds } from '../../src/sync/controllers/syncer.ts';
import { C, ENTRY, VC, WAIT_LIMIT_MS } from './setting.ts';

/** `platform syncer` as the sync benchmark runs it: its host identity, its process, the waits on it, what it costs. */

/** CPU time (user + system) a process has used so far, in milliseconds (Linux /proc). */
export function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

/**
 * The host kubeconfig the syncer runs with, by `BENCH_SYNC_HOST`:
 * - `syncer` (default): as the operator runs it, its own ServiceAccount in the namespace it syncs
 *   into, bound there to the syncer roles of the kinds it syncs, with a TokenRequest token;
 * - `platform`: one ServiceAccount of the platform's namespace allowed the syncer's verbs in every
 *   namespace, as syncers ran before they had identities of their own (the operator's);
 * - `admin`: the cluster admin (system:masters, which API Priority and Fairness exempts).
 * The first two are treated alike by the apiserver's fairness (both are ServiceAccounts); the
 * comparison of the identities is made between them, on one commit.
 */
export async function syncerHostKubeconfig(
  host: KubeClient,
  cluster: Cluster,
  namespace: string,
  dir: string,
) {
  const mode = process.env.BENCH_SYNC_HOST ?? 'syncer';
  if (mode === 'admin') return cluster.kubeconfigPath;
  await installPlatformRoles(host);
  let account: { namespace: string; name: string };
  if (mode === 'platform') {
    account = { namespace: 'platform-system', name: 'platform-operator' };
    await host
      .request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: account.namespace } },
      })
      .catch(() => {});
    await applyObject(
      host,
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: account },
      { fieldManager: 'bench', force: true },
    );
    for (const role of Object.values(SYNCER_CLUSTER_ROLES))
      await applyObject(
        host,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: `bench-${role}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ kind: 'ServiceAccount', ...account }],
        } as KubernetesObject,
        { fieldManager: 'bench', force: true },
      );
  } else {
    const instance = { metadata: { namespace, name: VC, uid: `bench-${namespace}` } };
    const identity = desiredSyncerIdentity(instance, namespace, syncedKinds(loadSyncConfig({})));
    for (const object of [identity.serviceAccount, ...identity.roleBindings])
      await applyObject(host, object, { fieldManager: 'bench', force: true });
    account = { namespace, name: syncerServiceAccountName(instance) };
  }
  const answer = await host.request<{ status: { token: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${account.namespace}/serviceaccounts/${account.name}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  });
  const path = join(dir, `${namespace}.kubeconfig`);
  writeFileSync(
    path,
    kubeConfigYaml({
      name: 'host',
      server: cluster.server,
      caPem: cluster.caPem,
      credentials: { token: answer.status.token },
    }),
    { mode: 0o600 },
  );
  return path;
}

export function spawnSyncer(virtual: Cluster, hostKubeconfig: string, namespace: string, configPath: string) {
  const profileDir = process.env.SYNC_BENCH_CPU_PROF;
  return freePort().then((healthPort) => {
    const child = spawn(
      process.execPath,
      [
        '--no-node-snapshot',
        ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
        ENTRY,
        'syncer',
        '--virtual-kubeconfig',
        virtual.kubeconfigPath,
        '--host-kubeconfig',
        hostKubeconfig,
        '--host-namespace',
        namespace,
        '--name',
        VC,
        '--config',
        configPath,
        '--health-port',
        String(healthPort),
        '--health-host',
        '127.0.0.1',
        '--max-concurrent-reconciles',
        String(Math.max(1, Math.round(C / 2))),
        '--log-level',
        'warn',
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    return { child, healthPort };
  });
}

/** Fails (instead of waiting on) when the syncer died or the wait passes WAIT_LIMIT_MS. */
export function assertAlive(child: ChildProcess | undefined, started: number, what: string): void {
  if (child && child.exitCode !== null)
    throw new Error(`the syncer exited (${child.exitCode}) while waiting for ${what}`);
  if (performance.now() - started > WAIT_LIMIT_MS) throw new Error(`gave up waiting for ${what}`);
}

export async function waitReady(port: number, child: ChildProcess): Promise<void> {
  const started = performance.now();
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    assertAlive(child, started, 'the syncer to be ready');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function waitFor(check: () => boolean, what: string, child?: ChildProcess): Promise<void> {
  const started = performance.now();
  while (!check()) {
    assertAlive(child, started, what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits for a promise, failing instead when the syncer dies or the wait is too long. */
export async function bounded<T>(promise: Promise<T>, what: string, child?: ChildProcess): Promise<T> {
  let done = false;
  const guard = (async () => {
    const started = performance.now();
    while (!done) {
      assertAlive(child, started, what);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    return await Promise.race([promise, guard.then(() => promise)]);
  } finally {
    done = true;
  }
}

export function peakRssMiB(child: ChildProcess): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}
