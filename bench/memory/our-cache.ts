/**
 * The platform's side of bench/memory, run as a child process of its own (node --expose-gc): the
 * informers of one runtime `Cluster`, as the controllers get them (`Cluster.informer`), caching
 * the targets named on the command line (`CacheTarget` as JSON). Prints one JSON line, `{"objects":N,
 * "rssBeforeBytes":B,"rssAfterBytes":A}`: the resident memory after a forced collection before
 * the informers started and after they synced. Indexes are none (as a cache without consumers
 * asking for one keeps), managedFields as `Cluster.informer` keeps them (none).
 *
 *   node --expose-gc --import tsx bench/memory/our-cache.ts KUBECONFIG BOUND_MS TARGET_JSON...
 */
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Cluster } from '../../src/runtime/cluster.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { CacheTarget } from './measure.ts';

const [kubeconfig, boundMs, ...resourceArgs] = process.argv.slice(2);
if (!kubeconfig || !boundMs || resourceArgs.length === 0 || !globalThis.gc)
  throw new Error('usage: node --expose-gc our-cache.ts KUBECONFIG BOUND_MS TARGET_JSON...');
const gc = globalThis.gc;

/**
 * Resident bytes after a last-resort collection: a full one that also shrinks the young
 * generation a burst of allocations (a list) grew, as V8's memory reducer does once a process is
 * idle; the counterpart of Go's debug.FreeOSMemory on the client-go side.
 */
function residentBytes(): number {
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return process.memoryUsage.rss();
}

const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const api = new KubeClient(kc, { qps: 0 });
const cluster = new Cluster({
  name: 'bench',
  api,
  clock: systemClock,
  random: systemRandom,
  logger: pino({ level: 'silent' }),
});
const informers = resourceArgs.map((arg) => {
  const { resource, namespace, labelSelector } = JSON.parse(arg) as CacheTarget;
  return cluster.informer(resource, { namespace, labelSelector });
});
// One request before the first measure, so the connection and its buffers are not counted as cache.
await api.request({ method: 'GET', path: '/version' });
const rssBeforeBytes = residentBytes();
cluster.start();
const synced = await Promise.all(
  informers.map((informer) => informer.waitForSync(AbortSignal.timeout(Number(boundMs)))),
);
if (!synced.every(Boolean))
  throw new Error(`caches not synced within ${boundMs} ms: ${cluster.notSynced().join(', ')}`);
const rssAfterBytes = residentBytes();
const objects = informers.reduce((sum, informer) => sum + informer.store.size, 0);
process.stdout.write(`${JSON.stringify({ objects, rssBeforeBytes, rssAfterBytes })}\n`);
await cluster.stop();
api.close();
