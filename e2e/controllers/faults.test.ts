import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoordinationV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1Role,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { CLEANUP_FINALIZER, OWNER_UID_LABEL } from '../../src/api/labels.ts';
import type { SharedSecret } from '../../src/api/sharedsecret.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import { desiredRbac } from '../../src/controllers/sharedsecret/desired.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import {
  hostKubeConfig,
  hostKubeconfigPath,
  kubeConfigFor,
  uniqueName,
  useExtraClusters,
  useNamespace,
} from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { spawnOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';

const GROUP = 'management.platform';
const VERSION = 'v1';
const PLURAL = 'sharedsecrets';

const logDir = mkdtempSync(join(tmpdir(), 'platform-faults-'));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function secretBody(name: string) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'SharedSecret',
    metadata: { name },
    spec: { data: { v: 'eA==' }, access: [{ name: 'read', verbs: ['get'], users: [`user-${name}`] }] },
  };
}

/** Runs `fn` over `items` with at most `concurrency` in flight. */
async function pool<T>(
  items: T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const index = next++;
        await fn(items[index]!, index);
      }
    }),
  );
}

/**
 * The exact end state for a namespace: no SharedSecret has a finalizer (deleting one never waits
 * for the operator: garbage collection removes its Roles), each is Ready=True for its generation, and exactly the Roles/RoleBindings its spec asks for; no Role or RoleBinding
 * exists for a secret that does not. Returns a description of the first difference, or ''.
 */
async function differences(kc: KubeConfig, namespace: string): Promise<string> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const [secrets, roles, bindings] = await Promise.all([
    custom.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: PLURAL,
    }) as Promise<{
      items: SharedSecret[];
    }>,
    rbac.listNamespacedRole({ namespace, labelSelector: OWNER_UID_LABEL }),
    rbac.listNamespacedRoleBinding({ namespace, labelSelector: OWNER_UID_LABEL }),
  ]);
  const wantedRoles = new Map<string, V1Role>();
  const wantedBindings = new Map<string, V1RoleBinding>();
  for (const secret of secrets.items) {
    if (secret.metadata.finalizers?.includes(CLEANUP_FINALIZER))
      return `${secret.metadata.name} has a finalizer`;
    const ready = secret.status?.conditions?.find((c) => c.type === 'Ready');
    if (
      ready?.status !== 'True' ||
      ready.observedGeneration !== secret.metadata.generation ||
      secret.status?.observedGeneration !== secret.metadata.generation
    ) {
      return `${secret.metadata.name} is not Ready for its generation`;
    }
    const desired = desiredRbac(secret);
    for (const role of desired.roles) wantedRoles.set(role.metadata!.name!, role);
    for (const binding of desired.roleBindings) wantedBindings.set(binding.metadata!.name!, binding);
  }
  if (roles.items.length !== wantedRoles.size)
    return `${roles.items.length} Roles, ${wantedRoles.size} wanted`;
  if (bindings.items.length !== wantedBindings.size)
    return `${bindings.items.length} RoleBindings, ${wantedBindings.size} wanted`;
  for (const role of roles.items) {
    const wanted = wantedRoles.get(role.metadata!.name!);
    if (!wanted) return `orphan Role ${role.metadata!.name}`;
    if (role.metadata?.ownerReferences?.[0]?.uid !== wanted.metadata?.ownerReferences?.[0]?.uid)
      return `Role ${role.metadata!.name} has a stale owner`;
    if (JSON.stringify(role.rules?.[0]?.verbs) !== JSON.stringify(wanted.rules?.[0]?.verbs))
      return `Role ${role.metadata!.name} differs`;
  }
  for (const binding of bindings.items) {
    const wanted = wantedBindings.get(binding.metadata!.name!);
    if (!wanted) return `orphan RoleBinding ${binding.metadata!.name}`;
    const names = (b: V1RoleBinding) => (b.subjects ?? []).map((s) => s.name).join(',');
    if (names(binding) !== names(wanted)) return `RoleBinding ${binding.metadata!.name} differs`;
  }
  return '';
}

