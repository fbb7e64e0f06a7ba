/**
 * Gateway throughput. In one run, against one apiserver of its own, at the same concurrency:
 *   direct:  GET (one SharedSecret) and LIST (a namespace of N SharedSecrets) straight to
 *            kube-apiserver with the admin token;
 *   gateway: the same requests through the management gateway (plain HTTP, in this process) with
 *            a platform admin's access key: authentication, scope check, audit decision,
 *            impersonation and the proxied call.
 * The load generator is autocannon (a worker thread, so it does not share the gateway's event
 * loop). Prints requests per second for both, the ratio (goal: gateway >= 0.8 x direct) and the
 * latency the gateway adds at p50 and p99.
 *
 *   bench/gateway/run.sh [SECONDS=10] [CONNECTIONS=16] [N=50]
 */
import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import autocannon from 'autocannon';
import pino from 'pino';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import { generateAccessKey, hashAccessKey } from '../../src/gateway/auth/keys.ts';
import { BASE_PATH, setupGateway } from '../../src/gateway/index.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { withBenchCluster } from '../support.ts';

const SECONDS = Number(process.argv[2] ?? 10);
const CONNECTIONS = Number(process.argv[3] ?? 16);
const N = Number(process.argv[4] ?? 50);
const PLATFORM_NAMESPACE = 'platform-system';
const GROUP = 'management.platform';

async function load(url: string, token: string): Promise<autocannon.Result> {
  return autocannon({
    url,
    connections: CONNECTIONS,
    duration: SECONDS,
    workers: 1,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
}

function row(name: string, direct: autocannon.Result, gateway: autocannon.Result): string {
  const ratio = gateway.requests.average / direct.requests.average;
  const errors = direct.non2xx + gateway.non2xx + direct.errors + gateway.errors;
  return [
    `${name.padEnd(5)} direct ${direct.requests.average.toFixed(0).padStart(6)} req/s`,
    `gateway ${gateway.requests.average.toFixed(0).padStart(6)} req/s`,
    `ratio ${ratio.toFixed(2)} (goal >= 0.80)`,
    `added latency p50 ${(gateway.latency.p50 - direct.latency.p50).toFixed(1)} ms, p99 ${(gateway.latency.p99 - direct.latency.p99).toFixed(1)} ms`,
    `(non-2xx/errors: ${errors})`,
  ].join('  ');
}

async function main(): Promise<void> {
  await withBenchCluster('gateway', async (cluster, kc) => {
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
    for (let i = 0; i < N; i++) {
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
    const logger = pino({ level: 'warn' });
    const manager = createOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: [],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
        webhooks: false,
        gateway: false,
      }),
      logger,
    );
    const gateway = setupGateway(manager, {
      kubeConfig: kc,
      api: new KubeClient(kc),
      platformNamespace: PLATFORM_NAMESPACE,
      host: '127.0.0.1',
      port: 0,
      logger,
    });
    await manager.start();
    const server = await gateway.start();
    try {
      const pepper = await new PepperStore(new KubeClient(kc), PLATFORM_NAMESPACE, randomBytes).ensure();
      await custom.createClusterCustomObject({
        group: GROUP,
        version: 'v1',
        plural: 'users',
        body: {
          apiVersion: `${GROUP}/v1`,
          kind: 'User',
          metadata: { name: 'bench' },
          spec: { clusterRoles: [{ name: 'platform-admin' }] },
        },
      });
      const key = generateAccessKey((size) => randomBytes(size));
      await custom.createClusterCustomObject({
        group: GROUP,
        version: 'v1',
        plural: 'ownedaccesskeys',
        body: {
          apiVersion: `${GROUP}/v1`,
          kind: 'OwnedAccessKey',
          metadata: { name: 'bench' },
          spec: { user: 'bench', type: 'User', keyId: key.id, keyHash: hashAccessKey(key.key, pepper) },
        },
      });
      const path = `/apis/${GROUP}/v1/namespaces/bench/sharedsecrets`;
      const gatewayBase = `${server.url}${BASE_PATH}`;
      for (;;) {
        const probe = await fetch(`${gatewayBase}${path}/secret-0`, {
          headers: { authorization: `Bearer ${key.key}` },
        });
        if (probe.status === 200) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      // Warm both paths up (connections, JIT) before measuring.
      await autocannon({
        url: `${gatewayBase}${path}/secret-0`,
        connections: CONNECTIONS,
        duration: 2,
        headers: { authorization: `Bearer ${key.key}` },
      });
      console.log(
        `gateway benchmark: ${SECONDS}s per run, ${CONNECTIONS} connections, LIST of ${N} SharedSecrets`,
      );
      const getDirect = await load(`${cluster.server}${path}/secret-0`, cluster.adminToken);
      const getGateway = await load(`${gatewayBase}${path}/secret-0`, key.key);
      console.log(row('GET', getDirect, getGateway));
      const listDirect = await load(`${cluster.server}${path}`, cluster.adminToken);
      const listGateway = await load(`${gatewayBase}${path}`, key.key);
      console.log(row('LIST', listDirect, listGateway));
    } finally {
      await gateway.stop();
      await manager.stop();
    }
  });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
