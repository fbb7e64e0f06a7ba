import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Lease } from '../../src/runtime/leader-election.ts';
import { kubeConfigFor, uniqueName } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { spawnOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';
import { converge, sharedSecretDifferences } from './support/expectations.ts';
import {
  type AuditEvent,
  auditLog,
  loopbackServing,
  operatorCertificate,
  usePlane,
  writeKubeconfig,
} from './support/plane.ts';
import { type OperatorProcess, operatorProcess } from './support/process.ts';
import {
  isLeaseRequest,
  isWrite,
  type ProxyRecord,
  RecordingProxy,
  succeeded,
} from './support/recording-proxy.ts';

/**
 * Two `platform operator` processes with leader election, each behind a recording proxy of its
 * own (its only way to the apiserver) and with a client certificate of its own, so that every
 * write is attributed to its process twice: by the proxy (when it was sent) and by the
 * apiserver's audit log (when it landed). The cluster is an apiserver of this file's own.
 */

/** Short timings so a failover takes seconds; the flags are the operator's own. */
const LEASE_MS = 6_000;
const RENEW_DEADLINE_MS = 4_000;
const RETRY_MS = 2_000;
const LEASE_NAME = 'platform-operator';
const PLATFORM_NS = 'platform-system';
const WORK_NS = 'work';
const IDS = ['a', 'b'] as const;
type Id = (typeof IDS)[number];
const user = (id: Id) => `operator-${id}`;

const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${PLATFORM_NS}/leases/${LEASE_NAME}`;
const isLeaseWrite = (r: ProxyRecord) => isWrite(r) && isLeaseRequest(r);
const isObjectWrite = (r: ProxyRecord) => isWrite(r) && !isLeaseRequest(r);
/** Writes, less lease writes refused for a stale resourceVersion (the election's own lock at work). */
const counted = (r: ProxyRecord) => isWrite(r) && !(isLeaseRequest(r) && r.status === 409);

describe('leader failover between two operator processes', () => {
  const plane = usePlane('failover');
  let cluster: Cluster;
  let admin: KubeClient;
  let audit: ReturnType<typeof auditLog>;
  const proxies = {} as Record<Id, RecordingProxy>;
  const kubeconfigs = {} as Record<Id, string>;
  const operators = {} as Record<Id, OperatorProcess>;
  const figures: string[] = [];

  const start = async (id: Id): Promise<OperatorProcess> => {
    const port = await freePort();
    const log = join(plane.dir, `operator-${id}.log`);
    const child = spawnOperator(
      [
        '--kubeconfig',
        kubeconfigs[id],
        '--namespace',
        PLATFORM_NS,
        '--identity',
        user(id),
        '--lease-duration',
        `${LEASE_MS}ms`,
        '--renew-deadline',
        `${RENEW_DEADLINE_MS}ms`,
        '--retry-period',
        `${RETRY_MS}ms`,
        '--health-port',
        String(port),
        '--health-host',
        '127.0.0.1',
        '--log-level',
        'info',
      ],
      log,
    );
    operators[id] = operatorProcess(child, port, log);
    return operators[id];
  };

  const holder = async (): Promise<string> => {
    const lease = await admin.request<Lease>({ method: 'GET', path: LEASE_PATH }).catch(() => undefined);
    return lease?.spec?.holderIdentity ?? '';
  };

  /**
   * The load that keeps the leader writing: SharedSecret creates and access changes, 10 a second,
   * straight to the apiserver (always reachable). Stopped before each exact check.
   */
  let load: { stop(): Promise<void>; errors: string[] } | undefined;
  const startLoad = (prefix: string) => {
    let running = true;
    let n = 0;
    const errors: string[] = [];
    const path = `/apis/${API_GROUP}/${API_VERSION}/namespaces/${WORK_NS}/sharedsecrets`;
    const loop = (async () => {
      while (running) {
        const i = n++;
        try {
          if (i % 3 === 2) {
            await admin.request({
              method: 'PATCH',
              path: `${path}/${prefix}-${i - 2}`,
              contentType: 'application/merge-patch+json',
              body: {
                spec: { access: [{ name: 'read', verbs: ['get', 'list'], users: [`u-${i}`], teams: ['t'] }] },
              },
            });
          } else {
            await admin.request({
              method: 'POST',
              path,
              body: {
                apiVersion: `${API_GROUP}/${API_VERSION}`,
                kind: 'SharedSecret',
                metadata: { name: `${prefix}-${i}` },
                spec: { data: { v: 'eA==' }, access: [{ name: 'read', verbs: ['get'], users: [`u-${i}`] }] },
              },
            });
          }
        } catch (err) {
          errors.push(`${i}: ${(err as Error).message}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    return {
      errors,
      stop: async () => {
        running = false;
        await loop;
      },
    };
  };

  /** `count` SharedSecrets created at once. */
  const burst = (prefix: string, count: number) =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        admin.request({
          method: 'POST',
          path: `/apis/${API_GROUP}/${API_VERSION}/namespaces/${WORK_NS}/sharedsecrets`,
          body: {
            apiVersion: `${API_GROUP}/${API_VERSION}`,
            kind: 'SharedSecret',
            metadata: { name: `${prefix}-${i}` },
            spec: { data: { v: 'eA==' }, access: [{ name: 'read', verbs: ['get'], users: [`b-${i}`] }] },
          },
        }),
      ),
    );

  beforeAll(async () => {
    audit = auditLog(join(plane.dir, 'audit'));
    cluster = await plane.startCluster({ name: uniqueName('failover'), extraApiServerArgs: audit.args });
    const kc = kubeConfigFor(cluster);
    admin = new KubeClient(kc);
    await installCrds(kc);
    for (const name of [PLATFORM_NS, WORK_NS])
      await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
    const { caPem, serving } = await loopbackServing();
    for (const id of IDS) {
      const client = await operatorCertificate(plane.plane(), user(id));
      proxies[id] = await RecordingProxy.start({
        upstream: { host: '127.0.0.1', port: cluster.port, caPem: cluster.caPem },
        clientCertificate: client,
        serving,
      });
      kubeconfigs[id] = writeKubeconfig(
        join(plane.dir, `${id}.kubeconfig`),
        user(id),
        proxies[id].url,
        caPem,
        client,
      );
    }
    await Promise.all(IDS.map(async (id) => (await start(id)).waitReady()));
  });

  const stopLoad = async () => {
    await load?.stop();
    expect(load?.errors ?? []).toEqual([]);
    load = undefined;
  };

  afterAll(async () => {
    await load?.stop();
    await Promise.all(IDS.map((id) => operators[id]?.kill()));
    await Promise.all(IDS.map((id) => proxies[id]?.close()));
    if (figures.length > 0) process.stdout.write(`\nleader failover figures:\n  ${figures.join('\n  ')}\n`);
  });

  const leaderAndFollower = async (): Promise<{ leader: Id; follower: Id }> => {
    let current = '';
    await eventually(
      async () => {
        current = await holder();
        return IDS.some((id) => user(id) === current);
      },
      30_000,
      'a leader',
    );
    const leader = IDS.find((id) => user(id) === current)!;
    return { leader, follower: leader === 'a' ? 'b' : 'a' };
  };

  /** Waits until `id` is writing objects and has just renewed its lease; returns that renewal. */
  const whileWritingJustAfterRenewal = async (id: Id): Promise<ProxyRecord> => {
    const since = Date.now();
    await eventually(
      () => proxies[id].records.filter((r) => isObjectWrite(r) && r.receivedAt >= since).length >= 20,
      30_000,
      `${user(id)} to be writing`,
    );
    const renewals = () => proxies[id].records.filter((r) => isLeaseWrite(r) && succeeded(r));
    const before = renewals().length;
    await eventually(() => renewals().length > before, 10_000, `${user(id)} to renew`);
    return renewals().at(-1)!;
  };

  /** The first successful lease write of `id` at or after `since`: its acquisition. */
  const acquisition = (id: Id, since: number) =>
    proxies[id].records.find((r) => isLeaseWrite(r) && succeeded(r) && r.receivedAt >= since);

  /** Landed writes (2xx) of one operator per the apiserver's audit log, with their times. */
  const landed = (events: AuditEvent[], id: Id) =>
    events
      .filter((e) => e.user.username === user(id) && (e.responseStatus?.code ?? 0) < 300)
      .map((e) => ({
        received: Date.parse(e.requestReceivedTimestamp),
        done: Date.parse(e.stageTimestamp),
        uri: e.requestURI,
      }));

  const convergedExactly = () =>
    converge(() => sharedSecretDifferences(admin, WORK_NS), 90_000, 'the projection to converge');

  test('SIGKILL of the leader: the other takes over within leaseDuration + retryPeriod, never writing alongside it', async () => {
    load = startLoad('k');
    const { leader, follower } = await leaderAndFollower();
    expect(proxies[follower].records.filter(counted)).toEqual([]); // a follower writes nothing
    const lastRenewal = await whileWritingJustAfterRenewal(leader);

    const killedAt = Date.now();
    await operators[leader].kill('SIGKILL');
    await eventually(() => acquisition(follower, killedAt) !== undefined, 30_000, 'the takeover');
    const acquired = acquisition(follower, killedAt)!;
    expect(await holder()).toBe(user(follower));

    const takeoverMs = acquired.answeredAt! - killedAt;
    figures.push(
      `SIGKILL: takeover ${takeoverMs} ms after the kill (${acquired.answeredAt! - lastRenewal.receivedAt} ms after the last renewal); bound leaseDuration + retryPeriod = ${LEASE_MS + RETRY_MS} ms`,
    );
    expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);

    // The new leader works; then everything is exact.
    await eventually(
      () => proxies[follower].writes().filter(isObjectWrite).length >= 10,
      30_000,
      'the new leader to write',
    );
    await stopLoad();
    await convergedExactly();

    // Never two writers: all of the old leader's writes came before the new leader's first.
    const oldLast = Math.max(...proxies[leader].records.filter(counted).map((r) => r.receivedAt));
    const newFirst = Math.min(...proxies[follower].records.filter(counted).map((r) => r.receivedAt));
    expect(oldLast).toBeLessThan(newFirst);
    const events = audit.read();
    const oldLanded = landed(events, leader);
    const newLanded = landed(events, follower);
    expect(oldLanded.length).toBeGreaterThan(0);
    expect(newLanded.length).toBeGreaterThan(0);
    expect(Math.max(...oldLanded.map((w) => w.done))).toBeLessThan(
      Math.min(...newLanded.map((w) => w.received)),
    );

    // The killed one comes back as a follower.
    await (await start(leader)).waitReady();
    expect(await holder()).toBe(user(follower));
  });

  test('a leader cut off from the apiserver stops writing before its lease can be taken; what it held back never lands', async () => {
    load = startLoad('p');
    const { leader, follower } = await leaderAndFollower();
    const proxy = proxies[leader];
    const lastRenewal = await whileWritingJustAfterRenewal(leader);
    // A burst of work just before the cut, so that writes are in flight and queued when it comes.
    const burstAt = Date.now();
    const bursting = burst('pb', 20);
    await eventually(
      () => proxy.records.filter((r) => isObjectWrite(r) && r.receivedAt >= burstAt).length >= 4,
      10_000,
      'the burst to be in progress',
    );

    proxy.partition();
    const cutAt = proxy.partitionedAt!;
    await eventually(() => acquisition(follower, cutAt) !== undefined, 30_000, 'the takeover');
    const acquired = acquisition(follower, cutAt)!;
    const takeoverMs = acquired.answeredAt! - cutAt;
    expect(await holder()).toBe(user(follower));
    await bursting;

    // The new leader writes for a while; then the partition heals, and whatever the old leader
    // still had waiting would be delivered now.
    await eventually(
      () => proxies[follower].records.filter((r) => isObjectWrite(r) && r.receivedAt > cutAt).length >= 10,
      30_000,
      'the new leader to write',
    );
    proxy.heal();
    const healedAt = proxy.healedAt!;
    await new Promise((resolve) => setTimeout(resolve, 3 * RETRY_MS));
    await stopLoad();
    await convergedExactly();

    // The old leader's last renewal that succeeded: its lease can be taken leaseDuration after it was sent.
    const renewed = proxy.records
      .filter((r) => isLeaseWrite(r) && succeeded(r) && r.receivedAt < cutAt)
      .at(-1)!;
    expect(renewed.id).toBeGreaterThanOrEqual(lastRenewal.id);
    const takeableAt = renewed.receivedAt + LEASE_MS;
    const oldWrites = proxy.records.filter(counted);
    const lastAttempt = Math.max(...oldWrites.map((r) => r.receivedAt));
    const heldBack = oldWrites.filter((r) => r.receivedAt >= cutAt);
    const newFirst = Math.min(
      ...proxies[follower].records
        .filter((r) => counted(r) && r.receivedAt >= cutAt)
        .map((r) => r.receivedAt),
    );
    figures.push(
      `partition: takeover ${takeoverMs} ms after the cut (bound ${LEASE_MS + RETRY_MS} ms); the old leader's last write attempt ${lastAttempt - renewed.receivedAt} ms after its last renewal (renewDeadline ${RENEW_DEADLINE_MS} ms; lease takeable after ${LEASE_MS} ms), ${takeableAt - lastAttempt} ms before its lease could be taken and ${newFirst - lastAttempt} ms before the new leader's first write; ${heldBack.length} write(s) sent into the partition, ${heldBack.filter((r) => r.deliveredLate).length} delivered after it healed`,
    );
    expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
    // Fencing: every write the old leader sent, even into the partition, was sent before its
    // lease could be taken and before the new leader wrote.
    expect(lastAttempt).toBeLessThan(takeableAt);
    expect(lastAttempt).toBeLessThan(newFirst);
    // What it sent into the partition was abandoned by itself when its term ended: nothing of it
    // reached the apiserver when the partition healed, and after that it wrote nothing at all.
    expect(heldBack.filter((r) => r.deliveredLate).map((r) => `${r.method} ${r.path}`)).toEqual([]);
    expect(oldWrites.filter((r) => r.receivedAt >= healedAt).map((r) => `${r.method} ${r.path}`)).toEqual([]);
    // The apiserver's view agrees: the old leader's landed writes all ended before the new
    // leader's first one arrived.
    const events = audit.read();
    const oldLanded = landed(events, leader);
    const newLanded = landed(events, follower).filter((w) => w.received >= cutAt);
    expect(Math.max(...oldLanded.map((w) => w.done))).toBeLessThan(
      Math.min(...newLanded.map((w) => w.received)),
    );
    // The old leader follows now; the new one keeps the lease.
    expect(await holder()).toBe(user(follower));
  });

  test('a leader whose lease renewals alone are cut off, while its other writes still go through, stops writing before its lease can be taken', async () => {
    load = startLoad('q');
    const { leader, follower } = await leaderAndFollower();
    const proxy = proxies[leader];
    await whileWritingJustAfterRenewal(leader);

    proxy.partition(isLeaseRequest);
    const cutAt = proxy.partitionedAt!;
    await eventually(() => acquisition(follower, cutAt) !== undefined, 30_000, 'the takeover');
    const acquired = acquisition(follower, cutAt)!;
    const takeoverMs = acquired.answeredAt! - cutAt;
    await eventually(
      () => proxies[follower].records.filter((r) => isObjectWrite(r) && r.receivedAt > cutAt).length >= 10,
      30_000,
      'the new leader to write',
    );
    proxy.heal();
    await new Promise((resolve) => setTimeout(resolve, 3 * RETRY_MS));
    await stopLoad();
    await convergedExactly();

    const renewed = proxy.records
      .filter((r) => isLeaseWrite(r) && succeeded(r) && r.receivedAt < cutAt)
      .at(-1)!;
    const takeableAt = renewed.receivedAt + LEASE_MS;
    const oldWrites = proxy.records.filter(counted);
    const lastAttempt = Math.max(...oldWrites.map((r) => r.receivedAt));
    const afterCut = oldWrites.filter((r) => r.receivedAt >= cutAt && isObjectWrite(r));
    const newFirst = Math.min(
      ...proxies[follower].records
        .filter((r) => counted(r) && r.receivedAt >= cutAt)
        .map((r) => r.receivedAt),
    );
    figures.push(
      `lease-only partition: takeover ${takeoverMs} ms after the cut (bound ${LEASE_MS + RETRY_MS} ms); the old leader went on writing (${afterCut.length} writes after the cut, all answered by the apiserver: ${afterCut.every(succeeded)}) and sent its last write ${lastAttempt - renewed.receivedAt} ms after its last renewal (renewDeadline ${RENEW_DEADLINE_MS} ms), ${takeableAt - lastAttempt} ms before its lease could be taken and ${newFirst - lastAttempt} ms before the new leader's first write`,
    );
    expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
    // It could still write, and did, until its term ended: the fence stopped it, not the network.
    expect(afterCut.length).toBeGreaterThan(0);
    expect(lastAttempt).toBeLessThan(takeableAt);
    expect(lastAttempt).toBeLessThan(newFirst);
    const events = audit.read();
    const oldLanded = landed(events, leader);
    const newLanded = landed(events, follower).filter((w) => w.received >= cutAt);
    expect(Math.max(...oldLanded.map((w) => w.done))).toBeLessThan(
      Math.min(...newLanded.map((w) => w.received)),
    );
    expect(await holder()).toBe(user(follower));
  });
});