async function converged(kc: KubeConfig, namespace: string, timeoutMs: number, what: string): Promise<void> {
  let last = '';
  await eventually(
    async () => {
      last = await differences(kc, namespace).catch((err: Error) => err.message);
      return last === '';
    },
    timeoutMs,
    what,
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${last}`);
  });
}

describe('an operator killed with SIGKILL in the middle of 500 creates', () => {
  const namespace = useNamespace('faults-kill');
  const kc = hostKubeConfig();
  beforeAll(() => installCrds(kc));

  test('ends exact after a restart: no duplicates, no orphans, no finalizer left after deletion', async () => {
    const ns = namespace();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const args = [
      '--kubeconfig',
      hostKubeconfigPath(),
      '--watch-namespace',
      ns,
      '--namespace',
      ns,
      '--no-leader-elect',
    ];
    const log = join(logDir, 'kill.log');
    const first = spawnOperator([...args, '--health-port', '0', '--log-level', 'warn'], log);
    children.push(first);
    const names = Array.from({ length: 500 }, (_, i) => `s-${i}`);
    let killedAt = -1;
    await pool(names, 16, async (name, index) => {
      if (index === 150 && killedAt < 0) {
        killedAt = index;
        first.kill('SIGKILL');
      }
      await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: PLURAL,
        body: secretBody(name),
      });
    });
    expect(killedAt).toBe(150);
    const second = spawnOperator([...args, '--health-port', '0', '--log-level', 'warn'], log);
    children.push(second);
    await converged(kc, ns, 240_000, 'all 500 SharedSecrets to be projected after the restart');

    await custom.deleteCollectionNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
    });
    await eventually(
      async () => {
        const left = (await custom.listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: PLURAL,
        })) as {
          items: unknown[];
        };
        const roles = await kc
          .makeApiClient(RbacAuthorizationV1Api)
          .listNamespacedRole({ namespace: ns, labelSelector: OWNER_UID_LABEL });
        return left.items.length === 0 && roles.items.length === 0;
      },
      240_000,
      'every SharedSecret and Role to be gone',
    );
  }, 600_000);
});

describe('an apiserver restarted under a running operator', () => {
  const startCluster = useExtraClusters();
  let stopOperator: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await stopOperator?.();
  });

  test('changes made while it was down are reconciled after it returns', async () => {
    const name = uniqueName('restart');
    const primary = await startCluster({ name });
    const kc = kubeConfigFor(primary);
    await installCrds(kc);
    const ns = 'default';
    const manager = createOperator(
      defaultOperatorOptions({
        controllers: ['sharedsecret', 'secretsync'],
        kubeconfig: primary.kubeconfigPath,
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
      }),
      pino({ level: 'silent' }),
    );
    await manager.start();
    stopOperator = () => manager.stop();
    const custom = (k: KubeConfig) => k.makeApiClient(CustomObjectsApi);
    await custom(kc).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      body: secretBody('before'),
    });
    await converged(kc, ns, 60_000, 'the first secret');

    // The operator's apiserver goes away; a second apiserver on the same data stays up (as in an
    // HA control plane), and the world changes through it meanwhile.
    await primary.stop();
    const other = kubeConfigFor(
      await startCluster({ name: uniqueName('other'), etcdPrefix: `/${name}/registry` }),
    );
    await custom(other).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      body: secretBody('during'),
    });
    await custom(other).patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'before',
      body: [
        {
          op: 'add',
          path: '/spec/access/-',
          value: { name: 'more', verbs: ['get', 'list'], teams: ['late'] },
        },
      ],
    });

    await startCluster({ name, port: primary.port });
    await converged(kc, ns, 120_000, 'the changes made while the apiserver was down');
  }, 300_000);
});

describe('two operators with leader election', () => {
  const namespace = useNamespace('faults-leader');
  const kc = hostKubeConfig();
  beforeAll(() => installCrds(kc));

  const reconcileCount = async (port: number): Promise<number> => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
    return text
      .split('\n')
      .filter(
        (line) =>
          line.startsWith('controller_runtime_reconcile_total{') &&
          line.includes('controller="sharedsecret"'),
      )
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
  };

  test('only the leader writes; when it is killed the other takes over after the lease expires', async () => {
    const ns = namespace();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const leaseName = 'platform-operator';
    const ports = { a: await freePort(), b: await freePort() };
    const start = (id: 'a' | 'b') => {
      const child = spawnOperator(
        [
          '--kubeconfig',
          hostKubeconfigPath(),
          '--watch-namespace',
          ns,
          '--namespace',
          ns,
          '--identity',
          `op-${id}`,
        ].concat(['--health-port', String(ports[id]), '--health-host', '127.0.0.1', '--log-level', 'warn']),
        join(logDir, `leader-${id}.log`),
      );
      children.push(child);
      return child;
    };
    const processes = { a: start('a'), b: start('b') };
    let holder = '';
    await eventually(
      async () => {
        const lease = await leases
          .readNamespacedLease({ namespace: ns, name: leaseName })
          .catch(() => undefined);
        holder = lease?.spec?.holderIdentity ?? '';
        return holder === 'op-a' || holder === 'op-b';
      },
      60_000,
      'a leader',
    );
    const leader = holder === 'op-a' ? 'a' : 'b';
    const follower = leader === 'a' ? 'b' : 'a';
    // The follower may still be starting (its health server not listening yet) when the leader
    // holds the lease: its metrics are read once it answers.
    for (const port of [ports.a, ports.b])
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true,
        60_000,
        `the operator's health server on port ${port}`,
      );

    await pool(
      Array.from({ length: 20 }, (_, i) => `l-${i}`),
      8,
      async (name) => {
        await custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: PLURAL,
          body: secretBody(name),
        });
      },
    );
    await converged(kc, ns, 60_000, 'the leader to project 20 secrets');
    expect(await reconcileCount(ports[leader])).toBeGreaterThan(0);
    expect(await reconcileCount(ports[follower])).toBe(0);

    const before = await leases.readNamespacedLease({ namespace: ns, name: leaseName });
    const killedAt = Date.now();
    processes[leader].kill('SIGKILL');
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      body: secretBody('after-failover'),
    });
    await eventually(
      async () =>
        (await leases.readNamespacedLease({ namespace: ns, name: leaseName })).spec?.holderIdentity ===
        `op-${follower}`,
      90_000,
      'the follower to take over',
    );
    const after = await leases.readNamespacedLease({ namespace: ns, name: leaseName });
    // Safety, not speed: the new leader acquired only after the old lease had expired.
    const oldRenew = new Date(before.spec!.renewTime as unknown as string).getTime();
    const acquired = new Date(after.spec!.acquireTime as unknown as string).getTime();
    const leaseMs = (before.spec!.leaseDurationSeconds ?? 15) * 1000;
    expect(acquired).toBeGreaterThanOrEqual(oldRenew + leaseMs - 1);
    expect(after.spec!.leaseTransitions).toBe((before.spec!.leaseTransitions ?? 0) + 1);
    await converged(kc, ns, 60_000, 'the new leader to project the secret created during the failover');
    expect(await reconcileCount(ports[follower])).toBeGreaterThan(0);
    process.stdout.write(
      `leader failover: takeover ${Date.now() - killedAt} ms after SIGKILL (lease ${leaseMs} ms)\n`,
    );
    expect(readFileSync(join(logDir, `leader-${follower}.log`), 'utf8')).not.toMatch(/"level":(50|60)/);
  }, 300_000);
});
