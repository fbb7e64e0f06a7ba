import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { KubeClient, objectPath } from '../../src/runtime/kube-client.ts';
import { LeaderElector, type Lease, leaseResource } from '../../src/runtime/leader-election.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';
import { apiserverAddress, eventually, TcpProxy, throughProxy } from './support.ts';

const quiet = pino({ level: 'silent' });
const fast = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

describe('leader election on a real Lease', () => {
  const namespace = useNamespace('leader');
  const admin = new KubeClient(hostKubeConfig());
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const readLease = (name: string) =>
    admin.request<Lease>({ method: 'GET', path: objectPath(leaseResource, namespace(), name) });

  /** The `leader_election_master_status` series a manager's /metrics would serve. */
  const leaderStatus = async (manager: Manager) =>
    (await manager.registry.metrics())
      .split('\n')
      .filter((line) => line.startsWith('leader_election_master_status{'));

  it('one manager leads and runs its controller; after it stops, the other takes over at once', async () => {
    const reconciledBy: string[] = [];
    const managers = ['first', 'second'].map((identity) => {
      const manager = new Manager({
        api: new KubeClient(hostKubeConfig()),
        logger: quiet,
        // A long lease: a takeover within it proves the release, not an expiry.
        leaderElection: {
          namespace: namespace(),
          name: 'managers',
          identity,
          leaseDurationMs: 60_000,
          renewDeadlineMs: 40_000,
          retryPeriodMs: 500,
        },
      });
      const namespaces = manager.informer(
        { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
        { fieldSelector: `metadata.name=${namespace()}` },
      );
      manager
        .controller({
          name: 'probe',
          reconcile: async (key) => {
            reconciledBy.push(`${identity}:${key}`);
          },
        })
        .watchPrimary(namespaces);
      cleanups.push(() => manager.stop());
      return manager;
    });
    const [first, second] = managers as [Manager, Manager];
    await first.start();
    await eventually(() => first.isLeader(), 20_000, 'first to lead');
    await second.start();
    await eventually(() => reconciledBy.includes(`first:${namespace()}`), 20_000, 'first to reconcile');
    expect(second.isLeader()).toBe(false);
    expect(reconciledBy.some((entry) => entry.startsWith('second:'))).toBe(false);
    // docs/metrics.md: 1 on the leader; a replica that never led has no series of the Lease.
    expect(await leaderStatus(first)).toEqual(['leader_election_master_status{name="managers"} 1']);
    expect(await leaderStatus(second)).toEqual([]);
    const before = await readLease('managers');
    expect(before.spec?.holderIdentity).toBe('first');

    await first.stop();
    expect((await readLease('managers')).spec?.holderIdentity ?? '').toBe('');
    await eventually(() => second.isLeader(), 20_000, 'second to take over');
    await eventually(() => reconciledBy.includes(`second:${namespace()}`), 20_000, 'second to reconcile');
    const after = await readLease('managers');
    expect(after.spec?.holderIdentity).toBe('second');
    expect(after.spec?.leaseTransitions).toBe((before.spec?.leaseTransitions ?? 0) + 1);
    // One that led and stopped says 0.
    expect(await leaderStatus(first)).toEqual(['leader_election_master_status{name="managers"} 0']);
    expect(await leaderStatus(second)).toEqual(['leader_election_master_status{name="managers"} 1']);
  });

  it('a leader that cannot renew stops leading before another candidate acquires the lease', async () => {
    const proxy = await TcpProxy.start(apiserverAddress(hostKubeConfig()));
    cleanups.push(() => proxy.close());
    const timeline: string[] = [];
    const elector = (identity: string, api: KubeClient) => {
      const abort = new AbortController();
      const le = new LeaderElector({
        ...fast,
        namespace: namespace(),
        name: 'cut-off',
        identity,
        api,
        clock: systemClock,
        random: systemRandom,
        logger: quiet,
        onStartedLeading: () => timeline.push(`${identity} started`),
        onStoppedLeading: () => timeline.push(`${identity} stopped`),
      });
      const running = le.run(abort.signal);
      cleanups.push(async () => {
        abort.abort();
        await running;
      });
      return le;
    };
    const isolated = elector('isolated', new KubeClient(throughProxy(hostKubeConfig(), proxy)));
    await eventually(() => isolated.isLeader(), 20_000, 'isolated to lead');
    const other = elector('other', new KubeClient(hostKubeConfig()));

    proxy.refuse(true);
    proxy.breakAll();
    await eventually(() => other.isLeader(), 30_000, 'other to take over');
    expect(timeline).toEqual(['isolated started', 'isolated stopped', 'other started']);
    expect((await readLease('cut-off')).spec?.holderIdentity).toBe('other');
  });
});
