/**
 * Access proxy throughput (issue 26). In one run: the platform's apiserver (the host, holding the
 * platform's objects) and a second apiserver on the same etcd, the target, connected as the
 * Cluster `target` whose credentials Secret holds the token of a ServiceAccount that may only
 * impersonate (the one ClusterRole and binding docs/access-proxy.md installs). The impersonated
 * person may read ConfigMaps there. At the same concurrency:
 *   direct: GET (one ConfigMap) and LIST (a namespace of N ConfigMaps) straight to the target with
 *           the platform's token and the very impersonation headers the proxy sends for the key
 *           (what the proxy's requests cost the target, without the proxy);
 *   proxy:  the same through `/kubernetes/cluster/target/...` of `platform gateway` with the key.
 * Watch events: CONNECTIONS watchers at once, each opening watch after watch of a namespace of E
 * ConfigMaps (a watch without a resourceVersion starts with one ADDED event per object), for
 * SECONDS: events delivered per second, direct and through the proxy.
 * Held watches: W watches held through the proxy at once (by W/50 people: the gateway holds at
 * most 64 per identity), each proved live by an event; the proxy's resident memory per watch beside
 * the target kube-apiserver's for the same watches.
 *
 * The gateway is `platform gateway` in a process of its own, compiled to dist/ (the smoke form runs
 * the sources through tsx), on a CPU of its own as bench/gateway runs it (`GATEWAY_CPUS`,
 * `PLATFORM_CPUS`, `GATEWAY_NODE_OPTIONS` as there). The load generator is autocannon.
 *
 * Figures (reportFigure): GET and LIST through the proxy ÷ direct (goal >= 0.9); watch events
 * through the proxy ÷ direct; the proxy's CPU per GET beside the target's; memory per held watch.
 *
 *   bench/proxy/run.sh [SECONDS=10] [CONNECTIONS=16] [N=50] [WATCHES=1000] [E=200]
 *   (BENCH_SMOKE=1: 2 s, 4, 5, 50, 20)
 */

import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { Agent } from 'undici';
import { prepareTarget } from '../../e2e/support/proxy-targets.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { collectGarbage } from '../inspector-gc.ts';
import {
  autocannonHeaders,
  type BenchKey,
  bearer,
  checkLoad,
  createBenchKey,
  ensurePepper,
  failures,
  GATEWAY_CPUS,
  type GatewayProcess,
  GROUP,
  type Headers,
  type Impersonation,
  load,
  loadSizes,
  type Measured,
  measuredGateway,
  PLATFORM_NAMESPACE,
  pinPlatform,
  placement,
  reportCpuFigure,
  rps,
  runLine,
  START_BOUND_MS,
} from '../platform-gateway.ts';
import { benchMode, reportFigure, runBench, withBenchCluster } from '../support.ts';
import { eventRate, holdWatches } from './watches.ts';

const SIZES = loadSizes();
const smoke = benchMode() === 'smoke';
const WATCHES = Number(process.argv[5] ?? (smoke ? 50 : 1000));
const E = Number(process.argv[6] ?? (smoke ? 20 : 200));
/** People holding the watches: the gateway's default limit is 64 concurrent watches per identity. */
const WATCHES_PER_PERSON = 50;
const CLUSTER = 'target';

/** The target's side: what the impersonated people may read, and the objects they read. */
async function prepareObjects(target: Cluster): Promise<void> {
  const api = new KubeClient(kubeConfigOf(target));
  try {
    await api.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    await api.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        metadata: { name: 'configmap-readers' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'configmap-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:authenticated' }],
      },
    });
    for (const [namespace, count] of [
      ['bench', SIZES.n],
      ['events', E],
      ['held', 0],
    ] as const) {
      await api.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: namespace } },
      });
      for (let i = 0; i < count; i++)
        await api.request({
          method: 'POST',
          path: `/api/v1/namespaces/${namespace}/configmaps`,
          body: { metadata: { name: `config-${i}` }, data: { value: randomBytes(64).toString('hex') } },
        });
    }
  } finally {
    api.close();
  }
}

function kubeConfigOf(cluster: Cluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  return kc;
}

/** The platform's side: the Cluster with its credentials Secret, and the people's keys. */
async function preparePlatform(
  kc: KubeConfig,
  target: Cluster,
  token: string,
  people: number,
): Promise<BenchKey[]> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
  await core.createNamespacedSecret({
    namespace: PLATFORM_NAMESPACE,
    body: { metadata: { name: `${CLUSTER}-credentials` }, stringData: { token } },
  });
  await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: GROUP,
    version: 'v1',
    plural: 'clusters',
    body: {
      apiVersion: `${GROUP}/v1`,
      kind: 'Cluster',
      metadata: { name: CLUSTER },
      spec: {
        endpoint: target.server,
        caData: Buffer.from(target.caPem).toString('base64'),
        credentialsSecretRef: { name: `${CLUSTER}-credentials`, namespace: PLATFORM_NAMESPACE },
      },
    },
  });
  const pepper = await ensurePepper(kc);
  const keys: BenchKey[] = [];
  for (let i = 0; i < people; i++) keys.push(await createBenchKey(kc, pepper, `person-${i}`));
  return keys;
}

