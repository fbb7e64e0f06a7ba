/**
 * SharedSecret projection throughput. In one run, against one apiserver of its own:
 *   raw:        a plain client creates the 4N Roles and RoleBindings that N SharedSecrets with two
 *               access rules each project to, at concurrency C;
 *   projection: N SharedSecrets are created at the same concurrency with the operator running (a
 *               separate process, only the sharedsecret controller, so its peak RSS is its own); the
 *               clock stops when every Role and RoleBinding exists and every secret reports Ready
 *               for its generation.
 *   same writes: the raw client makes, per secret, exactly the writes the projection needs (the
 *               SharedSecret, its Roles, its RoleBindings, its status), at the same concurrency.
 * Figures: both times and their ratio; apiserver writes per SharedSecret beside the minimum the
 * semantics need (its creation, a Role and a RoleBinding per access rule, one status write); the
 * write efficiency (apiserver writes/s during the projection ÷ the raw client's Role writes/s, and
 * ÷ the raw client's rate for the same writes); the operator's peak RSS.
 *
 * Every wait is bounded and fails at once when the operator process has died.
 *
 *   bench/projection/run.sh [N=2000] [C=32]      (BENCH_SMOKE=1: N=40, C=8)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CoreV1Api, type KubernetesObject, type V1Role, type V1RoleBinding } from '@kubernetes/client-node';
import pino from 'pino';
import { apiserverWrites } from '../../e2e/support/apiserver-writes.ts';
import { OWNER_UID_LABEL } from '../../src/api/labels.ts';
import { resources, type Stored } from '../../src/api/resources.ts';
import type { SharedSecret } from '../../src/api/sharedsecret.ts';
import { desiredRbac } from '../../src/controllers/sharedsecret/desired.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { patchStatus } from '../../src/runtime/apply.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { deepEqual } from '../../src/runtime/json.ts';
import { collectionPath, KubeClient, objectKey, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { clientGoCost, reportPeakRss } from '../memory/measure.ts';
import { benchMode, pool, reportFigure, stopChild, withBenchCluster } from '../support.ts';

const smoke = benchMode() === 'smoke';
const N = Number(process.argv[2] ?? (smoke ? 40 : 2000));
const C = Number(process.argv[3] ?? (smoke ? 8 : 32));
const RULES = 2;
/** The writes one SharedSecret needs: its creation, a Role and a RoleBinding per rule, its status. */
const MIN_WRITES_PER_SECRET = 1 + 2 * RULES + 1;
/**
 * Resources the control plane writes on its own while the benchmark runs (leases, its flow
 * control configuration, CRD status, API services): not the projection's writes.
 */
const APISERVER_OWN_WRITES = [
  'leases',
  'flowschemas',
  'prioritylevelconfigurations',
  'customresourcedefinitions',
  'apiservices',
  'servicecidrs',
  'ipaddresses',
];
/** Bounds on the waits: far beyond what a healthy run takes, so only a hang reaches them. */
const READY_BOUND_MS = 120_000;
const PROJECTION_BOUND_MS = Math.max(120_000, N * 100);

/**
 * Polls `done` every `intervalMs` until it holds; throws when `child` has exited or `boundMs` passed,
 * so a benchmark never waits on a dead process or without end.
 */
