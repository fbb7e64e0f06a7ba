import { benchMode, type PlatformRuntime, platformEntry } from '../support.ts';

/**
 * The sync benchmark's sizes and where its syncers run from: `run.sh [N=2000] [C=32] [L=200]`
 * (`BENCH_SMOKE=1`: N=60, C=8, L=10).
 */

export const smoke = benchMode() === 'smoke';
/** Virtual Services, each with its Endpoints. */
export const N = Number(process.argv[2] ?? (smoke ? 60 : 2000));
/** Writes in flight at once, in every phase. */
export const C = Number(process.argv[3] ?? (smoke ? 8 : 32));
/** Changes whose propagation is timed. */
export const L = Number(process.argv[4] ?? (smoke ? 10 : 200));
/** The virtual cluster's name (the host objects' managed-by label). */
export const VC = 'bench-vc';
/** No wait of this benchmark lasts longer (it fails instead). */
export const WAIT_LIMIT_MS = 10 * 60_000;
/** How long the host is watched for writes at rest after the live sync. */
export const REST_MS = smoke ? 1000 : 5000;
export const RUNTIME: PlatformRuntime =
  (process.env.SYNC_BENCH_RUNTIME ?? (smoke ? 'tsx' : 'dist')) === 'tsx' ? 'tsx' : 'dist';
/** The `platform` entry the syncers run from (compiled first for `dist`). */
export const ENTRY = platformEntry(RUNTIME);
