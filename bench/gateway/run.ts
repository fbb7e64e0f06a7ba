/**
 * Gateway throughput. In one run, against one apiserver of its own, at the same concurrency:
 *   direct:        GET (one SharedSecret) and LIST (a namespace of N SharedSecrets) straight to
 *                  kube-apiserver with the admin token;
 *   impersonated:  the same, straight to kube-apiserver with the admin token and the very
 *                  impersonation headers the gateway sends for the key (kube-apiserver's own extra
 *                  work for an impersonated request: authorizing the impersonation, then RBAC
 *                  for the impersonated user; the gateway cannot avoid it);
 *   gateway:       the same requests through the management gateway (plain HTTP) with a platform
 *                  admin's access key: authentication, scope check, audit decision, impersonation
 *                  and the proxied call.
 * The gateway is `platform gateway`, the component as the chart runs it, compiled to dist/ as the
 * image installs it (the smoke form runs the sources through tsx), in a process of its own, so it shares
 * its event loop with neither the load generator nor this process. The load generator is
 * autocannon (a worker thread). Prints requests per second for each, the ratios (goal: gateway >=
 * 0.8 x direct; gateway vs impersonated is the gateway's own overhead) and the latency the
 * gateway adds at p50 and p99 over the direct admin call.
 *
 * Figures (reportFigure): GET and LIST through the gateway ÷ direct (goal >= 0.8), and the
 * gateway's CPU per proxied GET ÷ kube-apiserver's CPU for the same GET (goal <= 0.5: on shared
 * CPUs the gateway costs a fraction of the request it forwards).
 *
 *   bench/gateway/run.sh [SECONDS=10] [CONNECTIONS=16] [N=50]   (BENCH_SMOKE=1: 2 s, 4, 5)
 *
 * `GATEWAY_NODE_OPTIONS` adds Node flags to the gateway process (`--cpu-prof --cpu-prof-dir=DIR`
 * to profile it), `BARE_NODE_OPTIONS` to the bare proxy's (its profile beside the gateway's shows
 * what the gateway does more). After the load runs, the pipeline's stages are measured alone
 * (`stages.ts`) and printed beside the gateway's and the bare proxy's CPU per GET.
 *
 * `GATEWAY_CPUS=1` (the default on a machine with two CPUs or more; `GATEWAY_CPUS=none` turns it
 * off), with `PLATFORM_CPUS=0` (the default), runs the gateway on CPUs of its own
 * (Linux `taskset`), as in production, where it runs in pods of its own on other nodes than the
 * apiserver: kube-apiserver, etcd and the load generator share `PLATFORM_CPUS` in every
 * configuration, so the direct figures and the gateway's are limited by the same apiserver budget
 * and the ratio shows what the gateway costs the apiserver, not what it takes from its CPUs.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { BASE_PATH } from '../../src/gateway/index.ts';
import { Upstream } from '../../src/gateway/proxy/upstream.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import {
  autocannonHeaders,
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
  loadSizes,
  load as loadWith,
  type Measured,
  measuredGateway,
  PLATFORM_NAMESPACE,
  pin,
  pinPlatform,
  placement,
  reportCpuFigure,
  rps,
  runLine,
  START_BOUND_MS,
} from '../platform-gateway.ts';
import { reportFigure, runBench, stopChild, waitUntil, withBenchCluster } from '../support.ts';
import { measureStages, type RecordedAnswer, stageRows } from './stages.ts';

const SIZES = loadSizes();
let processes: Record<string, number | undefined> = {};

const load = (url: string, headers: Headers, seconds = SIZES.seconds): Promise<Measured> =>
  loadWith(url, headers, { seconds, connections: SIZES.connections, processes });

function rows(
  name: string,
  directRun: Measured,
  impersonatedRun: Measured,
  bareRun: Measured,
  gatewayRun: Measured,
): string {
  const [direct, impersonated, gateway] = [directRun.result, impersonatedRun.result, gatewayRun.result];
  return [
    `${name}`,
    runLine('direct (admin)', directRun),
    `${runLine('direct impersonated', impersonatedRun)}  ratio to direct ${(rps(impersonated) / rps(direct)).toFixed(2)} (kube-apiserver's impersonation cost)`,
    `${runLine('bare Node proxy', bareRun)}  ratio to impersonated ${(rps(bareRun.result) / rps(impersonated)).toFixed(2)} (the least a Node proxy costs)`,
    `${runLine('gateway', gatewayRun)}  ratio to impersonated ${(rps(gateway) / rps(impersonated)).toFixed(2)} (the gateway's own overhead)`,
    `  goal: gateway ${rps(gateway).toFixed(0)} / direct ${rps(direct).toFixed(0)} req/s = ratio ${(rps(gateway) / rps(direct)).toFixed(2)} (goal >= 0.80)  added latency p50 ${(gateway.latency.p50 - direct.latency.p50).toFixed(1)} ms, p99 ${(gateway.latency.p99 - direct.latency.p99).toFixed(1)} ms  (non-2xx/errors: ${failures(direct, impersonated, bareRun.result, gateway)})`,
  ].join('\n');
}

/** The bare proxy's process: what the benchmark needs of a proxy process, no more. */
type BareProxy = Pick<GatewayProcess, 'child' | 'pid' | 'url' | 'stop'>;

