import { reportPeakRss } from '../memory/measure.ts';
import { quantile, reportFigure } from '../support.ts';
import type { LiveSync, Propagation } from './phases.ts';
import { C, L, N, REST_MS, RUNTIME } from './setting.ts';

/** What the sync benchmark measured, as figures beside their baselines. */
export interface Measured {
  readonly direct: { readonly ms: number; readonly apiserverCpuMs: number };
  readonly live: LiveSync;
  readonly propagation: Propagation;
  readonly cold: { readonly ms: number; readonly readyMs: number; readonly syncerCpuMs: number };
}

const IDENTITIES: Record<string, string> = {
  syncer: 'its own ServiceAccount in its namespace (as in the operator)',
  platform: "one platform ServiceAccount allowed everywhere (the operator's, before)",
  admin: 'the cluster admin',
};

export function report({ direct, live, propagation, cold }: Measured): void {
  const objects = 2 * N;
  console.log(
    `sync benchmark: N=${N} Services + N Endpoints (${objects} host objects), concurrency ${C}, syncer from ${RUNTIME === 'tsx' ? 'the sources (tsx)' : 'dist/ (compiled)'}`,
  );
  console.log(`  the syncer acts on the host as ${IDENTITIES[process.env.BENCH_SYNC_HOST ?? 'syncer']}`);
  const directWrites = { name: 'direct host writes', value: direct.ms / 1000, unit: 's' };
  reportFigure({
    name: `live sync of ${objects} objects (includes the ${objects} virtual writes)`,
    value: live.ms / 1000,
    unit: 's',
    baseline: directWrites,
    ratio: live.ms / direct.ms,
    goal: '<= 1.5x',
  });
  reportFigure({
    name: `cold sync of ${objects} objects (process start to all written; ready after ${(cold.readyMs / 1000).toFixed(2)} s)`,
    value: cold.ms / 1000,
    unit: 's',
    baseline: directWrites,
    ratio: cold.ms / direct.ms,
    goal: '<= 1.3x',
  });
  reportPropagation(propagation);
  reportCosts({ direct, live, cold }, objects);
}

function reportPropagation({ synced, direct, floor }: Propagation): void {
  for (const [label, q] of [
    ['p50', 0.5],
    ['p99', 0.99],
  ] as const) {
    reportFigure({
      name: `Endpoints change propagation ${label} (virtual write -> host watch, ${L} changes)`,
      value: quantile(synced, q),
      unit: 'ms',
      baseline: { name: 'direct host write -> watch', value: quantile(direct, q), unit: 'ms' },
      ratio: quantile(synced, q) / quantile(direct, q),
      ...(label === 'p99' ? { goal: '<= 1.5x' } : {}),
    });
    reportFigure({
      name: `Endpoints change propagation ${label}, against the floor of any syncer`,
      value: quantile(synced, q),
      unit: 'ms',
      baseline: {
        name: 'a virtual write seen by a watch, then a host write seen by a watch (bare client)',
        value: quantile(floor, q),
        unit: 'ms',
      },
      ratio: quantile(synced, q) / quantile(floor, q),
    });
  }
}

/** CPU per object, host writes, memory. */
function reportCosts({ direct, live, cold }: Omit<Measured, 'propagation'>, objects: number): void {
  const perObject = (ms: number) => ms / objects;
  reportFigure({
    name: 'host apiserver CPU per object, live sync',
    value: perObject(live.cpu.host),
    unit: 'ms/object',
    baseline: {
      name: 'per object written directly',
      value: perObject(direct.apiserverCpuMs),
      unit: 'ms/object',
    },
    ratio: live.cpu.host / direct.apiserverCpuMs,
  });
  reportFigure({
    name: 'syncer CPU per synced object, live sync',
    value: perObject(live.cpu.syncer),
    unit: 'ms/object',
  });
  reportFigure({
    name: 'syncer CPU per synced object, cold sync (start included)',
    value: perObject(cold.syncerCpuMs),
    unit: 'ms/object',
  });
  reportFigure({
    name: "virtual apiserver CPU per object, live sync (its 2N writes and the syncer's reads)",
    value: perObject(live.cpu.virtual),
    unit: 'ms/object',
  });
  reportFigure({
    name: 'host writes by the syncer',
    value: live.writes,
    unit: 'writes',
    baseline: { name: 'the floor (2N)', value: objects, unit: 'writes' },
    ratio: live.writes / objects,
    goal: '1x',
  });
  reportFigure({
    name: `host writes at rest (${REST_MS / 1000} s after the sync)`,
    value: live.restWrites,
    unit: 'writes',
    goal: '0',
  });
  reportPeakRss('syncer peak RSS (live run)', live.peakRssMiB, live.clientGo);
}
