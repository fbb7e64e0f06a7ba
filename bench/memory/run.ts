/**
 * Memory per cached object, beside client-go. The same objects (Secrets, ConfigMaps, Services,
 * Endpoints, OwnedAccessKeys, SharedSecrets; realistic sizes, each written by two field managers
 * through server-side apply, so managedFields are the apiserver's own) cached by our informers and
 * by client-go informers, each in a child process of its own, in the same run; the resident
 * memory each cache adds (after a forced collection, after the sync minus before) per object.
 *
 * Figures: ours per object against client-go as a Go controller runs it by default (managedFields
 * kept) and against client-go with the TransformFunc that strips managedFields (the same content
 * ours keeps). Full size: rounds interleaved (ours, client-go, client-go stripped), medians.
 *
 *   bench/memory/run.sh [objects per kind] [rounds]
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { applyObject } from '../../src/runtime/apply.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { benchMode, pool, reportFigure, withBenchCluster } from '../support.ts';
import {
  bytesPerObject,
  type CacheMemory,
  type CacheTarget,
  clientGoBinary,
  measureClientGo,
  measureOurCache,
} from './measure.ts';
import { benchKinds, NAMESPACE, secondManagerPatch } from './objects.ts';

const smoke = benchMode() === 'smoke';
const N = Number(process.argv[2] ?? (smoke ? 40 : 2000));
const ROUNDS = Number(process.argv[3] ?? (smoke ? 1 : 3));
const CONCURRENCY = 32;
/** Far beyond a healthy sync of every cache: only a hang reaches it. */
const SYNC_BOUND_MS = 120_000 + N * 6 * 20;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const spread = (values: number[]) => `${Math.min(...values).toFixed(0)}..${Math.max(...values).toFixed(0)}`;

async function createObjects(api: KubeClient): Promise<void> {
  await applyObject(
    api,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } },
    {
      fieldManager: 'bench-author',
      resource: { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
    },
  );
  const writes = benchKinds.flatMap((kind) => Array.from({ length: N }, (_, i) => ({ kind, i })));
  for (const [manager, body] of [
    ['bench-author', (o: ReturnType<(typeof benchKinds)[number]['object']>) => o],
    ['bench-auditor', secondManagerPatch],
  ] as const) {
    await pool(writes.length, CONCURRENCY, async (w) => {
      const { kind, i } = writes[w]!;
      await applyObject(api, body(kind.object(i)), { fieldManager: manager, resource: kind.resource });
    });
  }
}

async function main(): Promise<void> {
  const binary = clientGoBinary();
  await withBenchCluster('memory', async (cluster, kc: KubeConfig) => {
    const api = new KubeClient(kc, { qps: 0 });
    const created = performance.now();
    await createObjects(api);
    console.log(
      `bench/memory${smoke ? ' (smoke)' : ''}: ${N} of each of ${benchKinds.map((k) => k.name).join(', ')} (${N * benchKinds.length} objects, two field managers each) in ${((performance.now() - created) / 1000).toFixed(1)} s`,
    );
    const targets: CacheTarget[] = benchKinds.map(({ resource }) => ({
      resource,
      ...(resource.namespaced ? { namespace: NAMESPACE } : {}),
    }));
    const runs: Record<'ours' | 'clientGo' | 'clientGoStripped', CacheMemory[]> = {
      ours: [],
      clientGo: [],
      clientGoStripped: [],
    };
    for (let round = 0; round < ROUNDS; round++) {
      runs.ours.push(await measureOurCache(cluster.kubeconfigPath, targets, SYNC_BOUND_MS));
      const options = { boundMs: SYNC_BOUND_MS };
      runs.clientGo.push(
        await measureClientGo(binary, cluster.kubeconfigPath, targets, {
          ...options,
          stripManagedFields: false,
        }),
      );
      runs.clientGoStripped.push(
        await measureClientGo(binary, cluster.kubeconfigPath, targets, {
          ...options,
          stripManagedFields: true,
        }),
      );
    }
    api.close();
    const objects = N * benchKinds.length;
    for (const [name, memories] of Object.entries(runs)) {
      const wrong = memories.find((m) => m.objects !== objects);
      if (wrong) throw new Error(`${name} cached ${wrong.objects} objects, not ${objects}`);
      const perObject = memories.map(bytesPerObject);
      console.log(
        `  ${name}: ${median(perObject).toFixed(0)} B per object (median of ${memories.length}, spread ${spread(perObject)}), RSS before ${(median(memories.map((m) => m.rssBeforeBytes)) / 2 ** 20).toFixed(1)} MiB`,
      );
    }
    const ours = median(runs.ours.map(bytesPerObject));
    const clientGo = median(runs.clientGo.map(bytesPerObject));
    const clientGoStripped = median(runs.clientGoStripped.map(bytesPerObject));
    reportFigure({
      name: `resident memory per cached object, our informers (${objects} objects)`,
      value: ours,
      unit: 'B',
      baseline: { name: 'client-go informer, managedFields kept (its default)', value: clientGo, unit: 'B' },
      ratio: ours / clientGo,
      goal: '<= 1.5x',
    });
    reportFigure({
      name: 'resident memory per cached object, our informers, against the same content in client-go',
      value: ours,
      unit: 'B',
      baseline: {
        name: 'client-go informer, managedFields stripped by a TransformFunc',
        value: clientGoStripped,
        unit: 'B',
      },
      ratio: ours / clientGoStripped,
      goal: '<= 1.5x',
    });
  });
}

await main();