/**
 * The floor: `bare-proxy.mjs` (Node's HTTP server and an undici pool as the gateway's, nothing
 * else) sending every request with the admin token and the key's impersonation headers, in a
 * process of its own on the gateway's CPUs.
 */
async function startBareProxy(
  cluster: Cluster,
  headers: Record<string, string | string[]>,
): Promise<BareProxy> {
  const extra = (process.env.BARE_NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag !== '');
  const script = fileURLToPath(new URL('./bare-proxy.mjs', import.meta.url));
  const child = spawn(process.execPath, [...extra, script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      BARE_UPSTREAM: cluster.server,
      BARE_CA: cluster.caPem,
      BARE_HEADERS: JSON.stringify({ authorization: `Bearer ${cluster.adminToken}`, ...headers }),
    },
  });
  const stop = () => stopChild(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  try {
    await waitUntil('the bare proxy to listen', () => output.includes('\n'), {
      boundMs: START_BOUND_MS,
      child,
      intervalMs: 50,
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { child, pid: child.pid, url: `http://127.0.0.1:${Number.parseInt(output, 10)}`, stop };
}

async function main(): Promise<void> {
  pinPlatform();
  await withBenchCluster('gateway', async (cluster, kc) => {
    await prepare(kc);
    const pepper = await ensurePepper(kc);
    const { token, impersonation } = await createBenchKey(kc, pepper, 'bench', {
      clusterRoles: [{ name: 'platform-admin' }],
    });
    const user = bearer(token);
    const gateway = await measuredGateway(SIZES.runtime, cluster.kubeconfigPath, (url) => ({
      what: 'the gateway to answer the key',
      url: `${url}${BASE_PATH}${SECRETS}/secret-0`,
      headers: user,
    }));
    const bare = await startBareProxy(cluster, impersonation).catch(async (error: unknown) => {
      await gateway.stop();
      throw error;
    });
    if (GATEWAY_CPUS && bare.pid) pin(bare.pid, GATEWAY_CPUS);
    processes = {
      apiserver: cluster.apiServer.pid,
      gateway: gateway.pid,
      bare: bare.pid,
      autocannon: process.pid,
    };
    let get: WholeGet;
    try {
      get = await measure(cluster, gateway, bare, { user, impersonation });
    } finally {
      await Promise.all([gateway.stop(), bare.stop()]);
    }
    const stages = await measureStages({
      api: new KubeClient(kc),
      platformNamespace: PLATFORM_NAMESPACE,
      token,
      path: `${BASE_PATH}${SECRETS}/secret-0`,
      answer: await recordAnswer(kc, `${SECRETS}/secret-0`, impersonation),
    });
    console.log(stageRows(stages, get.gatewayMicros, get.bareMicros));
  });
}

const SECRETS = `/apis/${GROUP}/v1/namespaces/bench/sharedsecrets`;

/** The platform namespace, the platform admins' binding and N SharedSecrets to read. */
async function prepare(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
  await core.createNamespace({ body: { metadata: { name: 'bench' } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: 'platform-admins' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:admins' }],
    },
  });
  for (let i = 0; i < SIZES.n; i++) {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: 'bench',
      plural: 'sharedsecrets',
      body: {
        apiVersion: `${GROUP}/v1`,
        kind: 'SharedSecret',
        metadata: { name: `secret-${i}` },
        spec: { data: { token: 'dG9rZW4=' }, access: [{ verbs: ['get'], users: [`user-${i}`] }] },
      },
    });
  }
}

/** The CPU microseconds per proxied GET of the gateway and of the bare proxy, from the GET runs. */
interface WholeGet {
  readonly gatewayMicros: number;
  readonly bareMicros: number;
}

/** The apiserver's answer to `path` for the key (its impersonation headers), as the gateway's upstream gets it. */
async function recordAnswer(
  kc: KubeConfig,
  path: string,
  impersonation: Impersonation,
): Promise<RecordedAnswer> {
  const upstream = await Upstream.create(kc);
  try {
    const response = await upstream.request({
      method: 'GET',
      path,
      headers: { ...impersonation, accept: 'application/json' },
    });
    const body = Buffer.from(await response.body.arrayBuffer());
    if (response.statusCode !== 200) throw new Error(`GET ${path}: ${response.statusCode}`);
    return { statusCode: response.statusCode, headers: response.headers, body };
  } finally {
    await upstream.close();
  }
}

/** GET and LIST direct, impersonated, through the bare proxy and through the gateway, with their figures. */
async function measure(
  cluster: Cluster,
  gateway: GatewayProcess,
  bare: BareProxy,
  key: { readonly user: Headers; readonly impersonation: Impersonation },
): Promise<WholeGet> {
  let get: WholeGet | undefined;
  const gatewayBase = `${gateway.url}${BASE_PATH}`;
  const admin = bearer(cluster.adminToken);
  const impersonated = { ...admin, ...autocannonHeaders(key.impersonation) };
  // Warm every path up (connections, JIT, the apiserver's caches) before measuring.
  await load(`${cluster.server}${SECRETS}/secret-0`, impersonated, SIZES.warmUpSeconds);
  await load(`${gatewayBase}${SECRETS}/secret-0`, key.user, SIZES.warmUpSeconds);
  await load(`${bare.url}${SECRETS}/secret-0`, {}, SIZES.warmUpSeconds);
  console.log(
    `gateway benchmark: ${SIZES.seconds}s per run, ${SIZES.connections} connections, LIST of ${SIZES.n} SharedSecrets, ${placement(SIZES.runtime, 'apiserver, etcd and load generator')}`,
  );
  for (const [name, url] of [
    ['GET', `${SECRETS}/secret-0`],
    ['LIST', SECRETS],
  ] as const) {
    const direct = await load(`${cluster.server}${url}`, admin);
    const asUser = await load(`${cluster.server}${url}`, impersonated);
    const floor = await load(`${bare.url}${url}`, {});
    const through = await load(`${gatewayBase}${url}`, key.user);
    console.log(rows(name, direct, asUser, floor, through));
    if (name === 'GET')
      get = {
        gatewayMicros: (through.cpuMs.gateway ?? Number.NaN) * 1000,
        bareMicros: (floor.cpuMs.bare ?? Number.NaN) * 1000,
      };
    checkLoad(
      name,
      [
        { what: 'the gateway process', child: gateway.child },
        { what: 'the bare proxy', child: bare.child },
      ],
      direct,
      asUser,
      floor,
      through,
    );
    reportFigure({
      name: `${name} through the gateway${GATEWAY_CPUS ? ' (gateway on a CPU of its own)' : ''}`,
      value: rps(through.result),
      unit: 'req/s',
      baseline: { name: 'direct to kube-apiserver', value: rps(direct.result), unit: 'req/s' },
      ratio: rps(through.result) / rps(direct.result),
      goal: '>= 0.8',
    });
    reportCpuFigure(
      `gateway CPU per proxied ${name}`,
      name,
      through,
      'gateway',
      name === 'GET' ? '<= 0.5' : undefined,
    );
    reportCpuFigure(
      `bare Node proxy CPU per proxied ${name} (the floor of any Node gateway)`,
      name,
      floor,
      'bare',
    );
  }
  if (!get) throw new Error('no GET was measured');
  return get;
}

runBench(main);
