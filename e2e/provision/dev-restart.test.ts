import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import { LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { processesNaming } from '../support/instance-processes.ts';
import {
  type DevPlatform,
  type DevRun,
  devKubectl,
  devLogTail,
  discardDev,
  startDev,
  stopDev,
  untilRunning,
} from '../support/platform-dev.ts';
import { waitForValue } from '../support/wait.ts';

/**
 * Issue 27: `platform dev` stopped and started again keeps every virtual cluster it provisioned
 * and its objects. The real command on a state directory of its own (its default provisioner is
 * the processes one): a platform admin makes a project, a template and two instances of it
 * through the gateway, each with a ConfigMap; one of them, `idle`, is put to sleep. dev is
 * stopped as Ctrl-C stops it (every process of both ends with it) and started again on the same
 * directory: `dev`'s control plane runs again (new processes), it is Ready, its ConfigMap is
 * there and its copy on the host too, and it syncs; `idle` is still asleep (no process) until a
 * wake, then Ready with its ConfigMap.
 */

const PROJECT = 'web';
const NAMESPACE = 'p-web';
const AWAKE = 'dev';
const ASLEEP = 'idle';
const COMPONENTS = 'etcd kube-apiserver kube-controller-manager';

describe('platform dev restarted keeps its provisioned virtual clusters', { timeout: 600_000 }, () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'platform-dev-restart-'));
  const cacheDir = join(stateDir, 'kubectl-cache');
  let current: DevRun | undefined;
  let platform: DevPlatform | undefined;

  afterAll(() => discardDev(current, stateDir));

  const { run, ok } = devKubectl(cacheDir);
  const dev = () => {
    if (!platform) throw new Error('platform dev is not running');
    return platform;
  };
  const host = (args: string[]) => ok(dev().hostKubeconfig, ['-n', NAMESPACE, ...args]);
  /** The instance's condition `type` as `status/reason`, read on the host. */
  const condition = async (name: string, type: string) =>
    (
      await run(dev().hostKubeconfig, [
        ...['-n', NAMESPACE, 'get', 'virtualclusterinstance', name, '-o'],
        `jsonpath={.status.conditions[?(@.type=="${type}")].status}/{.status.conditions[?(@.type=="${type}")].reason}`,
      ])
    ).stdout;
  const waitCondition = (name: string, type: string, status: string, what: string) =>
    waitForValue(
      what,
      () => condition(name, type),
      (value) => value.startsWith(`${status}/`),
      300_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\noperator log: ${devLogTail(stateDir)}`);
    });
  /** The virtual cluster's admin kubeconfig, from its Secret (its port may move on a restart). */
  const virtualKubeconfig = async (name: string) => {
    const encoded = await host(['get', 'secret', `vc-${name}-admin`, '-o', 'jsonpath={.data.kubeconfig}']);
    const path = join(stateDir, `${name}-admin.kubeconfig`);
    writeFileSync(path, Buffer.from(encoded, 'base64'), { mode: 0o600 });
    return path;
  };
  const virtualConfigMap = async (name: string) => {
    const read = await run(await virtualKubeconfig(name), [
      ...['-n', 'default', 'get', 'configmap', 'kept', '-o', 'jsonpath={.data.mode}'],
    ]);
    return read.code === 0 ? read.stdout : `(${read.stderr.trim()})`;
  };
  const hostCopies = async (name: string) =>
    (
      await host([
        'get',
        'configmaps',
        '-l',
        `${LABEL_MANAGED_BY}=${name}`,
        '-o',
        'jsonpath={.items[*].data.mode}',
      ])
    ).trim();
  const components = (name: string) =>
    processesNaming(dev().instanceDir(NAMESPACE, name))
      .map((p) => p.component)
      .sort()
      .join(' ');
  /** An annotation of the sleep-mode contract with the time now (milliseconds, UTC). */
  const annotateNow = (name: string, annotation: string) =>
    host([
      'annotate',
      '--overwrite',
      'virtualclusterinstance',
      name,
      `${annotation}=${new Date().toISOString()}`,
    ]);

  test('first start: two provisioned instances, Ready, each with a ConfigMap; one put to sleep', async () => {
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
    for (const name of [AWAKE, ASLEEP])
      await ok(
        dev().adminKubeconfig,
        ['apply', '-f', '-'],
        `apiVersion: management.platform/v1
kind: VirtualClusterInstance
metadata:
  name: ${name}
  namespace: ${NAMESPACE}
spec:
  templateRef:
    name: small
`,
      );
    for (const name of [AWAKE, ASLEEP]) {
      await waitCondition(name, 'Ready', 'True', `${name} Ready`);
      expect(await condition(name, 'Provisioned')).toBe('True/Provisioned');
      await ok(await virtualKubeconfig(name), [
        ...['-n', 'default', 'create', 'configmap', 'kept', `--from-literal=mode=${name}-before`],
      ]);
      expect(await virtualConfigMap(name)).toBe(`${name}-before`);
      await waitForValue(
        `${name}'s ConfigMap copied to the host`,
        () => hostCopies(name),
        (modes) => modes === `${name}-before`,
        60_000,
      );
    }
    await annotateNow(ASLEEP, SLEEP_REQUESTED_ANNOTATION);
    await waitCondition(ASLEEP, 'Sleeping', 'True', `${ASLEEP} asleep`);
    await waitForValue(
      `${ASLEEP}'s processes ended`,
      async () => components(ASLEEP),
      (c) => c === '',
    );
  });

  test('stopped with Ctrl-C: exit 0, and every process of the instances ended with it', async () => {
    expect(components(AWAKE)).toBe(COMPONENTS);
    expect(await stopDev(current!)).toBe(0);
    await waitForValue(
      'no process of the instances left',
      async () => components(AWAKE) + components(ASLEEP),
      (c) => c === '',
    );
  });

  test('started again on the same directory: the awake instance runs again, Ready, with its ConfigMap', async () => {
    current = startDev(stateDir);
    platform = await untilRunning(current);
    // Its control plane runs again: read through it (not a status left from the first run).
    await waitForValue(
      'the ConfigMap read from the virtual cluster again',
      () => virtualConfigMap(AWAKE),
      (m) => m === `${AWAKE}-before`,
      300_000,
    );
    await waitCondition(AWAKE, 'Ready', 'True', 'the instance Ready after the restart');
    // The controller manager comes last: wait for it rather than read the processes once.
    await waitForValue(
      'the three components running again',
      async () => components(AWAKE),
      (c) => c === COMPONENTS,
      120_000,
    );
    expect(await hostCopies(AWAKE)).toBe(`${AWAKE}-before`);
    // And the syncer carries changes again.
    await ok(await virtualKubeconfig(AWAKE), [
      ...['-n', 'default', 'create', 'configmap', 'after', '--from-literal=mode=after'],
    ]);
    await waitForValue(
      'a ConfigMap made after the restart on the host',
      () => hostCopies(AWAKE),
      (m) => m.split(' ').sort().join(' ') === `after ${AWAKE}-before`,
      60_000,
    );
  });

  test('the asleep instance stayed asleep across the restart, and a wake brings it back with its ConfigMap', async () => {
    // A spec change the restarted controller must observe: it has looked at the instance since.
    await host([
      'patch',
      'virtualclusterinstance',
      ASLEEP,
      '--type=merge',
      '-p',
      '{"spec":{"sleepAfter":86400}}',
    ]);
    await waitForValue(
      `the restarted controller to observe ${ASLEEP}'s change`,
      () =>
        host([
          'get',
          'virtualclusterinstance',
          ASLEEP,
          '-o',
          'jsonpath={.metadata.generation}/{.status.observedGeneration}',
        ]),
      (generations) => generations === '2/2',
      120_000,
    );
    expect(await condition(ASLEEP, 'Sleeping')).toBe('True/SleepRequested');
    expect(components(ASLEEP)).toBe('');
    expect(await hostCopies(ASLEEP)).toBe(`${ASLEEP}-before`);
    await annotateNow(ASLEEP, LAST_ACTIVITY_ANNOTATION);
    await waitCondition(ASLEEP, 'Ready', 'True', `${ASLEEP} Ready after the wake`);
    expect(await condition(ASLEEP, 'Sleeping')).toBe('False/Awake');
    expect(await virtualConfigMap(ASLEEP)).toBe(`${ASLEEP}-before`);
    expect(components(ASLEEP)).toBe(COMPONENTS);
    expect(await stopDev(current!)).toBe(0);
    current = undefined;
  });
});