async function waitFor(
  what: string,
  done: () => boolean | Promise<boolean>,
  child: ChildProcess,
  boundMs: number,
  intervalMs = 20,
): Promise<void> {
  const deadline = performance.now() + boundMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `the operator exited (${child.exitCode ?? child.signalCode}) while waiting for ${what}`,
      );
    if (await done()) return;
    if (performance.now() > deadline) throw new Error(`gave up waiting for ${what} after ${boundMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

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

/** Ready=True, written for the secret's current generation. */
function isReadyForGeneration(s: Stored<SharedSecret>): boolean {
  const ready = s.status?.conditions?.find((c) => c.type === 'Ready');
  const observed =
    (s.status as { observedGeneration?: number } | undefined)?.observedGeneration ??
    ready?.observedGeneration;
  return ready?.status === 'True' && observed === s.metadata.generation;
}

async function main(): Promise<void> {
  let operator: ReturnType<typeof spawn> | undefined;
  await withBenchCluster('projection', async (cluster, kc) => {
    try {
      const core = kc.makeApiClient(CoreV1Api);
      for (const name of ['bench-raw', 'bench-same', 'bench-projection'])
        await core.createNamespace({ body: { metadata: { name } } });
      const api = new KubeClient(kc);

      // Baseline: the very objects the operator will write, written directly (uids are made up).
      const rawObjects: (V1Role | V1RoleBinding)[] = [];
      if (secret('bench-raw', 0).spec.access?.length !== RULES) throw new Error('RULES must match secret()');
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

      // Second baseline: the raw client making the very writes the projection needs, in the same
      // order per secret (create the SharedSecret, its Roles, its RoleBindings, write its status).
      // Writes of a custom resource cost the apiserver more than a Role's, so this is the rate
      // the projection could reach if the operator added nothing.
      const sameStart = performance.now();
      await pool(N, C, async (i) => {
        const created = await api.request<Stored<SharedSecret>>({
          method: 'POST',
          path: collectionPath(resources.sharedSecrets, 'bench-same'),
          body: secret('bench-same', i),
        });
        const { roles, roleBindings } = desiredRbac(created);
        for (const [resource, objects] of [
          [resources.roles, roles],
          [resources.roleBindings, roleBindings],
        ] as const) {
          await Promise.all(
            objects.map((body) =>
              api.request({ method: 'POST', path: collectionPath(resource, 'bench-same'), body }),
            ),
          );
        }
        await patchStatus(api, resources.sharedSecrets, created, {
          observedGeneration: 1,
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Projected',
              message: 'Roles and RoleBindings match spec.access',
              lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
              observedGeneration: 1,
            },
          ],
          dataKeys: ['token'],
        });
      });
      const sameMs = performance.now() - sameStart;

      // Projection: the operator as its own process, caches synced before the clock starts.
      const healthPort = await freePort();
      operator = spawn(
        process.execPath,
        [
          '--no-node-snapshot',
          // OPERATOR_NODE_OPTIONS: further Node flags for the operator (e.g. --max-semi-space-size=2).
          ...(process.env.OPERATOR_NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag !== ''),
          // PROJECTION_CPU_PROFILE=<dir>: the operator writes a V8 CPU profile there when it stops.
          ...(process.env.PROJECTION_CPU_PROFILE
            ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROJECTION_CPU_PROFILE}`]
            : []),
          'bin/platform.js',
          'operator',
          '--no-webhooks',
          '--no-gateway',
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
      const child = operator;
      await waitFor(
        "the operator's /readyz",
        () =>
          fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
            (r) => r.ok,
            () => false,
          ),
        child,
        READY_BOUND_MS,
        100,
      );
      const watch = <T extends KubernetesObject>(resource: ResourceRef, labelSelector?: string) => {
        const informer = new Informer<T>({
          api,
          resource,
          namespace: 'bench-projection',
          ...(labelSelector ? { labelSelector } : {}),
          clock: systemClock,
          random: systemRandom,
          logger: pino({ level: 'silent' }),
        });
        informer.start();
        return informer;
      };
      const roles = watch<V1Role>(resources.roles, OWNER_UID_LABEL);
      const bindings = watch<V1RoleBinding>(resources.roleBindings, OWNER_UID_LABEL);
      const secrets = watch<Stored<SharedSecret>>(resources.sharedSecrets);
      const informers = [roles, bindings, secrets];
      await Promise.all(informers.map((i) => i.waitForSync()));
      const ready = new Set<string>();
      secrets.addEventHandler({
        onAdd: (s) => isReadyForGeneration(s) && ready.add(objectKey(s)),
        onUpdate: (_, s) => isReadyForGeneration(s) && ready.add(objectKey(s)),
      });

      const writesBefore = await apiserverWrites(cluster, APISERVER_OWN_WRITES);
      const projectionStart = performance.now();
      await pool(N, C, (i) =>
        api.request({
          method: 'POST',
          path: collectionPath(resources.sharedSecrets, 'bench-projection'),
          body: secret('bench-projection', i),
        }),
      );
      await waitFor(
        `${2 * N} Roles, ${2 * N} RoleBindings and ${N} SharedSecrets Ready`,
        () => roles.store.size >= 2 * N && bindings.store.size >= 2 * N && ready.size >= N,
        child,
        PROJECTION_BOUND_MS,
      );
      const projectionMs = performance.now() - projectionStart;
      const writesAfter = await apiserverWrites(cluster, APISERVER_OWN_WRITES);
      const writes = writesAfter - writesBefore;

      // Content check: every projected object is exactly what its secret's spec asks for.
      let wrong = 0;
      for (const s of secrets.store.list()) {
        const desired = desiredRbac(s);
        for (const role of desired.roles) {
          const actual = roles.store.getByName(role.metadata?.namespace, role.metadata?.name ?? '');
          if (!deepEqual(actual?.rules, role.rules)) wrong++;
        }
        for (const binding of desired.roleBindings) {
          const actual = bindings.store.getByName(binding.metadata?.namespace, binding.metadata?.name ?? '');
          if (!deepEqual(actual?.subjects, binding.subjects) || !deepEqual(actual?.roleRef, binding.roleRef))
            wrong++;
        }
      }
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const peakRssMiB = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
      await Promise.all(informers.map((i) => i.stop()));
      if (wrong > 0)
        throw new Error(`${wrong} projected objects differ from what their SharedSecret asks for`);

      const rawSeconds = rawMs / 1000;
      const projectionSeconds = projectionMs / 1000;
      const rawRate = (4 * N) / rawSeconds;
      const projectionRate = writes / projectionSeconds;
      console.log(
        `projection benchmark${smoke ? ' (smoke)' : ''}: N=${N} SharedSecrets x ${RULES} rules = ${4 * N} Roles+RoleBindings, concurrency ${C}`,
      );
      reportFigure({
        name: `projection time, ${N} SharedSecrets (includes creating them)`,
        value: projectionSeconds,
        unit: 's',
        baseline: { name: `raw writes of the ${4 * N} Roles and RoleBindings`, value: rawSeconds, unit: 's' },
        ratio: projectionSeconds / rawSeconds,
        goal: `<= ${(MIN_WRITES_PER_SECRET / (2 * RULES) / 0.9).toFixed(2)}x (${MIN_WRITES_PER_SECRET} writes where raw makes ${2 * RULES}, at efficiency 0.9)`,
      });
      reportFigure({
        name: 'apiserver writes per SharedSecret',
        value: writes / N,
        unit: 'writes',
        baseline: {
          name: 'minimum (creation, a Role and a RoleBinding per rule, one status write)',
          value: MIN_WRITES_PER_SECRET,
          unit: 'writes',
        },
        ratio: writes / N / MIN_WRITES_PER_SECRET,
        goal: '= 1 (at the minimum)',
      });
      reportFigure({
        name: 'apiserver writes/s during the projection',
        value: projectionRate,
        unit: 'writes/s',
        baseline: { name: 'raw client writes/s', value: rawRate, unit: 'writes/s' },
        ratio: projectionRate / rawRate,
        goal: '>= 0.9 (write efficiency)',
      });
      const sameRate = (MIN_WRITES_PER_SECRET * N) / (sameMs / 1000);
      reportFigure({
        name: 'apiserver writes/s during the projection, against the same writes made directly',
        value: projectionRate,
        unit: 'writes/s',
        baseline: {
          name: `raw client making the ${MIN_WRITES_PER_SECRET} writes per secret itself`,
          value: sameRate,
          unit: 'writes/s',
        },
        ratio: projectionRate / sameRate,
        goal: '>= 0.9',
      });
      // What the operator caches: the SharedSecrets of its namespace and the Roles and RoleBindings it labels.
      const projected = { namespace: 'bench-projection', labelSelector: OWNER_UID_LABEL };
      const clientGo = await clientGoCost(
        [
          {
            kubeconfig: cluster.kubeconfigPath,
            targets: [
              { resource: resources.sharedSecrets, namespace: 'bench-projection' },
              { resource: resources.roles, ...projected },
              { resource: resources.roleBindings, ...projected },
            ],
          },
        ],
        PROJECTION_BOUND_MS,
      );
      reportPeakRss('operator peak RSS', peakRssMiB, clientGo);
    } finally {
      if (operator) await stopChild(operator, 30_000);
    }
  });
}

await main();
