import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ADMIN_KEYS, secretNameOf } from '../../src/provision/control-plane.ts';
import { readSecretText } from '../../src/provision/instance-secrets.ts';
import { ProcessesProvisioner } from '../../src/provision/processes.ts';
import type { ProvisionStatus } from '../../src/provision/provisioner.ts';
import { collectionPath, KubeClient, objectPath, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, hostKubeconfigPath, uniqueName, useNamespace } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { processesNaming } from '../support/instance-processes.ts';
import { eventually } from '../support/wait.ts';

/**
 * The processes provisioner with the real control-plane binary: a virtual control plane of its
 * own (etcd, kube-apiserver, kube-controller-manager) for one instance, reached with the CA and
 * admin credential of its Secrets on the host; restarted when killed; asleep and awake with its
 * objects; taken over by a new provisioner (a platform restart); removed without a trace.
 * Processes are found by their command lines in /proc, not by the provisioner's own records.
 */

const namespace = useNamespace('provision');
const host = () => new KubeClient(hostKubeConfig());
const INSTANCES: ResourceRef = {
  group: 'management.platform',
  version: 'v1',
  plural: 'virtualclusterinstances',
  namespaced: true,
};
let stateDir: string;
const provisioners: ProcessesProvisioner[] = [];
const instance = { namespace: '', name: uniqueName('vc') };
const options = { controllerManager: true };

type Instance = { namespace: string; name: string };
const newProvisioner = (dir = stateDir) => {
  const provisioner = new ProcessesProvisioner({
    stateDir: dir,
    binary: inject('controlPlaneBinary'),
    api: host(),
  });
  provisioners.push(provisioner);
  return provisioner;
};
const instanceDir = (of: Instance = instance, dir = stateDir) =>
  join(dir, 'virtualclusters', of.namespace, of.name);

/** Live processes whose command line names the instance's directory `dir`, by component. */
const processesOfInstance = (dir = instanceDir()) => processesNaming(dir);

/** The instance's processes are one of each component, none of them one of `before` (pids). */
function expectOneOfEachAnew(before: number[]): void {
  const after = processesOfInstance();
  expect(after.map((p) => p.component).sort()).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
  expect(after.filter((p) => before.includes(p.pid))).toEqual([]);
}

async function adminKubeConfig(of: Instance = instance): Promise<{
  kc: KubeConfig;
  server: string;
  ca: string;
  cert: string;
  key: string;
}> {
  const text = await readSecretText(host(), of.namespace, secretNameOf(of.name, 'admin'));
  const yaml = text?.[ADMIN_KEYS.kubeconfig];
  if (!yaml) throw new Error('the admin Secret has no kubeconfig');
  const doc = parseYaml(yaml) as {
    clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    users: { user: { 'client-certificate-data': string; 'client-key-data': string } }[];
  };
  const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return {
    kc,
    server: doc.clusters[0]!.cluster.server,
    ca: b64(doc.clusters[0]!.cluster['certificate-authority-data']),
    cert: b64(doc.users[0]!.user['client-certificate-data']),
    key: b64(doc.users[0]!.user['client-key-data']),
  };
}

