// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { ADMIN_KEYS, secretNameOf } from '../../src/provision/control-plane.ts';
import { readSecretText } from '../../src/provision/instance-secrets.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, hostKubeconfigPath, uniqueName, useNamespace } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { spawnOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';

/**
 * Two operator replicas with the processes provisioner over one state directory, sharing the
 * virtual clusters by leader election (ADR 0028): a provisioned instance's control plane is run
 * by exactly one replica, the one holding its Lease (every process of it is that replica's child,
 * one of each component); killed, the other replica takes it over with its objects, and still
 * one process of each runs.
 */

const VCI = 'virtualclusterinstances';
const REPLICAS = ['a', 'b'] as const;

/** The parent pid of a process (field 4 of /proc/<pid>/stat, after the command's parentheses). */
const parentOf = (pid: number) =>
  Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);

describe('a provisioned instance shared between two operator replicas', { timeout: 600_000 }, () => {
  const namespace = useNamespace('provision-replicas');
  const kc = hostKubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const name = uniqueName('vc');
  const template = uniqueName('tpl');
  const leaseName = uniqueName('provision-lease');
  let stateDir: string;
  const operators = new Map<string, { child: ChildProcess; exited: Promise<unknown> }>();

  const start = (replica: string) => {
    const child = spawnOperator(
      [
        ...[
          '--kubeconfig',
          hostKubeconfigPath(),
          '--namespace',
          namespace(),
          '--watch-namespace',
          namespace(),
        ],
        ...['--controllers', 'virtualcluster', '--identity', `replica-${replica}`, '--lease-name', leaseName],
        ...['--lease-duration', '6s', '--renew-deadline', '4s', '--retry-period', '1s', '--health-port', '0'],
        ...['--provisioner', 'processes', '--provisioner-state-dir', stateDir],
        ...['--control-plane-binary', inject('controlPlaneBinary')],
      ],
      join(stateDir, `operator-${replica}.log`),
    );
    operators.set(replica, { child, exited: new Promise((resolve) => child.once('exit', resolve)) });
  };
  const instanceDir = () => join(stateDir, 'virtualclusters', namespace(), name);
  /** The instance's processes, each with the replica whose child it is ('?' for none of them). */
  const running = () =>
    processesNaming(instanceDir()).map((p) => {
      const parent = parentOf(p.pid);
      const replica = [...operators].find(([, o]) => o.child.pid === parent)?.[0] ?? '?';
      return { ...p, replica };
    });
  /** The virtual cluster, as the admin credential of the instance's Secret. */
  const virtualCore = async () => {
    const text = await readSecretText(new KubeClient(kc), namespace(), secretNameOf(name, 'admin'));
    const virtualKc = new KubeConfig();
    virtualKc.loadFromString(text?.[ADMIN_KEYS.kubeconfig] ?? '');
    return virtualKc.makeApiClient(CoreV1Api);
  };
  const readConfigMap = async () =>
    (await virtualCore()).readNamespacedConfigMap({ namespace: 'default', name: 'kept' });

  beforeAll(async () => {
    await installCrds(kc);
    stateDir = mkdtempSync(join(tmpdir(), 'provision-replicas-'));
    await custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'virtualclustertemplates',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'VirtualClusterTemplate',
        metadata: { name: template },
        spec: {},
      },
    });
    for (const replica of REPLICAS) start(replica);
  });
  afterAll(async () => {
    await custom
      .deleteNamespacedCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        namespace: namespace(),
        plural: VCI,
        name,
      })
      .catch(() => {});
    await eventually(
      async () =>
        (await custom
          .getNamespacedCustomObject({
            group: API_GROUP,
            version: API_VERSION,
            namespace: namespace(),
            plural: VCI,
            name,
          })
          .then(
            () => false,
            () => true,
          )) as boolean,
      120_000,
      'the instance gone',
    ).catch(() => {});
    for (const { child, exited } of operators.values()) {
      child.kill('SIGTERM');
      await exited;
    }
    await custom
      .deleteClusterCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'virtualclustertemplates',
        name: template,
      })
      .catch(() => {});
    rmSync(stateDir, { recursive: true, force: true });
  });

  let holder: string;

  test("one replica runs its control plane: one process of each component, all that replica's children", async () => {
    await custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: namespace(),
      plural: VCI,
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'VirtualClusterInstance',
        metadata: { name },
        spec: { templateRef: { name: template } },
      },
    });
    await eventually(
      async () => {
        const instance = (await custom.getNamespacedCustomObject({
          group: API_GROUP,
          version: API_VERSION,
          namespace: namespace(),
          plural: VCI,
          name,
        })) as any;
        return (instance.status?.conditions ?? []).some(
          (c: any) => c.type === 'Ready' && c.status === 'True',
        );
      },
      300_000,
      'the instance Ready',
    );
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
    await (await virtualCore()).createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'kept' }, data: { made: 'before the kill' } },
    });
  });

  test('its replica killed, the other takes it over with its objects; still one process of each', async () => {
    const victim = operators.get(holder)!;
    victim.child.kill('SIGKILL');
    await victim.exited;
    operators.delete(holder);
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
      const log = readFileSync(join(stateDir, `operator-${survivor}.log`), 'utf8').slice(-4000);
      throw new Error(`${err.message}; processes: ${JSON.stringify(last)}; survivor's log: ${log}`);
    });
    expect(
      running()
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
  });
});
