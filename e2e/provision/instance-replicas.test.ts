import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { useProvisioningEnv } from '../support/provisioned-instances.ts';
import { eventually } from '../support/wait.ts';

/**
 * Two operator replicas with the processes provisioner over one state directory, sharing the
 * virtual clusters by leader election (ADR 0028): a provisioned instance's control plane is run
 * by exactly one replica, the one holding its Lease (every process of it is that replica's child,
 * one of each component); killed, the other replica takes it over with its objects, and still
 * one process of each runs.
 */

const REPLICAS = ['a', 'b'] as const;

/** The parent pid of a process (field 4 of /proc/<pid>/stat, after the command's parentheses). */
const parentOf = (pid: number) =>
  Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);

describe('a provisioned instance shared between two operator replicas', { timeout: 600_000 }, () => {
  const env = useProvisioningEnv('provision-replicas');
  const name = uniqueName('vc');
  const leaseName = uniqueName('provision-lease');
  const { operators } = env;

  const start = (replica: string) =>
    env.startOperator(replica, [
      ...['--identity', `replica-${replica}`, '--lease-name', leaseName],
      ...['--lease-duration', '6s', '--renew-deadline', '4s', '--retry-period', '1s'],
    ]);
  /** The instance's processes, each with the replica whose child it is ('?' for none of them). */
  const running = () =>
    processesNaming(env.instanceDir(name)).map((p) => {
      const parent = parentOf(p.pid);
      const replica = [...operators].find(([, o]) => o.child.pid === parent)?.[0] ?? '?';
      return { ...p, replica };
    });
  const readConfigMap = async () =>
    (await env.virtualCore(name)).readNamespacedConfigMap({ namespace: 'default', name: 'kept' });

  beforeAll(() => {
    for (const replica of REPLICAS) start(replica);
  });
  afterAll(async () => {
    await env.deleteInstance(name).catch(() => {});
    await eventually(
      async () => (await env.readInstance(name)) === undefined,
      120_000,
      'the instance gone',
    ).catch(() => {});
  });

  let holder: string;

  test("one replica runs its control plane: one process of each component, all that replica's children", async () => {
    await env.createInstance(name);
    await env.waitCondition(name, 'Ready', 'True', 300_000, 'the instance Ready');
    const processes = running();
    expect(processes.map((p) => p.component).sort()).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
    ]);
    const replicas = [...new Set(processes.map((p) => p.replica))];
    expect(replicas).toHaveLength(1);
    holder = replicas[0]!;
    expect(REPLICAS).toContain(holder);
    await (await env.virtualCore(name)).createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'kept' }, data: { made: 'before the kill' } },
    });
  });

  test('its replica killed, the other takes it over with its objects; still one process of each', async () => {
    await env.stopOperator(holder, 'SIGKILL');
    const survivor = REPLICAS.find((r) => r !== holder)!;
    let last: unknown;
    await eventually(
      async () => {
        last = running();
        const ready = await readConfigMap().then(
          (cm) => cm.data?.made === 'before the kill',
          () => false,
        );
        return ready && running().every((p) => p.replica === survivor) && running().length === 3;
      },
      120_000,
      'the survivor running the control plane with the ConfigMap',
    ).catch((err: Error) => {
      const log = env.operatorLogTail(survivor, 4000);
      throw new Error(`${err.message}; processes: ${JSON.stringify(last)}; survivor's log: ${log}`);
    });
    expect(
      running()
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
  });
});