/** GET /readyz verified by the Secret's CA, authenticated by its client certificate. */
async function readyz(): Promise<{ status: number; body: string }> {
  const { server, ca, cert, key } = await adminKubeConfig();
  return new Promise((resolve, reject) => {
    const req = request(`${server}/readyz`, { ca, cert, key, timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

const virtualCore = async (of: Instance = instance) =>
  (await adminKubeConfig(of)).kc.makeApiClient(CoreV1Api);
const readConfigMap = async (of: Instance = instance) =>
  (await virtualCore(of)).readNamespacedConfigMap({ namespace: 'default', name: 'kept' });

beforeAll(() => {
  instance.namespace = namespace();
  stateDir = mkdtempSync(join(tmpdir(), 'provision-processes-'));
});
afterAll(async () => {
  for (const provisioner of provisioners) await provisioner.close();
  await newProvisioner().remove(instance);
  rmSync(stateDir, { recursive: true, force: true });
});

describe('ProcessesProvisioner', { timeout: 300_000 }, () => {
  let first: ProcessesProvisioner;
  let ready: ProvisionStatus;

  test('provisions a control plane that answers /readyz to the admin credential of its Secret', async () => {
    first = newProvisioner();
    ready = await first.ensure(instance, options);
    expect(ready.phase).toBe('Ready');
    expect(ready.adminSecretName).toBe(secretNameOf(instance.name, 'admin'));
    const admin = await adminKubeConfig();
    expect(ready.endpoint).toBe(admin.server);
    expect(Buffer.from(ready.caData ?? '', 'base64').toString()).toBe(admin.ca);
    expect(await readyz()).toEqual({ status: 200, body: 'ok' });
    expect(
      processesOfInstance()
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
    const core = await virtualCore();
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'kept' }, data: { made: 'before' } },
    });
  });

  test('a killed apiserver is started again, over the same storage', async () => {
    const [killed] = processesOfInstance().filter((p) => p.component === 'kube-apiserver');
    process.kill(killed!.pid, 'SIGKILL');
    await eventually(
      () => processesOfInstance().some((p) => p.component === 'kube-apiserver' && p.pid !== killed!.pid),
      60_000,
      'a new kube-apiserver process',
    );
    await eventually(
      async () => (await readyz().catch(() => ({ status: 0 }))).status === 200,
      60_000,
      'readyz',
    );
    expect((await readConfigMap()).data).toEqual({ made: 'before' });
  });

  test('stop ends every process and keeps the storage; ensure wakes it with its objects', async () => {
    await first.stop(instance);
    expect(processesOfInstance()).toEqual([]);
    expect((await first.status(instance)).phase).toBe('Stopped');
    expect(existsSync(join(instanceDir(), 'data', 'etcd'))).toBe(true);

    expect((await first.ensure(instance, options)).phase).toBe('Ready');
    expect((await readConfigMap()).data).toEqual({ made: 'before' });
  });

  test('a new provisioner over the same state directory (a platform restart) takes the instance over', async () => {
    const before = processesOfInstance().map((p) => p.pid);
    const second = newProvisioner();
    const resumed = await second.resume();
    expect(resumed.map((s) => s.phase)).toEqual(['Ready']);
    // The earlier provisioner's processes are ended and it does not start them again: one of each.
    expectOneOfEachAnew(before);
    expect((await readConfigMap()).data).toEqual({ made: 'before' });
    expect(await readyz()).toEqual({ status: 200, body: 'ok' });
  });

  test('the earlier provisioner, asked again, takes it back: the last to act owns it, one process of each', async () => {
    const before = processesOfInstance().map((p) => p.pid);
    expect((await first.ensure(instance, options)).phase).toBe('Ready');
    expectOneOfEachAnew(before);
    expect((await readConfigMap()).data).toEqual({ made: 'before' });
  });

  test('remove ends the processes and deletes the storage and the Secrets', async () => {
    await provisioners.at(-1)!.remove(instance);
    expect(processesOfInstance()).toEqual([]);
    expect(existsSync(instanceDir())).toBe(false);
    for (const role of ['pki', 'admin'] as const) {
      expect(
        await readSecretText(host(), instance.namespace, secretNameOf(instance.name, role)),
      ).toBeUndefined();
    }
    expect((await provisioners.at(-1)!.status(instance)).phase).toBe('Absent');
  });
});

describe('an operator killed with SIGKILL (a platform stopped hard)', { timeout: 300_000 }, () => {
  const killed: Instance = { namespace: '', name: uniqueName('vc') };
  let ownStateDir: string;
  beforeAll(() => {
    killed.namespace = namespace();
    ownStateDir = mkdtempSync(join(tmpdir(), 'provision-processes-killed-'));
  });
  afterAll(async () => {
    await newProvisioner(ownStateDir).remove(killed);
    rmSync(ownStateDir, { recursive: true, force: true });
  });

  test('its control planes end with it; the next operator resumes them with their objects', async () => {
    const script = fileURLToPath(new URL('./processes-operator.ts', import.meta.url));
    const args = [
      ownStateDir,
      inject('controlPlaneBinary'),
      hostKubeconfigPath(),
      killed.namespace,
      killed.name,
    ];
    const operator = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise((resolve) => operator.once('exit', resolve));
    let stderr = '';
    operator.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const line = await new Promise<string>((resolve, reject) => {
      let stdout = '';
      operator.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('\n')) resolve(stdout.split('\n')[0]!);
      });
      operator.once('exit', (code) =>
        reject(new Error(`the operator exited (${code}) before it was ready: ${stderr}`)),
      );
    });
    expect(line).toBe(`READY ${(await adminKubeConfig(killed)).server}`);
    await (await virtualCore(killed)).createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'kept' }, data: { made: 'before the kill' } },
    });
    const dir = instanceDir(killed, ownStateDir);
    expect(
      processesOfInstance(dir)
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver']);

    operator.kill('SIGKILL');
    await exited;
    await eventually(
      () => processesOfInstance(dir).length === 0,
      30_000,
      'the control plane to end with its operator',
    );

    const resumed = await newProvisioner(ownStateDir).resume();
    expect(resumed.map((s) => s.phase)).toEqual(['Ready']);
    expect(
      processesOfInstance(dir)
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver']);
    expect((await readConfigMap(killed)).data).toEqual({ made: 'before the kill' });
  });

  test('a new instance of the same name (another uid) gets a new CA and empty storage', async () => {
    // Real objects: the Secrets are owned by the instance's uid, and the host's garbage collector
    // deletes what an owner that does not exist owns (a made-up uid lost the admin Secret once).
    const instances = collectionPath(INSTANCES, killed.namespace);
    const makeInstance = async () =>
      (
        await host().request<{ metadata: { uid: string } }>({
          method: 'POST',
          path: instances,
          body: {
            apiVersion: 'management.platform/v1',
            kind: 'VirtualClusterInstance',
            metadata: { name: killed.name },
            spec: { templateRef: { name: 'processes-e2e' } },
          },
        })
      ).metadata.uid;
    await installCrds(hostKubeConfig());
    const caBefore = (await adminKubeConfig(killed)).ca;
    const provisioner = newProvisioner(ownStateDir);
    const firstUid = await makeInstance();
    await provisioner.ensure({ ...killed, uid: firstUid }, { controllerManager: false });
    expect((await readConfigMap(killed)).data).toEqual({ made: 'before the kill' });
    await host().request({ method: 'DELETE', path: objectPath(INSTANCES, killed.namespace, killed.name) });
    await eventually(
      async () =>
        (await host()
          .request({ method: 'GET', path: objectPath(INSTANCES, killed.namespace, killed.name) })
          .then(
            () => false,
            () => true,
          )) === true,
      30_000,
      'the first instance to be gone',
    );
    const secondUid = await makeInstance();
    const renewed = await provisioner.ensure({ ...killed, uid: secondUid }, { controllerManager: false });
    expect(renewed.phase).toBe('Ready');
    const admin = await adminKubeConfig(killed);
    expect(admin.ca).not.toBe(caBefore);
    expect(Buffer.from(renewed.caData ?? '', 'base64').toString()).toBe(admin.ca);
    await expect(readConfigMap(killed)).rejects.toMatchObject({ code: 404 });
    expect(
      processesOfInstance(instanceDir(killed, ownStateDir))
        .map((p) => p.component)
        .sort(),
    ).toEqual(['etcd', 'kube-apiserver']);
  });
});
