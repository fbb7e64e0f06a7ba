import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ResourceRef } from '../../src/runtime/kube-client.ts';
import { reportFigure, within } from '../support.ts';

/**
 * Resident memory of a cache, measured in a child process of its own: ours (bench/memory/our-cache.ts,
 * the runtime's informers) or client-go's (bench/memory/clientgo, built from Go modules and cached
 * under .cache/). bench/memory compares the two; bench/projection and bench/sync take client-go's
 * figure per object as the baseline of their processes' peak RSS.
 */

/** What a cache holds: one resource, in one namespace or all, optionally by label. */
export interface CacheTarget {
  readonly resource: ResourceRef;
  readonly namespace?: string;
  readonly labelSelector?: string;
}

export interface CacheMemory {
  readonly objects: number;
  /** Resident bytes after a forced collection, before the informers started. */
  readonly rssBeforeBytes: number;
  /** Resident bytes after a forced collection, once every cache synced. */
  readonly rssAfterBytes: number;
}

export const bytesPerObject = (m: CacheMemory): number => (m.rssAfterBytes - m.rssBeforeBytes) / m.objects;

const HERE = import.meta.dirname;
const REPO = join(HERE, '..', '..');

/** The client-go program's path, built on first use (seconds from a warm module cache). */
export function clientGoBinary(): string {
  const out = execFileSync('bash', [join(HERE, 'clientgo', 'build.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 15 * 60_000,
  });
  const binary = out.trim().split('\n').pop();
  if (!binary) throw new Error('bench/memory/clientgo/build.sh printed no binary');
  return binary;
}

/** Our informers' memory for `targets` (a child: node --expose-gc). */
export function measureOurCache(kubeconfig: string, targets: readonly CacheTarget[], boundMs: number) {
  return runMeasurer(
    'our informers',
    process.execPath,
    [
      '--expose-gc',
      '--import',
      'tsx',
      join(HERE, 'our-cache.ts'),
      kubeconfig,
      String(boundMs),
      ...targets.map((target) => JSON.stringify(target)),
    ],
    boundMs,
  );
}

/** A client-go informer's memory for `targets`, keeping managedFields or not (a TransformFunc). */
export function measureClientGo(
  binary: string,
  kubeconfig: string,
  targets: readonly CacheTarget[],
  options: { stripManagedFields: boolean; boundMs: number },
) {
  const spec = ({ resource, namespace, labelSelector }: CacheTarget) =>
    `${resource.group}/${resource.version}/${resource.plural}${namespace ? `@${namespace}` : ''}${labelSelector ? `?${labelSelector}` : ''}`;
  return runMeasurer(
    options.stripManagedFields ? 'client-go (managedFields stripped)' : 'client-go',
    binary,
    [
      '--kubeconfig',
      kubeconfig,
      `--timeout=${options.boundMs}ms`,
      ...(options.stripManagedFields ? ['--strip-managed-fields'] : []),
      ...targets.map(spec),
    ],
    options.boundMs,
  );
}

/** Runs a measuring child to its end; its death or a failure fails at once, a hang past the bound too. */
async function runMeasurer(
  what: string,
  command: string,
  args: string[],
  boundMs: number,
): Promise<CacheMemory> {
  const child = spawn(command, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
  // The child's own bound ends it first; this one (with slack for its start) catches a hang of the child itself.
  const code = await within(exited, what, { boundMs: boundMs + 60_000 }).finally(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  if (code !== 0) throw new Error(`${what} exited with ${code}: ${stderr.trim()}`);
  const memory = JSON.parse(stdout.trim().split('\n').pop() ?? '') as CacheMemory;
  if (!(memory.objects > 0)) throw new Error(`${what} cached no object`);
  return memory;
}

/** The caches of one apiserver a process holds, for {@link clientGoCost}. */
export interface ApiserverCaches {
  readonly kubeconfig: string;
  readonly targets: readonly CacheTarget[];
}

/** What client-go spends on some caches: their objects and the resident memory they add. */
export interface ClientGoCost {
  readonly objects: number;
  readonly bytes: number;
}

/** client-go's cost of the same caches as a process of ours, measured now (managedFields stripped, as ours are). */
export async function clientGoCost(
  caches: readonly ApiserverCaches[],
  boundMs: number,
): Promise<ClientGoCost> {
  const binary = clientGoBinary();
  let objects = 0;
  let bytes = 0;
  for (const { kubeconfig, targets } of caches) {
    const memory = await measureClientGo(binary, kubeconfig, targets, { stripManagedFields: true, boundMs });
    objects += memory.objects;
    bytes += memory.rssAfterBytes - memory.rssBeforeBytes;
  }
  return { objects, bytes };
}

/**
 * Prints a process's peak RSS beside what client-go spends on the objects it caches: their count
 * times client-go's resident bytes per object over the same caches in the same run. The
 * process's own base (runtime, code, buffers) is in its figure only.
 */
export function reportPeakRss(name: string, peakMiB: number, clientGo: ClientGoCost): void {
  const baselineMiB = clientGo.bytes / 2 ** 20;
  reportFigure({
    name,
    value: peakMiB,
    unit: 'MiB',
    baseline: {
      name: `client-go caching the same ${clientGo.objects} objects (${(clientGo.bytes / clientGo.objects).toFixed(0)} B per object)`,
      value: baselineMiB,
      unit: 'MiB',
    },
    ratio: peakMiB / baselineMiB,
  });
}
