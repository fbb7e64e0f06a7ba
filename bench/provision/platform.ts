/**
 * bench/provision's controller-level side: the platform as `platform operator` runs it in one
 * process (the virtualcluster controller with the processes provisioner, and the gateway with
 * its access proxy, here on loopback over plain HTTP), against the benchmark's host apiserver.
 *
 * - create to Ready: a VirtualClusterInstance created on the host (naming a template) until the
 *   controller says `Ready=True` (provisioned, `/readyz` answered, its syncer running);
 * - a request to an asleep instance: the instance put to sleep (`sleepmode.platform/sleep-requested`,
 *   `Sleeping=True`, its processes gone), then one GET of a ConfigMap made before the sleep,
 *   through the access proxy with a person's access key, until its answer (200 with the ConfigMap):
 *   the gateway writes the wake request, the controller starts the control plane and the syncer,
 *   the request is relayed once `Ready=True`.
 *
 * Every wait is bounded; the instance is deleted (and its processes gone) after each round.
 */
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { processesNaming } from '../../e2e/support/instance-processes.ts';
import { SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { installCrds } from '../../src/dev/install-crds.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import type { Gateway } from '../../src/gateway/index.ts';
import { ADMIN_KEYS, secretNameOf } from '../../src/provision/control-plane.ts';
import { readSecretText } from '../../src/provision/instance-secrets.ts';
import { instancePaths } from '../../src/provision/instance-state.ts';
import { isNotFound } from '../../src/runtime/errors.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { createBenchKey, ensurePepper, PLATFORM_NAMESPACE } from '../platform-gateway.ts';
import { gatewayOnly, waitUntil } from '../support.ts';

/** The project whose namespace (`p-<project>`) the instances live in; the access proxy's path names it. */
const PROJECT = 'bench';
const NAMESPACE = `p-${PROJECT}`;
const TEMPLATE = 'bench-provision';
const PERSON = 'bench-person';
const KEPT = 'kept-across-sleep';
/** Far beyond a healthy start on a loaded machine: only a hang reaches these. */
const READY_BOUND_MS = 5 * 60_000;
const SLEEP_BOUND_MS = 2 * 60_000;
const GONE_BOUND_MS = 2 * 60_000;
/** The client's timeout for the request that wakes the instance (the gateway waits at most this). */
const WAKE_TIMEOUT_SECONDS = 300;
const POLL_MS = 100;

const instancesPath = `/apis/${API_GROUP}/${API_VERSION}/namespaces/${NAMESPACE}/virtualclusterinstances`;

interface Condition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
}
interface Instance {
  readonly metadata: { readonly uid: string };
  readonly status?: { readonly conditions?: readonly Condition[] };
}

export interface PlatformSample {
  /** Seconds from the create to `Ready=True`. */
  readonly createToReady: number;
  /** Seconds from the GET through the access proxy to an asleep instance to its 200 answer. */
  readonly requestToAsleep: number;
}

export class BenchPlatform {
  private constructor(
    private readonly host: KubeClient,
    private readonly manager: Manager,
    private readonly gateway: Gateway,
    private readonly gatewayUrl: string,
    private readonly token: string,
    private readonly stateDir: string,
  ) {}

