// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, inject } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { ADMIN_KEYS, secretNameOf } from '../../src/provision/control-plane.ts';
import { readSecretText } from '../../src/provision/instance-secrets.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, hostKubeconfigPath, uniqueName, useNamespace } from './cluster.ts';
import { installCrds } from './crds.ts';
import { spawnOperator } from './operator.ts';
import { eventually } from './wait.ts';

const VCI = 'virtualclusterinstances';

/**
 * What the e2e tests of provisioned VirtualClusterInstances (e2e/provision/instance*.test.ts and
 * the sleep-mode ones) share, for the calling describe block: a namespace of their own, a state
 * directory for the processes provisioner, a VirtualClusterTemplate with `templateSpec` (removed
 * afterwards), and `platform operator` processes running the virtualcluster controller with the
 * processes provisioner over that directory, each logging to `<stateDir>/operator-<id>.log`.
 * Every operator still running is ended (SIGTERM) and the template and directory removed after
 * the block; instances are the test's to delete.
 */
export function useProvisioningEnv(prefix: string, templateSpec: Record<string, unknown> = {}) {
  const namespace = useNamespace(prefix);
  const kc = hostKubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const template = uniqueName('tpl');
  let stateDir = '';
  const operators = new Map<string, { child: ChildProcess; exited: Promise<unknown> }>();

  const instanceRequest = { group: API_GROUP, version: API_VERSION, plural: VCI };
  const env = {
    kc,
    custom,
    namespace,
    /** The VirtualClusterTemplate's name. */
    template,
    stateDir: () => stateDir,
    /** Where the processes provisioner keeps an instance of this namespace. */
    instanceDir: (name: string) => join(stateDir, 'virtualclusters', namespace(), name),
    /** The running operator processes by id. */
    operators,
    /**
     * Starts `platform operator` (the virtualcluster controller only, watching this namespace,
     * the processes provisioner over the state directory) with `extraArgs` (e.g.
     * `--no-leader-elect`, or an identity and Lease flags).
     */
    startOperator(id: string, extraArgs: readonly string[]): ChildProcess {
      if (operators.has(id)) throw new Error(`operator ${id} is running already`);
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
          ...['--controllers', 'virtualcluster', '--health-port', '0'],
          ...['--provisioner', 'processes', '--provisioner-state-dir', stateDir],
          ...['--control-plane-binary', inject('controlPlaneBinary')],
          ...extraArgs,
        ],
        join(stateDir, `operator-${id}.log`),
      );
      operators.set(id, { child, exited: new Promise((resolve) => child.once('exit', resolve)) });
      return child;
    },
    /** Ends operator `id` with `signal` and waits for it to exit. */
    async stopOperator(id: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
      const operator = operators.get(id);
      if (!operator) return;
      operator.child.kill(signal);
      await operator.exited;
      operators.delete(id);
    },
    /** The last `chars` of operator `id`'s log ('' before it wrote one). */
    operatorLogTail(id: string, chars = 3000): string {
      const path = join(stateDir, `operator-${id}.log`);
      return existsSync(path) ? readFileSync(path, 'utf8').slice(-chars) : '';
    },
    /** The instance, or undefined once it is gone. */
    readInstance: (name: string) =>
      custom
        .getNamespacedCustomObject({ ...instanceRequest, namespace: namespace(), name })
        .catch((err: { code?: number }) => {
          if (err.code === 404) return undefined;
          throw err;
        }) as Promise<any>,
    async condition(name: string, type: string): Promise<any> {
      return ((await env.readInstance(name))?.status?.conditions ?? []).find((c: any) => c.type === type);
    },
    /**
     * Waits (bounded by `boundMs`) until the instance's condition `type` has `status`; a failure
     * names the conditions last seen and the tail of every running operator's log.
     */
    async waitCondition(name: string, type: string, status: string, boundMs: number, what: string) {
      let last: unknown;
      await eventually(
        async () => {
          last = (await env.readInstance(name))?.status?.conditions;
          return (last as any[] | undefined)?.some((c) => c.type === type && c.status === status) ?? false;
        },
        boundMs,
        what,
      ).catch((err: Error) => {
        const logs = [...operators.keys()].map((id) => `operator ${id}: ${env.operatorLogTail(id)}`);
        throw new Error(`${err.message}; conditions: ${JSON.stringify(last)}; ${logs.join('; ')}`);
      });
    },
    /** Creates an instance of the template with `client` (the host admin by default). */
    createInstance: (name: string, client: CustomObjectsApi = custom, spec: Record<string, unknown> = {}) =>
      client.createNamespacedCustomObject({
        ...instanceRequest,
        namespace: namespace(),
        body: {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'VirtualClusterInstance',
          metadata: { name },
          spec: { templateRef: { name: template }, ...spec },
        },
      }),
    deleteInstance: (name: string, client: CustomObjectsApi = custom) =>
      client.deleteNamespacedCustomObject({ ...instanceRequest, namespace: namespace(), name }),
    /** The virtual cluster, as the admin credential of the instance's Secret. */
    async virtualKubeConfig(name: string): Promise<KubeConfig> {
      const text = await readSecretText(new KubeClient(kc), namespace(), secretNameOf(name, 'admin'));
      const yaml = text?.[ADMIN_KEYS.kubeconfig];
      if (!yaml) throw new Error('the admin Secret has no kubeconfig');
      const virtualKc = new KubeConfig();
      virtualKc.loadFromString(yaml);
      return virtualKc;
    },
    virtualCore: async (name: string) => (await env.virtualKubeConfig(name)).makeApiClient(CoreV1Api),
  };

  beforeAll(async () => {
    await installCrds(kc);
    stateDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
    await custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'virtualclustertemplates',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'VirtualClusterTemplate',
        metadata: { name: template },
        spec: templateSpec,
      },
    });
  });
  afterAll(async () => {
    for (const id of [...operators.keys()]) await env.stopOperator(id);
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
  return env;
}
