import { randomBytes } from 'node:crypto';
import pino from 'pino';
import type { User } from '../../src/api/identity.ts';
import type { OwnedAccessKey } from '../../src/api/ownedaccesskey.ts';
import { resources, type Stored } from '../../src/api/resources.ts';
import type { SharedSecret } from '../../src/api/sharedsecret.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { collectionPath, type KubeClient, objectPath } from '../../src/runtime/kube-client.ts';
import { pool, quantile, reportFigure, stopChild, waitUntil, within } from '../support.ts';
import { etcdPidOf, keptResidentMiB, type OperatorProcess, residentMiB, startOperator } from './process.ts';

export const SCALE_NAMESPACE = 'bench-scale';
/**
 * Controllers of the kinds this curve grows (projections of SharedSecrets, access keys), and the
 * virtualcluster controller, idle until the last step's operator is handed virtual clusters.
 */
const CONTROLLERS = ['sharedsecret', 'accesskey', 'virtualcluster'];
const CONCURRENCY = 32;
/** Objects the operator caches per step of N: N keys, N Users, N SharedSecrets, N Roles, N RoleBindings. */
const CACHED_PER_N = 5;

export interface CurveStep {
  readonly n: number;
  readonly readyMs: number;
  readonly convergedMs: number;
  readonly rssMiB: number;
  readonly peakMiB: number;
  readonly changeP50Ms: number;
  readonly changeP99Ms: number;
  /** The control plane beside it (resident now, and peak), so the run is seen to fit the machine. */
  readonly apiserver: { now: number; peak: number };
  readonly etcd: { now: number; peak: number };
}

const user = (i: number): User => ({
  apiVersion: 'management.platform/v1',
  kind: 'User',
  metadata: { name: `user-${i}` },
  spec: { username: `user-${i}`, subject: `user-${i}`, displayName: `Bench user ${i}` },
});

const accessKey = (i: number): OwnedAccessKey =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'OwnedAccessKey',
    metadata: { name: `key-${i}` },
    spec: {
      user: `user-${i}`,
      type: 'Other',
      keyId: generateAccessKey(randomBytes).id,
      keyHash: randomBytes(32).toString('hex'),
    },
  }) as OwnedAccessKey;

/** One access rule (a Role and a RoleBinding); `verbs` is what a change toggles. */
const sharedSecret = (i: number, verbs: string[] = ['get']): SharedSecret => ({
  apiVersion: 'management.platform/v1',
  kind: 'SharedSecret',
  metadata: { name: `secret-${i}`, namespace: SCALE_NAMESPACE },
  spec: {
    data: { token: Buffer.from(`token-${i}`).toString('base64') },
    access: [{ name: 'readers', verbs, users: [`user-${i}`] }],
  },
});

function readyGeneration(secret: Stored<SharedSecret>): number | undefined {
  const ready = secret.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'True') return undefined;
  return (
    (secret.status as { observedGeneration?: number } | undefined)?.observedGeneration ??
    ready.observedGeneration
  );
}

/** Creates objects from..to-1 of each kind (the operator is not running meanwhile). */
async function grow(api: KubeClient, from: number, to: number): Promise<void> {
  const count = to - from;
  await pool(count, CONCURRENCY, (i) =>
    api.request({ method: 'POST', path: collectionPath(resources.users), body: user(from + i) }),
  );
  await pool(count, CONCURRENCY, (i) =>
    api.request({
      method: 'POST',
      path: collectionPath(resources.ownedAccessKeys),
      body: accessKey(from + i),
    }),
  );
  await pool(count, CONCURRENCY, (i) =>
    api.request({
      method: 'POST',
      path: collectionPath(resources.sharedSecrets, SCALE_NAMESPACE),
      body: sharedSecret(from + i),
    }),
  );
}