function rows(name: string, direct: Measured, proxied: Measured): string {
  return [
    name,
    runLine('direct impersonated', direct),
    `${runLine('access proxy', proxied)}  ratio ${(rps(proxied.result) / rps(direct.result)).toFixed(2)} (goal >= 0.90)  added latency p50 ${(proxied.result.latency.p50 - direct.result.latency.p50).toFixed(1)} ms, p99 ${(proxied.result.latency.p99 - direct.result.latency.p99).toFixed(1)} ms  (non-2xx/errors: ${failures(direct.result, proxied.result)})`,
  ].join('\n');
}

interface Run {
  readonly target: Cluster;
  readonly gateway: GatewayProcess;
  /** The target's URL as the proxy serves it, and straight. */
  readonly proxied: string;
  readonly direct: string;
  /**
   * The headers of person i through the proxy, and straight to the target as the proxy sends them
   * (`straightForAutocannon`: repeated headers as autocannon writes them).
   */
  readonly viaProxy: (i: number) => Headers;
  readonly straight: (i: number) => Impersonation;
  readonly straightForAutocannon: (i: number) => Headers;
  readonly processes: Record<string, number | undefined>;
}

/** GET and LIST, direct and through the proxy, with their figures. */
async function requestThroughput(run: Run): Promise<void> {
  const options = { seconds: SIZES.seconds, connections: SIZES.connections, processes: run.processes };
  const path = '/api/v1/namespaces/bench/configmaps';
  // Warm both paths up (connections, JIT, the apiserver's caches) before measuring.
  for (const base of [run.direct, run.proxied])
    await load(
      `${base}${path}/config-0`,
      base === run.direct ? run.straightForAutocannon(0) : run.viaProxy(0),
      {
        ...options,
        seconds: SIZES.warmUpSeconds,
      },
    );
  for (const [name, url] of [
    ['GET', `${path}/config-0`],
    ['LIST', path],
  ] as const) {
    const direct = await load(`${run.direct}${url}`, run.straightForAutocannon(0), options);
    const proxied = await load(`${run.proxied}${url}`, run.viaProxy(0), options);
    console.log(rows(name, direct, proxied));
    checkLoad(name, [{ what: 'the gateway process', child: run.gateway.child }], direct, proxied);
    reportFigure({
      name: `${name} through the access proxy${GATEWAY_CPUS ? ' (gateway on a CPU of its own)' : ''}`,
      value: rps(proxied.result),
      unit: 'req/s',
      baseline: { name: 'direct to the target, impersonated', value: rps(direct.result), unit: 'req/s' },
      ratio: rps(proxied.result) / rps(direct.result),
      goal: '>= 0.9',
    });
    reportCpuFigure(`access proxy CPU per proxied ${name}`, name, proxied, 'gateway');
  }
}

/** Watch events delivered per second, direct and through the proxy. */
async function watchThroughput(run: Run, dispatchers: { direct: Agent; proxy: Agent }): Promise<void> {
  const path = '/api/v1/namespaces/events/configmaps?watch=1';
  const bound = { boundMs: START_BOUND_MS, child: run.gateway.child };
  const options = { expected: E, seconds: SIZES.seconds, connections: SIZES.connections, bound };
  const direct = await eventRate(`${run.direct}${path}`, run.straight(0), {
    ...options,
    dispatcher: dispatchers.direct,
  });
  const proxied = await eventRate(`${run.proxied}${path}`, run.viaProxy(0), {
    ...options,
    dispatcher: dispatchers.proxy,
  });
  console.log(
    `watch events (${SIZES.connections} watchers, ${E} events per watch)\n  direct impersonated  ${direct.eventsPerSecond.toFixed(0).padStart(6)} events/s (${direct.watches} watches)\n  access proxy         ${proxied.eventsPerSecond.toFixed(0).padStart(6)} events/s (${proxied.watches} watches)`,
  );
  reportFigure({
    name: 'watch events through the access proxy',
    value: proxied.eventsPerSecond,
    unit: 'events/s',
    baseline: { name: 'direct to the target, impersonated', value: direct.eventsPerSecond, unit: 'events/s' },
    ratio: proxied.eventsPerSecond / direct.eventsPerSecond,
  });
}

