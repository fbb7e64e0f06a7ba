import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, test } from 'vitest';
import { LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { kubectl } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import {
  type DevPlatform,
  type DevRun,
  devLogTail,
  killDev,
  startDev,
  stopDev,
  untilRunning,
} from '../support/platform-dev.ts';
import { waitForValue } from '../support/wait.ts';

/**
 * Issue 27: `platform dev` stopped and started again keeps every virtual cluster it provisioned
 * and its objects. The real command on a state directory of its own (its default provisioner is
 * the processes one): a platform admin makes a project, a template and an instance of it through
 * the gateway; a ConfigMap is made in the virtual cluster; dev is stopped as Ctrl-C stops it
 * (every process of the instance ends with it) and started again on the same directory; the
 * instance's control plane runs again (new processes), it is Ready, the ConfigMap is there and
 * its copy on the host too.
 */

const PROJECT = 'web';
const NAMESPACE = 'p-web';
const INSTANCE = 'dev';

describe('platform dev restarted keeps its provisioned virtual clusters', { timeout: 600_000 }, () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'platform-dev-restart-'));
  const cacheDir = join(stateDir, 'kubectl-cache');
  let current: DevRun | undefined;
  let platform: DevPlatform | undefined;

  afterAll(async () => {
    await killDev(current);
    for (let i = 0; i < 40 && processesNaming(stateDir).length > 0; i++) await sleep(250);
    rmSync(stateDir, { recursive: true, force: true });
  });

  const run = (kubeconfig: string, args: string[], stdin?: string) =>
    kubectl(['--cache-dir', cacheDir, ...args], { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
  const ok = async (kubeconfig: string, args: string[], stdin?: string) => {
    const result = await run(kubeconfig, args, stdin);
    expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };
  const dev = () => {
    if (!platform) throw new Error('platform dev is not running');
    return platform;
  };
  /** The instance's condition `type` as `status/reason`, read on the host. */
  const condition = async (type: string) =>
    (
      await run(dev().hostKubeconfig, [
        '-n',
        NAMESPACE,
        'get',
        'virtualclusterinstance',
        INSTANCE,
        '-o',
        `jsonpath={.status.conditions[?(@.type=="${type}")].status}/{.status.conditions[?(@.type=="${type}")].reason}`,
      ])
    ).stdout;
  const waitReady = (what: string) =>
    waitForValue(
      what,
      () => condition('Ready'),
      (ready) => ready.startsWith('True/'),
      300_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\noperator log: ${devLogTail(stateDir)}`);
    });
  /** The virtual cluster's admin kubeconfig, from its Secret (its port may move on a restart). */
  const virtualKubeconfig = async () => {
    const encoded = await ok(dev().hostKubeconfig, [
      '-n',
      NAMESPACE,
      'get',
      'secret',
      `vc-${INSTANCE}-admin`,
      '-o',
      'jsonpath={.data.kubeconfig}',
    ]);
    const path = join(stateDir, 'virtual-admin.kubeconfig');
    writeFileSync(path, Buffer.from(encoded, 'base64'), { mode: 0o600 });
    return path;
  };
  const virtualConfigMap = async () => {
    const read = await run(await virtualKubeconfig(), [
      '-n',
      'default',
      'get',
      'configmap',
      'kept',
      '-o',
      'jsonpath={.data.mode}',
    ]);
    return read.code === 0 ? read.stdout : `(${read.stderr.trim()})`;
  };
  const hostCopies = async () =>
    (
      await ok(dev().hostKubeconfig, [
        '-n',
        NAMESPACE,
        'get',
        'configmaps',
        '-l',
        `${LABEL_MANAGED_BY}=${INSTANCE}`,
        '-o',
        'jsonpath={.items[*].data.mode}',
      ])
    ).trim();

  test('first start: a provisioned instance, Ready, with a ConfigMap in it and its copy on the host', async () => {
    current = startDev(stateDir);
    platform = await untilRunning(current);
    expect(current.output.stderr).toContain('platform dev: starting the operator');
    // As the platform admin, through the gateway.
    await ok(
      dev().adminKubeconfig,
      ['apply', '-f', '-'],
      `apiVersion: management.platform/v1
kind: Project
metadata:
  name: ${PROJECT}
spec:
  owner:
    user: admin
---
apiVersion: management.platform/v1
kind: VirtualClusterTemplate
metadata:
  name: small
spec:
  description: ConfigMaps synced to the host
  config: |
    sync:
      toHost:
        configMaps:
          enabled: true
`,
    );
    await waitForValue(
      'the namespace of the project',
      () => run(dev().hostKubeconfig, ['get', 'namespace', NAMESPACE]),
      (r) => r.code === 0,
    );
    await ok(
      dev().adminKubeconfig,
      ['apply', '-f', '-'],
      `apiVersion: management.platform/v1
kind: VirtualClusterInstance
metadata:
  name: ${INSTANCE}
  namespace: ${NAMESPACE}
spec:
  templateRef:
    name: small
`,
    );
    await waitReady('the instance Ready');
    expect(await condition('Provisioned')).toBe('True/Provisioned');
    await ok(await virtualKubeconfig(), [
      '-n',
      'default',
      'create',
      'configmap',
      'kept',
      '--from-literal=mode=before',
    ]);
    expect(await virtualConfigMap()).toBe('before');
    await waitForValue('the ConfigMap copied to the host', hostCopies, (modes) => modes === 'before', 60_000);
  });

  test('stopped with Ctrl-C: exit 0, and every process of the instance ended with it', async () => {
    const instanceDir = dev().instanceDir(NAMESPACE, INSTANCE);
    const before = processesNaming(instanceDir);
    expect(before.map((p) => p.component).sort()).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
    ]);
    expect(await stopDev(current!)).toBe(0);
    await waitForValue(
      'no process of the instance left',
      async () => processesNaming(instanceDir),
      (p) => p.length === 0,
    );
  });

  test('started again on the same directory: the instance runs again, Ready, with its ConfigMap', async () => {
    const instanceDir = dev().instanceDir(NAMESPACE, INSTANCE);
    current = startDev(stateDir);
    platform = await untilRunning(current);
    // Its control plane runs again: read through it (not a status left from the first run).
    await waitForValue(
      'the ConfigMap read from the virtual cluster again',
      virtualConfigMap,
      (m) => m === 'before',
      300_000,
    );
    await waitReady('the instance Ready after the restart');
    // The controller manager comes last: wait for it rather than read the processes once.
    await waitForValue(
      'the three components running again',
      async () =>
        processesNaming(instanceDir)
          .map((p) => p.component)
          .sort()
          .join(' '),
      (components) => components === 'etcd kube-apiserver kube-controller-manager',
      120_000,
    );
    expect(await hostCopies()).toBe('before');
    // And the syncer carries changes again.
    await ok(await virtualKubeconfig(), [
      '-n',
      'default',
      'create',
      'configmap',
      'after',
      '--from-literal=mode=after',
    ]);
    await waitForValue(
      'a ConfigMap made after the restart on the host',
      hostCopies,
      (m) => m.split(' ').sort().join(' ') === 'after before',
      60_000,
    );
    expect(await stopDev(current)).toBe(0);
    current = undefined;
  });
});