/** The bench's own view of the SharedSecrets: which generation each is Ready for, and who waits for one. */
function watchSecrets(api: KubeClient) {
  const informer = new Informer<Stored<SharedSecret>>({
    api,
    resource: resources.sharedSecrets,
    namespace: SCALE_NAMESPACE,
    clock: systemClock,
    random: systemRandom,
    logger: pino({ level: 'silent' }),
  });
  const ready = new Map<string, number>();
  const waiters = new Map<string, { generation: number; resolve: () => void }>();
  const seen = (secret: Stored<SharedSecret>) => {
    const generation = readyGeneration(secret);
    const name = secret.metadata.name ?? '';
    if (generation === undefined || generation !== secret.metadata.generation) return;
    ready.set(name, generation);
    const waiter = waiters.get(name);
    if (waiter && generation >= waiter.generation) {
      waiters.delete(name);
      waiter.resolve();
    }
  };
  informer.addEventHandler({
    onAdd: seen,
    onUpdate: (_previous, secret) => seen(secret),
    onDelete: () => {},
  });
  informer.start();
  return {
    informer,
    readyCount: () => ready.size,
    readyFor: (name: string, generation: number) =>
      new Promise<void>((resolve) => {
        if ((ready.get(name) ?? 0) >= generation) resolve();
        else waiters.set(name, { generation, resolve });
      }),
  };
}

/**
 * How long the count of Ready SharedSecrets may stand still before the wait fails: a hang, not a
 * slow machine (on 2 shared cores at load 20 the operator projected 18 secrets a second, so a wait
 * bounded by its size alone failed runs that were only slow).
 */
const STALL_MS = 5 * 60_000;

/** A check that holds once `count()` reaches `target`, and throws when it stood still for {@link STALL_MS}. */
function progressing(count: () => number, target: number): () => boolean {
  let last = -1;
  let since = performance.now();
  return () => {
    const now = count();
    if (now >= target) return true;
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since > STALL_MS) {
      throw new Error(`${now} of ${target} SharedSecrets Ready, none more for ${STALL_MS / 1000} s`);
    }
    return false;
  };
}

/**
 * Time from a change of a SharedSecret's access rule to the bench seeing it Ready for that
 * generation (the change reconciled and its Role rewritten), `changes` of them one after another.
 */
async function changeLatencies(
  api: KubeClient,
  secrets: ReturnType<typeof watchSecrets>,
  n: number,
  changes: number,
  child: Parameters<typeof within>[2]['child'],
): Promise<number[]> {
  const latencies: number[] = [];
  for (let c = 0; c < changes; c++) {
    const i = (c * 7919) % n;
    const started = performance.now();
    const changed = await api.request<Stored<SharedSecret>>({
      method: 'PATCH',
      path: objectPath(resources.sharedSecrets, SCALE_NAMESPACE, `secret-${i}`),
      contentType: 'application/merge-patch+json',
      body: { spec: { access: sharedSecret(i, c % 2 === 0 ? ['get', 'list'] : ['get']).spec.access } },
    });
    await within(
      secrets.readyFor(`secret-${i}`, changed.metadata.generation ?? 0),
      `secret-${i} reconciled`,
      {
        boundMs: 60_000,
        child,
      },
    );
    latencies.push(performance.now() - started);
  }
  return latencies;
}

/**
 * The operator's curve: for each N, the objects grown to N of each kind while it is stopped, then a
 * fresh operator: start to /readyz, start to every SharedSecret Ready (the new ones projected),
 * resident memory then, and the latency of single changes at that size. The last step's operator
 * is handed to `atLastStep` before it stops (one operator start less in a run).
 */