  /**
   * Installs what the operator needs on the host (CRDs, the platform's roles, the template, a
   * person's access key and their right to read the instances), then starts the operator and its gateway in this process.
   */
  static async start(hostKubeconfig: string, binary: string, stateDir: string): Promise<BenchPlatform> {
    const kc = new KubeConfig();
    kc.loadFromFile(hostKubeconfig);
    const host = new KubeClient(kc);
    await installCrds(kc);
    await installPlatformRoles(host);
    for (const name of [PLATFORM_NAMESPACE, NAMESPACE])
      await host.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
    await host.request({
      method: 'POST',
      path: `/apis/${API_GROUP}/${API_VERSION}/virtualclustertemplates`,
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'VirtualClusterTemplate',
        metadata: { name: TEMPLATE },
        spec: {},
      },
    });
    // The person may read the instances (as a project member may): only such a caller wakes one.
    await host.request({
      method: 'POST',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/roles`,
      body: {
        metadata: { name: 'bench-person-instances' },
        rules: [{ apiGroups: [API_GROUP], resources: ['virtualclusterinstances'], verbs: ['get'] }],
      },
    });
    await host.request({
      method: 'POST',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/rolebindings`,
      body: {
        metadata: { name: 'bench-person-instances' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'bench-person-instances' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: PERSON }],
      },
    });
    const { token } = await createBenchKey(kc, await ensurePepper(kc), PERSON);
    const { manager, gateway } = gatewayOnly(hostKubeconfig, PLATFORM_NAMESPACE, pino({ level: 'warn' }), {
      controllers: ['virtualcluster'],
      provisioner: 'processes',
      provisionerStateDir: stateDir,
      controlPlaneBinary: binary,
    });
    await manager.start();
    const server = await gateway.start();
    await waitUntil('the gateway ready', () => gateway.ready(), { boundMs: 60_000, intervalMs: POLL_MS });
    return new BenchPlatform(host, manager, gateway, server.url, token, stateDir);
  }

  /** One round: create to Ready, then a request through the access proxy to it asleep; then deleted. */
  async round(name: string): Promise<PlatformSample> {
    try {
      let began = performance.now();
      await this.host.request({
        method: 'POST',
        path: instancesPath,
        body: {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'VirtualClusterInstance',
          metadata: { name },
          spec: { templateRef: { name: TEMPLATE } },
        },
      });
      await this.waitCondition(name, 'Ready', 'True', READY_BOUND_MS);
      const createToReady = (performance.now() - began) / 1000;

      await this.prepareVirtualCluster(name);
      await this.putToSleep(name);
      began = performance.now();
      const answer = await fetch(
        `${this.gatewayUrl}/kubernetes/project/${PROJECT}/virtualcluster/${name}/api/v1/namespaces/default/configmaps/${KEPT}?timeout=${WAKE_TIMEOUT_SECONDS}s`,
        { headers: { authorization: `Bearer ${this.token}` }, signal: AbortSignal.timeout(READY_BOUND_MS) },
      );
      const body = await answer.text();
      const requestToAsleep = (performance.now() - began) / 1000;
      if (answer.status !== 200 || !body.includes('before the sleep'))
        throw new Error(`the request that woke ${name}: HTTP ${answer.status} ${body.slice(0, 500)}`);
      return { createToReady, requestToAsleep };
    } finally {
      await this.remove(name);
    }
  }

  /** In the virtual cluster, as its admin: the person may read it; a ConfigMap to read after the sleep. */
  private async prepareVirtualCluster(name: string): Promise<void> {
    const admin = await readSecretText(this.host, NAMESPACE, secretNameOf(name, 'admin'));
    const yaml = admin?.[ADMIN_KEYS.kubeconfig];
    if (!yaml) throw new Error(`${name}: the admin Secret has no kubeconfig`);
    const kc = new KubeConfig();
    kc.loadFromString(yaml);
    const virtual = new KubeClient(kc);
    try {
      await virtual.request({
        method: 'POST',
        path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
        body: {
          metadata: { name: 'bench-person-view' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: PERSON }],
        },
      });
      await virtual.request({
        method: 'POST',
        path: '/api/v1/namespaces/default/configmaps',
        body: { metadata: { name: KEPT }, data: { made: 'before the sleep' } },
      });
    } finally {
      virtual.close();
    }
  }

  /**
   * Asks for sleep (the sleep-requested annotation, as `platform sleep` writes it) until the
   * controller says `Sleeping=True` and no process of the instance runs. Asked again while not
   * asleep: a change the syncer carried after the request counts as later activity.
   */
  private async putToSleep(name: string): Promise<void> {
    const dir = instancePaths(this.stateDir, { namespace: NAMESPACE, name }).root;
    let asked = 0;
    await waitUntil(
      `${name} asleep with no process left`,
      async () => {
        if (performance.now() - asked > 5_000) {
          await this.host.request({
            method: 'PATCH',
            path: `${instancesPath}/${name}`,
            contentType: 'application/merge-patch+json',
            body: { metadata: { annotations: { [SLEEP_REQUESTED_ANNOTATION]: new Date().toISOString() } } },
          });
          asked = performance.now();
        }
        const sleeping = (await this.condition(name, 'Sleeping'))?.status === 'True';
        return sleeping && processesNaming(dir).length === 0;
      },
      { boundMs: SLEEP_BOUND_MS, intervalMs: POLL_MS },
    );
  }

  private async remove(name: string): Promise<void> {
    await this.host.request({ method: 'DELETE', path: `${instancesPath}/${name}` }).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
    const dir = instancePaths(this.stateDir, { namespace: NAMESPACE, name }).root;
    await waitUntil(
      `${name} deleted, no process of it left`,
      async () => (await this.read(name)) === undefined && processesNaming(dir).length === 0,
      { boundMs: GONE_BOUND_MS, intervalMs: POLL_MS },
    );
  }

  private read(name: string): Promise<Instance | undefined> {
    return this.host
      .request<Instance>({ method: 'GET', path: `${instancesPath}/${name}` })
      .catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
  }

  private async condition(name: string, type: string): Promise<Condition | undefined> {
    return (await this.read(name))?.status?.conditions?.find((c) => c.type === type);
  }

  /** Waits for the condition; a failure names the instance's conditions last seen. */
  private async waitCondition(name: string, type: string, status: string, boundMs: number): Promise<void> {
    let last: readonly Condition[] | undefined;
    await waitUntil(
      `${name}: ${type}=${status}`,
      async () => {
        last = (await this.read(name))?.status?.conditions;
        return last?.some((c) => c.type === type && c.status === status) ?? false;
      },
      { boundMs, intervalMs: POLL_MS },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; conditions: ${JSON.stringify(last)}`);
    });
  }

  /** Ends the gateway and the operator (its provisioner ends the control planes it runs). */
  async stop(): Promise<void> {
    await this.gateway.stop();
    await this.manager.stop();
    this.host.close();
  }
}
