import fc from 'fast-check';

/**
 * Vitest setup of every project: reruns a fast-check failure. A failing property prints
 * `{ seed: S, path: "P" }`; `FC_SEED=S FC_PATH=P npx vitest run <file> -t '<test name>'` replays
 * exactly that case (FC_PATH applies to the property it came from, hence `-t`). `FC_NUM_RUNS`
 * raises or lowers the runs of every property.
 */
const seed = process.env.FC_SEED;
const path = process.env.FC_PATH;
const numRuns = process.env.FC_NUM_RUNS;
for (const [name, text] of [
  ['FC_SEED', seed],
  ['FC_NUM_RUNS', numRuns],
] as const)
  if (text !== undefined && !Number.isInteger(Number(text)))
    throw new Error(`${name} must be an integer, not "${text}"`);
if (seed !== undefined || numRuns !== undefined) {
  fc.configureGlobal({
    ...fc.readConfigureGlobal(),
    ...(seed !== undefined ? { seed: Number(seed) } : {}),
    ...(path !== undefined ? { path } : {}),
    ...(numRuns !== undefined ? { numRuns: Number(numRuns) } : {}),
  });
}
