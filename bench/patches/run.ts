// Benchmark: objects patched per second, the way the syncer patches them: per object, a fresh
// copy of the translated object (translation makes one), then every patch of its list over it
// (all expressions of the object in one call into the isolated-vm sandbox); the result is the
// object that is written. Baseline in the same run: goja, the reference product's engine, doing
// per object what the reference's syncer does around it (its typed object becomes an
// unstructured map and back, stood in for by decoding and encoding JSON; each patch's path
// walked, the expression called on each match, the results written back). See goja/main.go.
// node:vm (no isolation at all) is printed as an upper bound.
// Run: bench/patches/run.sh   (BENCH_SMOKE=1: a short run of each case)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import vm from 'node:vm';
import type { PatchConfig } from '../../src/sync/config.ts';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { applyPatches } from '../../src/sync/patches/apply.ts';
import { expressionFunctionSource } from '../../src/sync/patches/expression.ts';
import { cloneJson, type JsonObject } from '../../src/sync/patches/merge-patch.ts';
import type {
  Evaluation,
  EvaluationObjects,
  EvaluationResult,
  Sandbox,
} from '../../src/sync/patches/sandbox.ts';
import { createSandbox } from '../../src/sync/sync.ts';
import { benchMode, reportFigure } from '../support.ts';

interface Case {
  name: string;
  /** The translated host object the patches run over. */
  object: JsonObject;
  patches: { path: string; expression: string }[];
}

const service: JsonObject = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: {
    name: 'web-x-shop-x-vc',
    namespace: 'vc-ns',
    labels: { app: 'web', 'vcluster.platform/managed-by': 'vc', 'vcluster.platform/namespace': 'shop' },
    annotations: {
      'example.com/owner': 'payments',
      'vcluster.platform/object-name': 'web',
      'vcluster.platform/object-namespace': 'shop',
      'vcluster.platform/object-kind': '/v1, Kind=Service',
    },
  },
  spec: {
    ports: [
      { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
      { name: 'metrics', port: 9090, protocol: 'TCP' },
    ],
    selector: { app: 'web', 'vcluster.platform/managed-by': 'vc', 'vcluster.platform/namespace': 'shop' },
    type: 'ClusterIP',
  },
};

const endpoints = (addresses: number): JsonObject => ({
  apiVersion: 'v1',
  kind: 'Endpoints',
  metadata: {
    name: 'db-x-shop-x-vc',
    namespace: 'vc-ns',
    labels: { app: 'db', 'vcluster.platform/managed-by': 'vc', 'vcluster.platform/namespace': 'shop' },
    annotations: { 'vcluster.platform/object-name': 'db', 'vcluster.platform/object-namespace': 'shop' },
  },
  subsets: [
    {
      addresses: Array.from({ length: addresses }, (_, i) => ({
        ip: `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}`,
        nodeName: `node-${i % 3}`,
        targetRef: { kind: 'Pod', name: `db-${i}-x-shop-x-vc`, namespace: 'vc-ns' },
      })),
      ports: [
        { name: 'pg', port: 5432, protocol: 'TCP' },
        { name: 'metrics', port: 9187, protocol: 'TCP' },
      ],
    },
  ],
});

const cases: Case[] = [
  {
    name: 'string',
    object: service,
    patches: [
      {
        path: 'metadata.annotations["example.com/owner"]',
        expression: 'value + "-x-" + context.vcluster.name',
      },
    ],
  },
  {
    name: 'object',
    object: endpoints(1),
    patches: [
      {
        path: 'subsets[0]',
        expression:
          '({ ...value, addresses: value.addresses.map((a) => ({ ...a, hostname: a.ip.split(".").reverse().join(".") })), ports: value.ports.map((p) => ({ ...p, port: p.port + 1 })) })',
      },
    ],
  },
  {
    name: '5 patches on one object',
    object: service,
    patches: [
      { path: 'metadata.annotations["example.com/owner"]', expression: '"team-" + value' },
      { path: 'metadata.labels.app', expression: 'value + "-" + context.vcluster.name' },
      { path: 'spec.ports[*].name', expression: '"tenant-" + value' },
      { path: 'spec.ports[*].port', expression: 'value + 10000' },
      { path: 'spec.type', expression: 'value === "LoadBalancer" ? "NodePort" : value' },
    ],
  },
  {
    name: '[*] over 20 elements',
    object: endpoints(20),
    patches: [{ path: 'subsets[*].addresses[*].ip', expression: 'value.split(".").reverse().join(".")' }],
  },
];

const smoke = benchMode() === 'smoke';
const DURATION_MS = smoke ? 100 : 1000;
/** Rounds of goja, then ours: the machine's load changes over a run; medians of the rounds. */
const ROUNDS = smoke ? 1 : 3;

