import { KubeConfig } from '@kubernetes/client-node';
import { resources } from '../../src/api/resources.ts';
import type { Cluster, ControlPlane } from '../../src/dev/controlplane.ts';
import { collectionPath, KubeClient, type ObjectList } from '../../src/runtime/kube-client.ts';
import { LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { pool, reportFigure, waitUntil } from '../support.ts';
import { SCALE_NAMESPACE } from './curve.ts';
import { cpuMs, keptResidentMiB, type OperatorProcess } from './process.ts';

const APPS = 'apps';
const CONCURRENCY = 16;
const PARALLEL_STARTS = 4;

export interface SyncerStep {
  readonly instances: number;
  readonly rssMiB: number;
  /** Share of one core the operator used at rest, over the idle window. */
  readonly idleCores: number;
}

/** The instances live in the curve's namespace (the one the operator watches), and sync into it. */
const instanceName = (i: number) => `vc-${i}`;

/** `pairs` headless Services with their Endpoints in the virtual cluster's namespace `apps`. */
async function populate(virtual: KubeClient, pairs: number): Promise<void> {
  await virtual.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name: APPS } } });
  await pool(pairs, CONCURRENCY, async (i) => {
    const name = `svc-${i}`;
    const metadata = { name, namespace: APPS, labels: { app: name } };
    await virtual.request({
      method: 'POST',
      path: `/api/v1/namespaces/${APPS}/services`,
      body: { metadata, spec: { clusterIP: 'None', ports: [{ name: 'http', port: 80, targetPort: 8080 }] } },
    });
    await virtual.request({
      method: 'POST',
      path: `/api/v1/namespaces/${APPS}/endpoints`,
      body: {
        metadata,
        subsets: [
          {
            addresses: [{ ip: `10.100.${Math.floor(i / 250)}.${(i % 250) + 1}` }],
            ports: [{ name: 'http', port: 8080 }],
          },
        ],
      },
    });
  });
}

/** A virtual cluster for instance `i`: its apiserver, its objects, and its instance on the host. */
async function addVirtualCluster(
  plane: ControlPlane,
  host: KubeClient,
  i: number,
  pairs: number,
): Promise<Cluster> {
  const cluster = await plane.startCluster({ name: `virtual-${i}` });
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  await populate(new KubeClient(kc), pairs);
  const credentials = `${instanceName(i)}-credentials`;
  await host.request({
    method: 'POST',
    path: collectionPath(resources.secrets, SCALE_NAMESPACE),
    body: {
      metadata: { name: credentials },
      data: { token: Buffer.from(cluster.adminToken).toString('base64') },
    },
  });
  await host.request({
    method: 'POST',
    path: collectionPath(resources.virtualClusterInstances, SCALE_NAMESPACE),
    body: {
      apiVersion: 'management.platform/v1',
      kind: 'VirtualClusterInstance',
      metadata: { name: instanceName(i) },
      spec: {
        endpoint: cluster.server,
        caData: Buffer.from(cluster.caPem).toString('base64'),
        credentialsSecretRef: { name: credentials },
        config: '{}\n',
      },
    },
  });
  return cluster;
}

/** How many of a kind the syncer of instance `i` has written into its host namespace. */
async function syncedCount(host: KubeClient, i: number, plural: 'services' | 'endpoints'): Promise<number> {
  const list = await host.request<ObjectList<unknown>>({
    method: 'GET',
    path: `/api/v1/namespaces/${SCALE_NAMESPACE}/${plural}`,
    query: { labelSelector: `${LABEL_MANAGED_BY}=${instanceName(i)}` },
  });
  return list.items.length;
}

/**
 * The operator at rest: its CPU over `windowMs` as a share of one core, then its resident memory
 * after a full collection (keptResidentMiB; the collection's own CPU falls after the window).
 */
