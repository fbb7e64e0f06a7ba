import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { virtualClusterShareGroup } from '../../src/controllers/virtualcluster/sharing.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { isNotFound } from '../../src/runtime/errors.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Lease } from '../../src/runtime/leader-election.ts';
import { SHARE_GROUP_LABEL, SHARE_ROLE_LABEL } from '../../src/runtime/lease-shares.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { type AuditEvent, auditLog, usePlane } from '../reliability/support/plane.ts';
import { type OperatorProcess, operatorProcess } from '../reliability/support/process.ts';
import { kubeConfigFor, uniqueName } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { spawnOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';

/**
 * Three `platform operator` replicas share twelve virtual clusters (each a kube-apiserver of its
 * own): each instance's syncer runs on one live replica, the replicas' shares balanced; when a
 * replica dies, its instances move to the others within the lease duration (plus one retry
 * period, the elector's own polling) of its death, and no object is written by two syncers.
 * The host is an apiserver of this file's own, so its write counts are this test's alone.
 */

const LEASE_MS = 6_000;
const RENEW_DEADLINE_MS = 4_000;
const RETRY_MS = 2_000;
const LEASE_NAME = 'platform-operator';
const PLATFORM_NS = 'platform-system';
const TENANTS_NS = 'tenants';
const VIRTUAL_NS = 'apps';
const INSTANCES = 12;
const REPLICAS = ['a', 'b', 'c'] as const;
type Replica = (typeof REPLICAS)[number];
const identity = (replica: Replica) => `replica-${replica}`;
const instanceName = (i: number) => `vc-${i}`;
/** The syncers sync ConfigMaps alone: the fewest caches per virtual cluster. */
const CONFIG =
  'sync:\n  toHost:\n    configMaps: {enabled: true}\n    services: {enabled: false}\n    endpoints: {enabled: false}\n';
/** An audit event with the object it names (the apiserver writes `objectRef`). */
type WriteEvent = AuditEvent & { objectRef?: { resource?: string; namespace?: string; name?: string } };
const b64 = (text: string) => Buffer.from(text).toString('base64');
const vciPath = `/apis/${API_GROUP}/${API_VERSION}/namespaces/${TENANTS_NS}/virtualclusterinstances`;
const leasesPath = `/apis/coordination.k8s.io/v1/namespaces/${PLATFORM_NS}/leases`;

describe('virtual cluster syncers shared between three operator replicas', () => {
  const plane = usePlane('syncer-shares');
  let host: Cluster;
  let admin: KubeClient;
  let audit: ReturnType<typeof auditLog>;
  const virtuals: { cluster: Cluster; client: KubeClient }[] = [];
  const operators = {} as Record<Replica, OperatorProcess>;

  const start = async (replica: Replica): Promise<OperatorProcess> => {
    const port = await freePort();
    const log = join(plane.dir, `operator-${replica}.log`);
    const child = spawnOperator(
      [
        ...['--kubeconfig', host.kubeconfigPath, '--namespace', PLATFORM_NS, '--identity', identity(replica)],
        ...['--controllers', 'virtualcluster', '--watch-namespace', TENANTS_NS],
        ...['--lease-duration', `${LEASE_MS}ms`, '--renew-deadline', `${RENEW_DEADLINE_MS}ms`],
        ...['--retry-period', `${RETRY_MS}ms`, '--health-port', String(port), '--health-host', '127.0.0.1'],
      ],
      log,
    );
    operators[replica] = operatorProcess(child, port, log);
    return operators[replica];
  };

  /** Each instance's key Lease holder ('' when released). */
  const holders = async (): Promise<Map<string, string>> => {
    const selector = `${SHARE_GROUP_LABEL}=${virtualClusterShareGroup(LEASE_NAME)},${SHARE_ROLE_LABEL}=key`;
    const { items } = await admin.request<{ items: Lease[] }>({
      method: 'GET',
      path: leasesPath,
      query: { labelSelector: selector },
    });
    return new Map(items.map((lease) => [lease.metadata.name, lease.spec?.holderIdentity ?? '']));
  };
  const leasesByReplica = (held: Map<string, string>) =>
    Object.fromEntries(
      REPLICAS.map((r) => [identity(r), [...held.values()].filter((h) => h === identity(r)).length]),
    );

  /** Whether every instance's copy of the virtual ConfigMap `name` is on the host. */
  const allOnHost = async (name: string): Promise<boolean> => {
    const found = await Promise.all(
      virtuals.map((_, i) =>
        admin
          .request({
            method: 'GET',
            path: `/api/v1/namespaces/${TENANTS_NS}/configmaps/${hostNameLong(name, VIRTUAL_NS, instanceName(i))}`,
          })
          .then(
            () => true,
            (err: unknown) => {
              if (isNotFound(err)) return false;
              throw err;
            },
          ),
      ),
    );
    return found.every(Boolean);
  };
  const createInEveryVirtualCluster = (name: string) =>
    Promise.all(
      virtuals.map(({ client }) =>
        client.request({
          method: 'POST',
          path: `/api/v1/namespaces/${VIRTUAL_NS}/configmaps`,
          body: { metadata: { name }, data: { round: name } },
        }),
      ),
    );
  /**
   * How often each instance's host copy of the virtual ConfigMap `name` was written (successful
   * writes in the host apiserver's audit log), once a fresh one of every virtual cluster reached it.
   */
  const syncRound = async (name: string): Promise<number[]> => {
    await createInEveryVirtualCluster(name);
    await eventually(() => allOnHost(name), 90_000, `ConfigMap ${name} of every virtual cluster on the host`);
    const writes = (audit.read() as WriteEvent[]).filter(
      ({ responseStatus, objectRef }) =>
        (responseStatus?.code ?? 0) < 300 &&
        objectRef?.resource === 'configmaps' &&
        objectRef.namespace === TENANTS_NS,
    );
    return virtuals.map((_, i) => {
      const hostName = hostNameLong(name, VIRTUAL_NS, instanceName(i));
      return writes.filter(({ objectRef }) => objectRef?.name === hostName).length;
    });
  };

  beforeAll(async () => {
    audit = auditLog(join(plane.dir, 'audit'));
    host = await plane.startCluster({ name: uniqueName('shares-host'), extraApiServerArgs: audit.args });
    const kc = kubeConfigFor(host);
    admin = new KubeClient(kc);
    await installCrds(kc);
    for (const name of [PLATFORM_NS, TENANTS_NS])
      await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
    // Three at a time: twelve apiservers starting at once would starve the shared machine.
    for (let i = 0; i < INSTANCES; i += 3) {
      const started = await Promise.all(
        [i, i + 1, i + 2].map((n) => plane.startCluster({ name: uniqueName(`shares-vc${n}`) })),
      );
      for (const cluster of started)
        virtuals.push({ cluster, client: new KubeClient(kubeConfigFor(cluster)) });
    }
    for (const [i, { cluster, client }] of virtuals.entries()) {
      await client.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: VIRTUAL_NS } },
      });
      await admin.request({
        method: 'POST',
        path: `/api/v1/namespaces/${TENANTS_NS}/secrets`,
        body: { metadata: { name: `${instanceName(i)}-creds` }, data: { token: b64(cluster.adminToken) } },
      });
      await admin.request({
        method: 'POST',
        path: vciPath,
        body: {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'VirtualClusterInstance',
          metadata: { name: instanceName(i) },
          spec: {
            endpoint: cluster.server,
            caData: b64(cluster.caPem),
            credentialsSecretRef: { name: `${instanceName(i)}-creds` },
            config: CONFIG,
          },
        },
      });
    }
    await Promise.all(REPLICAS.map(async (replica) => (await start(replica)).waitReady()));
  });

  afterAll(async () => {
    await Promise.all(Object.values(operators).map((operator) => operator.kill()));
    for (const { client } of virtuals) client.close();
    admin?.close();
  });

  test('balanced, moved within the lease duration when a replica dies, never written twice', async () => {
    // The rule: every live replica holds floor(12/live) or ceil(12/live) instances.
    const balanced = async (live: readonly Replica[]) => {
      const held = await holders();
      const counts = leasesByReplica(held);
      const total = live.reduce((sum, r) => sum + (counts[identity(r)] ?? 0), 0);
      return (
        total === INSTANCES &&
        live.every((r) => {
          const count = counts[identity(r)] ?? 0;
          return count >= Math.floor(INSTANCES / live.length) && count <= Math.ceil(INSTANCES / live.length);
        })
      );
    };
    let last: unknown;
    await eventually(
      async () => {
        last = leasesByReplica(await holders());
        return balanced(REPLICAS);
      },
      90_000,
      'the instances balanced over three replicas',
    ).catch((err: Error) => {
      throw new Error(`${err.message}; instances per replica: ${JSON.stringify(last)}`);
    });
    const firstRound = await syncRound('before');
    expect(firstRound).toEqual(virtuals.map(() => 1));

    const victim: Replica = 'b';
    const victimLeases = [...(await holders())]
      .filter(([, h]) => h === identity(victim))
      .map(([name]) => name);
    expect(victimLeases.length).toBeGreaterThan(0);
    const killedAt = Date.now();
    await operators[victim].kill();
    // Created while nobody runs the victim's syncers: each reaches the host once they moved.
    await createInEveryVirtualCluster('after');
    await eventually(() => allOnHost('after'), 90_000, 'every virtual cluster syncing again');

    // Each of the victim's instances was taken over by a survivor within the lease duration
    // (and one retry period: the candidates' polling) of the kill, by the Lease's own record.
    const survivors = REPLICAS.filter((r) => r !== victim);
    const { items } = await admin.request<{ items: Lease[] }>({ method: 'GET', path: leasesPath });
    for (const name of victimLeases) {
      const lease = items.find((l) => l.metadata.name === name);
      expect(survivors.map(identity)).toContain(lease?.spec?.holderIdentity);
      const takenOverAfter = Date.parse(lease?.spec?.acquireTime ?? '') - killedAt;
      expect(takenOverAfter).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
    }
    await eventually(() => balanced(survivors), 30_000, 'the instances balanced over the two survivors');

    // One syncer per instance: the host copy of a fresh object of each virtual cluster is written
    // once, as before the kill (two syncers of one instance would each write it).
    expect(await syncRound('again')).toEqual(firstRound);
  });
});