/** Objects per second, and how many objects were patched in all (warm-up included). */
function measure(one: () => void): { rate: number; objects: number } {
  const warmup = smoke ? 20 : 500;
  for (let i = 0; i < warmup; i++) one();
  let ops = 0;
  const start = performance.now();
  while (performance.now() - start < DURATION_MS) {
    for (let i = 0; i < 20; i++) one();
    ops += 20;
  }
  return { rate: ops / ((performance.now() - start) / 1000), objects: warmup + ops };
}

/** The same evaluations in node:vm: no isolation, no limits; the upper bound. */
class NodeVmEvaluator {
  private readonly context = vm.createContext({});
  private readonly compiled = new Map<string, (...args: unknown[]) => unknown>();
  evaluateAll(evaluations: readonly Evaluation[], objects: EvaluationObjects): EvaluationResult[] {
    return evaluations.map((e) => {
      let fn = this.compiled.get(e.expression);
      if (!fn) {
        fn = vm.runInContext(expressionFunctionSource(e.expression), this.context) as (
          ...args: unknown[]
        ) => unknown;
        this.compiled.set(e.expression, fn);
      }
      const context = {
        vcluster: { name: 'vc', namespace: 'vc-ns' },
        hostObject: objects.hostJson === null ? null : JSON.parse(objects.hostJson),
        virtualObject: null,
        path: e.path,
      };
      const json = JSON.stringify(fn(structuredClone(e.value), true, context));
      const value = json === undefined ? null : JSON.parse(json);
      return value === null ? { removed: true } : { removed: false, value };
    });
  }
}

const ctx = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') };
const sandbox = createSandbox(ctx, { cpuBudget: { budgetMs: Number.POSITIVE_INFINITY, windowMs: 1000 } });
const nodeVm = new NodeVmEvaluator();

/** One object through the patch engine, as the syncer's create path runs it. */
function patchOnce(c: Case, engine: Sandbox): void {
  const document = cloneJson(c.object);
  applyPatches({
    direction: 'toHost',
    listName: 'sync.toHost.services.patches',
    patches: c.patches as PatchConfig[],
    ctx,
    sandbox: engine,
    document,
    isMergePatch: false,
    hostObject: document,
    virtualObject: null,
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const gojaDir = mkdtempSync(join(tmpdir(), 'platform-bench-goja-'));
try {
  const gojaBinary = join(gojaDir, 'goja-bench');
  execFileSync('go', ['build', '-o', gojaBinary, '.'], {
    cwd: join(import.meta.dirname, 'goja'),
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 10 * 60_000,
  });
  const figures = new Map(
    cases.map((c) => [
      c.name,
      { goja: [] as number[], ours: [] as number[], upper: [] as number[], calls: 0 },
    ]),
  );
  for (let round = 0; round < ROUNDS; round++) {
    const goja = JSON.parse(
      execFileSync(gojaBinary, [], {
        input: JSON.stringify({ durationMs: DURATION_MS, cases }),
        encoding: 'utf8',
        stdio: ['pipe', 'pipe', 'inherit'],
        timeout: 5 * 60_000,
      }),
    ) as Record<string, number>;
    for (const c of cases) {
      const f = figures.get(c.name)!;
      f.goja.push(goja[c.name] ?? Number.NaN);
      const callsBefore = sandbox.callsMade;
      const { rate, objects } = measure(() => patchOnce(c, sandbox));
      f.ours.push(rate);
      f.calls = (sandbox.callsMade - callsBefore) / objects;
      f.upper.push(measure(() => patchOnce(c, nodeVm as unknown as Sandbox)).rate);
    }
  }
  console.log(
    `patched objects per second, per object as the syncer patches them (${DURATION_MS} ms per case, median of ${ROUNDS} rounds, ${process.version})`,
  );
  for (const c of cases) {
    const f = figures.get(c.name)!;
    const ours = median(f.ours);
    const baseline = median(f.goja);
    reportFigure({
      name: `patched objects/s, ${c.name} (isolated-vm sandbox)`,
      value: ours,
      unit: 'objects/s',
      baseline: { name: 'goja', value: baseline, unit: 'objects/s' },
      ratio: ours / baseline,
      goal: '>= 1x',
    });
    console.log(
      `    rounds: ours ${f.ours.map(Math.round).join(' / ')}, goja ${f.goja.map(Math.round).join(' / ')}; node:vm without isolation ${Math.round(median(f.upper))}; calls into the sandbox per object: ${f.calls.toFixed(2)}`,
    );
  }
} finally {
  sandbox.dispose();
  rmSync(gojaDir, { recursive: true, force: true });
}