export async function operatorCurve(
  cluster: Cluster,
  api: KubeClient,
  entry: string,
  steps: readonly number[],
  changes: number,
  atLastStep: (operator: OperatorProcess, curve: readonly CurveStep[]) => Promise<void>,
): Promise<CurveStep[]> {
  const secrets = watchSecrets(api);
  await secrets.informer.waitForSync();
  const results: CurveStep[] = [];
  let created = 0;
  const etcdPid = etcdPidOf(cluster.kubeconfigPath);
  try {
    for (const n of steps) {
      const growStart = performance.now();
      await grow(api, created, n);
      created = n;
      process.stdout.write(
        `step N=${n}: created ${n} keys, Users and SharedSecrets in ${((performance.now() - growStart) / 1000).toFixed(1)} s\n`,
      );
      const operator = await startOperator(entry, cluster.kubeconfigPath, CONTROLLERS, [
        '--watch-namespace',
        SCALE_NAMESPACE,
      ]);
      try {
        const readyMs = performance.now() - operator.startedAt;
        await waitUntil(`${n} SharedSecrets Ready`, progressing(secrets.readyCount, n), {
          boundMs: Math.max(120_000, n * 200),
          child: operator.child,
          intervalMs: 100,
        });
        const convergedMs = performance.now() - operator.startedAt;
        const latencies = await changeLatencies(api, secrets, n, changes, operator.child);
        const peakMiB = residentMiB(operator.child.pid).peak;
        const rssMiB = await keptResidentMiB(operator);
        const step: CurveStep = {
          n,
          readyMs,
          convergedMs,
          rssMiB,
          peakMiB,
          changeP50Ms: quantile(latencies, 0.5),
          changeP99Ms: quantile(latencies, 0.99),
          apiserver: residentMiB(cluster.apiServer.pid),
          etcd: etcdPid === undefined ? { now: Number.NaN, peak: Number.NaN } : residentMiB(etcdPid),
        };
        results.push(step);
        reportStep(step, results[results.length - 2]);
        if (n === steps[steps.length - 1]) await atLastStep(operator, results);
      } finally {
        await stopChild(operator.child, 30_000);
      }
    }
  } finally {
    await secrets.informer.stop();
  }
  return results;
}

/** The operator's memory per further cached object: the slope of the curve's last two steps. */
export function perObjectKiB(curve: readonly CurveStep[]): number {
  const [previous, last] = curve.slice(-2);
  if (!previous || !last) return Number.NaN;
  return ((last.rssMiB - previous.rssMiB) * 1024) / ((last.n - previous.n) * CACHED_PER_N);
}

function reportStep(step: CurveStep, previous: CurveStep | undefined): void {
  const { n } = step;
  const objects = n * CACHED_PER_N;
  const what = `${n} keys, Users and SharedSecrets`;
  reportFigure({ name: `operator start to /readyz, ${what}`, value: step.readyMs / 1000, unit: 's' });
  reportFigure({
    name: `operator start to every SharedSecret Ready, ${what}`,
    value: step.convergedMs / 1000,
    unit: 's',
  });
  reportFigure({ name: `operator resident memory at rest, ${what}`, value: step.rssMiB, unit: 'MiB' });
  reportFigure({ name: `operator peak resident memory, ${what}`, value: step.peakMiB, unit: 'MiB' });
  reportFigure({
    name: `operator resident memory at rest per cached object, ${what} (${objects} objects with the projections)`,
    value: (step.rssMiB * 1024) / objects,
    unit: 'KiB',
  });
  if (previous) {
    // The slope between two steps: what each further object costs, free of the fixed part.
    reportFigure({
      name: `operator memory per further cached object, ${previous.n} -> ${n}`,
      value: perObjectKiB([previous, step]),
      unit: 'KiB',
      goal: 'flat across steps (memory linear in objects)',
    });
  }
  reportFigure({ name: `change to reconcile p50, ${what}`, value: step.changeP50Ms, unit: 'ms' });
  reportFigure({ name: `change to reconcile p99, ${what}`, value: step.changeP99Ms, unit: 'ms' });
  for (const [component, memory] of [
    ['kube-apiserver', step.apiserver],
    ['etcd', step.etcd],
  ] as const) {
    reportFigure({ name: `${component} resident memory, ${what}`, value: memory.now, unit: 'MiB' });
    reportFigure({ name: `${component} peak resident memory, ${what}`, value: memory.peak, unit: 'MiB' });
  }
}