function inspectPortOf(gateway: GatewayProcess): number {
  if (gateway.inspectPort === undefined) throw new Error('the gateway was started without its inspector');
  return gateway.inspectPort;
}

/** WATCHES watches held through the proxy at once; its memory per watch beside the target's. */
async function heldWatches(run: Run, dispatcher: Agent): Promise<void> {
  const api = new KubeClient(kubeConfigOf(run.target));
  try {
    const held = await holdWatches(
      `${run.proxied}/api/v1/namespaces/held/configmaps?watch=1`,
      (i) => run.viaProxy(Math.floor(i / WATCHES_PER_PERSON)),
      {
        count: WATCHES,
        concurrency: 50,
        dispatcher,
        processes: { gateway: run.gateway.pid, apiserver: run.target.apiServer.pid },
        touch: async () => {
          await api.request({
            method: 'POST',
            path: '/api/v1/namespaces/held/configmaps',
            body: { metadata: { name: 'touched' } },
          });
        },
        // The gateway's heap collected before each reading; the apiserver (Go) collects as it goes.
        collect: () =>
          collectGarbage(inspectPortOf(run.gateway), { boundMs: START_BOUND_MS, child: run.gateway.child }),
        bound: { boundMs: START_BOUND_MS, child: run.gateway.child },
      },
    );
    await held.close();
    const [proxy, apiserver] = [
      held.bytesPerWatch.gateway ?? Number.NaN,
      held.bytesPerWatch.apiserver ?? Number.NaN,
    ];
    console.log(
      `${WATCHES} watches held through the access proxy, each live: resident memory per watch ${(proxy / 1024).toFixed(1)} KiB in the gateway, ${(apiserver / 1024).toFixed(1)} KiB in the target kube-apiserver`,
    );
    reportFigure({
      name: `access proxy memory per held watch (${WATCHES} watches)`,
      value: proxy / 1024,
      unit: 'KiB',
      baseline: {
        name: 'target kube-apiserver memory per the same watch',
        value: apiserver / 1024,
        unit: 'KiB',
      },
      ratio: proxy / apiserver,
    });
  } finally {
    api.close();
  }
}

async function main(): Promise<void> {
  pinPlatform();
  await withBenchCluster('proxy', async (host, kc, plane) => {
    const target = await plane.startCluster({ name: CLUSTER });
    const token = await prepareTarget(target);
    await prepareObjects(target);
    const keys = await preparePlatform(
      kc,
      target,
      token,
      Math.max(1, Math.ceil(WATCHES / WATCHES_PER_PERSON)),
    );
    const keyOf = (i: number) => keys[i] ?? keys[0]!;
    const proxied = (gatewayUrl: string) => `${gatewayUrl}/kubernetes/cluster/${CLUSTER}`;
    const gateway = await measuredGateway(SIZES.runtime, host.kubeconfigPath, (url) => ({
      what: 'the access proxy to answer the key',
      url: `${proxied(url)}/api/v1/namespaces/bench/configmaps/config-0`,
      headers: bearer(keyOf(0).token),
    }));
    // HTTP/1.1 both ways, as the proxy speaks to its targets (undici's HTTP/2 also joins repeated
    // headers such as Impersonate-Group into one).
    const dispatchers = {
      direct: new Agent({ connect: { ca: target.caPem }, bodyTimeout: 0, allowH2: false }),
      proxy: new Agent({ bodyTimeout: 0, allowH2: false }),
    };
    const run: Run = {
      target,
      gateway,
      proxied: proxied(gateway.url),
      direct: target.server,
      viaProxy: (i) => bearer(keyOf(i).token),
      straight: (i) => ({ ...bearer(token), ...keyOf(i).impersonation }),
      straightForAutocannon: (i) => ({ ...bearer(token), ...autocannonHeaders(keyOf(i).impersonation) }),
      processes: {
        apiserver: target.apiServer.pid,
        gateway: gateway.pid,
        host: host.apiServer.pid,
        autocannon: process.pid,
      },
    };
    try {
      console.log(
        `access proxy benchmark: ${SIZES.seconds}s per run, ${SIZES.connections} connections, LIST of ${SIZES.n} ConfigMaps, watches of ${E} events, ${WATCHES} held watches; ${placement(SIZES.runtime, 'both apiservers, etcd and load generator')}`,
      );
      await heldWatches(run, dispatchers.proxy);
      await requestThroughput(run);
      await watchThroughput(run, dispatchers);
    } finally {
      await gateway.stop();
      await Promise.all([dispatchers.direct.destroy(), dispatchers.proxy.destroy()]);
    }
  });
}

runBench(main);