async function atRest(operator: OperatorProcess, windowMs: number): Promise<Omit<SyncerStep, 'instances'>> {
  const { pid } = operator.child;
  // Left alone for a while first: the last sync's writes and their watch events are done.
  await new Promise((resolve) => setTimeout(resolve, windowMs / 2));
  const before = cpuMs(pid);
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const idleCores = (cpuMs(pid) - before) / (performance.now() - started);
  return { rssMiB: await keptResidentMiB(operator), idleCores };
}

/**
 * One operator (its virtualcluster controller) syncing 0, then each count of `steps` virtual
 * clusters of `pairs` Services and Endpoints each: its resident memory and idle CPU once every
 * instance is synced, against the same operator with none.
 */
export async function syncerCurve(
  plane: ControlPlane,
  host: KubeClient,
  operator: OperatorProcess,
  steps: readonly number[],
  pairs: number,
  idleWindowMs: number,
  perObjectKiB: number,
): Promise<SyncerStep[]> {
  const results: SyncerStep[] = [];
  const base: SyncerStep = { instances: 0, ...(await atRest(operator, idleWindowMs)) };
  process.stdout.write(
    `virtual clusters: the operator with none: ${base.rssMiB.toFixed(0)} MiB, idle ${(base.idleCores * 100).toFixed(2)}% of a core\n`,
  );
  let started = 0;
  /** Instances seen with every Service and Endpoints synced. */
  const synced = new Set<number>();
  for (const instances of steps) {
    // A few apiservers start side by side (much of a start is waiting on etcd and TLS set-up).
    const first = started;
    await pool(instances - first, PARALLEL_STARTS, (offset) =>
      addVirtualCluster(plane, host, first + offset, pairs),
    );
    started = instances;
    await waitUntil(
      `${instances} virtual clusters synced (${pairs} Services and Endpoints each)`,
      async () => {
        // Each instance is listed until it is seen synced, then no more (nothing deletes what a
        // syncer wrote): listing every instance each round took up to 60 lists of 150 objects
        // every 250 ms from the host apiserver while 30 syncers wrote to it, and one timed out.
        for (let i = 0; i < instances; i++) {
          if (synced.has(i)) continue;
          if ((await syncedCount(host, i, 'services')) < pairs) return false;
          if ((await syncedCount(host, i, 'endpoints')) < pairs) return false;
          synced.add(i);
        }
        return true;
      },
      { boundMs: Math.max(120_000, instances * pairs * 200), child: operator.child, intervalMs: 250 },
    );
    const step: SyncerStep = { instances, ...(await atRest(operator, idleWindowMs)) };
    results.push(step);
    reportSyncerStep(step, base, pairs, perObjectKiB);
  }
  return results;
}

function reportSyncerStep(step: SyncerStep, base: SyncerStep, pairs: number, perObjectKiB: number): void {
  const what = `${step.instances} virtual clusters of ${pairs} Services and Endpoints`;
  const perSyncerMiB = (step.rssMiB - base.rssMiB) / step.instances;
  reportFigure({
    name: `operator resident memory at rest, ${what}`,
    value: step.rssMiB,
    unit: 'MiB',
    baseline: { name: 'the same operator syncing none', value: base.rssMiB, unit: 'MiB' },
    ratio: step.rssMiB / base.rssMiB,
  });
  reportFigure({
    name: `memory per syncer (its ${4 * pairs} cached objects included), ${what}`,
    value: perSyncerMiB,
    unit: 'MiB',
  });
  // Its virtual and host copies of each Service and Endpoints, at the operator's cost per cached object.
  const objectsMiB = (4 * pairs * perObjectKiB) / 1024;
  reportFigure({
    name: `memory per syncer beyond its objects (at ${perObjectKiB.toFixed(2)} KiB per cached object), ${what}`,
    value: perSyncerMiB - objectsMiB,
    unit: 'MiB',
    goal: '<= 5 MiB',
  });
  reportFigure({
    name: `idle CPU per syncer, ${what}`,
    value: ((step.idleCores - base.idleCores) / step.instances) * 100,
    unit: '% of a core',
    goal: '<= 1%',
  });
}
