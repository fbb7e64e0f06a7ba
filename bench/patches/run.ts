// Benchmark: expression patches per second in our isolated-vm sandbox, in node:vm (no isolation,
// the upper bound) and in goja (the reference product's engine), same expressions, same run.
// Run: bench/patches/run.sh
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import vm from 'node:vm';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { expressionFunctionSource } from '../../src/sync/patches/expression.ts';
import { createSandbox } from '../../src/sync/sync.ts';

const cases = [
  { name: 'string', expression: 'value + "-x-" + context.vcluster.name', value: 'my-service.default.svc' },
  {
    name: 'object',
    expression:
      '({ ...value, host: value.ip.split(".").reverse().join("."), ports: value.ports.map((p) => p + 1) })',
    value: {
      ip: '10.0.0.1',
      hostname: 'db-0',
      nodeName: 'node-1',
      ports: [80, 443, 8080],
      labels: { app: 'db', tier: 'backend' },
    },
  },
];
const DURATION_MS = 1000;

async function measure(call: () => unknown | Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i++) await call();
  let ops = 0;
  const start = performance.now();
  while (performance.now() - start < DURATION_MS) {
    for (let i = 0; i < 50; i++) await call();
    ops += 50;
  }
  return ops / ((performance.now() - start) / 1000);
}

const ctx = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') };
const sandbox = createSandbox(ctx, { cpuBudget: { budgetMs: Number.POSITIVE_INFINITY, windowMs: 1000 } });
const results: Record<string, { sandbox: number; nodeVm: number; goja: number }> = {};
const gojaDir = join(import.meta.dirname, 'goja');
const goja = JSON.parse(
  execFileSync('go', ['run', '.'], { cwd: gojaDir, input: JSON.stringify(cases), encoding: 'utf8' }),
) as Record<string, number>;

for (const c of cases) {
  const input = { value: c.value, path: 'spec.x', hostObject: null, virtualObject: null };
  const sandboxRate = await measure(() => sandbox.evaluate('bench', c.expression, input));
  const vmContext = vm.createContext({});
  const fn = vm.runInContext(expressionFunctionSource(c.expression), vmContext) as (
    ...a: unknown[]
  ) => unknown;
  const context = {
    vcluster: { name: 'vc', namespace: 'vc-ns' },
    path: 'spec.x',
    hostObject: null,
    virtualObject: null,
  };
  const nodeVmRate = await measure(() =>
    JSON.parse(JSON.stringify(fn(structuredClone(c.value), true, context)) ?? 'null'),
  );
  results[c.name] = { sandbox: sandboxRate, nodeVm: nodeVmRate, goja: goja[c.name] ?? Number.NaN };
}
sandbox.dispose();

const fmt = (n: number) => Math.round(n).toLocaleString('en-US').padStart(12);
console.log(`expression patches per second (${DURATION_MS} ms each, ${process.version}, one core)`);
console.log(
  `${'value'.padEnd(8)}${'isolated-vm'.padStart(12)}${'node:vm'.padStart(12)}${'goja'.padStart(12)}  sandbox/node:vm  sandbox/goja`,
);
for (const [name, r] of Object.entries(results)) {
  console.log(
    `${name.padEnd(8)}${fmt(r.sandbox)}${fmt(r.nodeVm)}${fmt(r.goja)}  ${(r.sandbox / r.nodeVm).toFixed(3).padStart(15)}  ${(r.sandbox / r.goja).toFixed(3).padStart(12)}`,
  );
}
