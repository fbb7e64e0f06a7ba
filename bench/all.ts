// `make bench`: every benchmark at full size, one after another (each on a control plane of its
// own), then one table of figure, baseline, ratio and goal. `--smoke` runs the small form that
// `make test` runs. Benchmarks to run may be named: `make bench ARGS="sync gateway"`.
import { benchmarkNames, figureTable, runBenchmark, succeeded } from '../e2e/support/benchmarks.ts';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const named = args.filter((arg) => !arg.startsWith('--'));
const names = named.length > 0 ? named : benchmarkNames();
const timeoutMs = (smoke ? 5 : 45) * 60_000;

const runs = [];
for (const name of names) {
  process.stdout.write(`\n=== bench/${name}${smoke ? ' (smoke)' : ''}\n`);
  const run = await runBenchmark(name, {
    smoke,
    timeoutMs,
    onLine: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(
    `=== bench/${name}: ${succeeded(run) ? 'done' : 'FAILED'} in ${run.seconds.toFixed(0)} s, ${run.figures.length} figures\n`,
  );
  runs.push(run);
}
process.stdout.write(`\n${figureTable(runs)}\n`);
process.exitCode = runs.every(succeeded) ? 0 : 1;
