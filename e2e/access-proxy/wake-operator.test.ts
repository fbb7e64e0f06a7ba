// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { kubectl } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { runPlatform } from '../support/platform-cli.ts';
import { usePlatformProcess } from '../support/platform-operator.ts';
import { readInstance } from '../support/sleeping-instances.ts';
import { waitForValue } from '../support/wait.ts';

/**
 * Sleep mode end to end (issue 27), on the whole platform as one `platform operator` process
 * (the virtualcluster controller with the processes provisioner, the webhooks, the gateway):
 * alice's virtual cluster, with a ConfigMap she made in it, is put to sleep with
 * `platform sleep` (her key, through the management API): its processes end. One kubectl request
 * of hers through the access proxy wakes it (the gateway writes the wake request, the controller
 * starts the control plane again, the request is answered once it is Ready) and reads the
 * ConfigMap made before the sleep. Asleep again, `platform wake --wait` wakes it and returns once
 * it is Ready.
 */

const PROJECT = 'web';
const NAMESPACE = 'p-web';
const NAME = 'dev';

describe('sleep mode through the gateway and the platform command (processes)', { timeout: 900_000 }, () => {
  const platform = usePlatformProcess('wake-operator');
  let key = '';
  let management = ''; // alice's kubeconfig of the management API
  let virtual = ''; // alice's kubeconfig of her virtual cluster, through the access proxy

  const host = () => new KubeClient(platform().kc);
  const instance = () => readInstance(host(), NAMESPACE, NAME);
  const condition = (object: any, type: string) =>
    (object?.status?.conditions ?? []).find((c: any) => c.type === type)?.status;
  const waitFor = (what: string, ok: (object: any) => boolean, ms = 300_000) =>
    waitForValue(what, instance, ok, ms).catch((err: Error) => {
      throw new Error(`${err.message}\noperator log: ${platform().logTail()}`);
    });
  const processes = () => processesNaming(platform().instanceDir(NAMESPACE, NAME));
  const ok = async (kubeconfig: string, args: string[], stdin?: string) => {
    const result = await kubectl(args, { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
    expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };
  const cli = (args: string[]) => runPlatform([...args, '--kubeconfig', management], platform().dir);

  test('alice has a virtual cluster with a ConfigMap in it', async () => {
    const admin = platform().adminKubeconfig;
    await ok(
      admin,
      ['apply', '-f', '-'],
      `apiVersion: management.platform/v1
kind: VirtualClusterTemplate
metadata: {name: small}
spec: {}
---
apiVersion: management.platform/v1
kind: User
metadata: {name: alice}
spec: {username: alice}
---
apiVersion: management.platform/v1
kind: Project
metadata: {name: ${PROJECT}}
spec:
  owner: {user: admin}
  members: [{kind: User, name: alice, clusterRole: platform-project-user}]
---
apiVersion: management.platform/v1
kind: VirtualClusterInstance
metadata: {name: ${NAME}, namespace: ${NAMESPACE}}
spec:
  templateRef: {name: small}
`,
    );
    const created = JSON.parse(
      await ok(
        admin,
        ['create', '-o', 'json', '-f', '-'],
        'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata: {generateName: alice-}\nspec: {user: alice, ttl: 86400}\n',
      ),
    );
    key = created.spec.key;
    management = platform().kubeconfig('alice', key);
    virtual = platform().kubeconfig(
      'alice-dev',
      key,
      `${platform().url}/kubernetes/project/${PROJECT}/virtualcluster/${NAME}`,
    );
    await waitFor('the instance Ready', (object) => condition(object, 'Ready') === 'True');
    // alice is made cluster-admin inside with the instance's admin credential (as its project's admin would).
    const secret = await platform()
      .kc.makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: NAMESPACE, name: `vc-${NAME}-admin` });
    const adminOfVirtual = join(platform().dir, 'virtual-admin.kubeconfig');
    writeFileSync(adminOfVirtual, Buffer.from(secret.data?.kubeconfig ?? '', 'base64'), { mode: 0o600 });
    await ok(adminOfVirtual, [
      'create',
      'clusterrolebinding',
      'alice-admin',
      '--clusterrole=cluster-admin',
      '--user=alice',
    ]);
    const made = await waitForValue(
      'alice allowed to create a ConfigMap in her virtual cluster',
      () =>
        kubectl(['-n', 'default', 'create', 'configmap', 'before-sleep', '--from-literal=made=before'], {
          kubeconfig: virtual,
        }),
      (result) => result.code === 0 || !result.stderr.includes('Forbidden'),
      60_000,
    );
    expect(made.code, made.stderr).toBe(0);
  });

  test('platform sleep: the instance falls asleep at once, its processes end', async () => {
    expect(processes().length).toBeGreaterThan(0);
    const slept = await cli(['sleep', NAME, '--project', PROJECT]);
    expect(slept.code, slept.stderr).toBe(0);
    expect(slept.stderr).toContain(
      `virtual cluster "${PROJECT}/${NAME}": sleep requested (${SLEEP_REQUESTED_ANNOTATION}=`,
    );
    const asleep = await waitFor('the instance asleep', (object) => condition(object, 'Sleeping') === 'True');
    expect(condition(asleep, 'Ready')).toBe('False');
    await waitForValue(
      'its processes gone',
      async () => processes(),
      (left) => left.length === 0,
      120_000,
    );
  });

  test('one kubectl request through the access proxy wakes it and reads the ConfigMap made before the sleep', async () => {
    const asleep = await instance();
    const read = await kubectl(
      [
        '--request-timeout=240s',
        '-n',
        'default',
        'get',
        'configmap',
        'before-sleep',
        '-o',
        'jsonpath={.data.made}',
      ],
      { kubeconfig: virtual },
    );
    expect(read.stderr).toBe('');
    expect(read.code).toBe(0);
    expect(read.stdout).toBe('before');
    const woken = await instance();
    expect(condition(woken, 'Ready')).toBe('True');
    expect(condition(woken, 'Sleeping')).toBe('False');
    expect(Date.parse(woken.metadata.annotations?.[LAST_ACTIVITY_ANNOTATION] ?? '')).toBeGreaterThan(
      Date.parse(asleep.status?.sleepingSince ?? ''),
    );
    expect(processes().length).toBeGreaterThan(0);
  });

  test('asleep again, platform wake --wait wakes it and returns once it is Ready', async () => {
    const slept = await cli(['sleep', NAME, '--project', PROJECT]);
    expect(slept.code, slept.stderr).toBe(0);
    await waitFor('the instance asleep again', (object) => condition(object, 'Sleeping') === 'True');
    const woke = await cli(['wake', NAME, '--project', PROJECT, '--wait', '--timeout', '240']);
    expect(woke.code, woke.stderr).toBe(0);
    expect(woke.stderr).toContain(
      `virtual cluster "${PROJECT}/${NAME}": wake requested (${LAST_ACTIVITY_ANNOTATION}=`,
    );
    expect(woke.stderr).toContain(`virtual cluster "${PROJECT}/${NAME}" is Ready`);
    const awake = await instance();
    expect(condition(awake, 'Ready')).toBe('True');
    expect(condition(awake, 'Sleeping')).toBe('False');
  });
});
