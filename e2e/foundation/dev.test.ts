import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { tokenOfKubeconfig } from '../../src/dev/admin-objects.ts';
import { uniqueName } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import {
  type DevRun,
  devKubectl,
  discardDev,
  startDev,
  stopDev,
  untilRunning,
} from '../support/platform-dev.ts';

/**
 * `platform dev` as a user runs it: the real command in a child process, on a control plane of
 * its own (not the test run's shared one), driven with the real kubectl. One state directory
 * goes through a first start, a restart and a `--reset`; each run is stopped with SIGINT and
 * must leave no process behind.
 */

const RUN_TIMEOUT_MS = 300_000;

/** Parent pid of `pid` from /proc (the command name may contain spaces or parentheses). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

function descendantsOf(root: number): number[] {
  const pids = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number);
  const found: number[] = [];
  let frontier = [root];
  while (frontier.length > 0) {
    const children = pids.filter((pid) => frontier.includes(parentOf(pid) ?? -1));
    found.push(...children);
    frontier = children;
  }
  return found;
}

/** Alive and not a zombie. */
function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The port of the server a kubeconfig's first cluster names. */
function serverPort(kubeconfigPath: string): number {
  const document = parseYaml(readFileSync(kubeconfigPath, 'utf8'));
  return Number(new URL(document.clusters[0].cluster.server).port);
}

describe('platform dev', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'platform-dev-e2e-'));
  const adminConfig = join(stateDir, 'admin.kubeconfig');
  const hostConfig = join(stateDir, 'host.kubeconfig');
  const cacheDir = join(stateDir, 'kubectl-cache');
  const namespace = uniqueName('dev');
  const secretName = 'dev-e2e-secret';
  let current: DevRun | undefined;

  afterAll(() => discardDev(current, stateDir));

  const { run, ok } = devKubectl(cacheDir);

  /** SIGINT: exit 0, and none of its processes (found via /proc while running) nor its ports survive. */
  const stopAndCheckNothingLeft = async (devRun: DevRun) => {
    const children = descendantsOf(devRun.child.pid!);
    // etcd, kube-apiserver and kube-controller-manager at least.
    expect(children.length).toBeGreaterThanOrEqual(3);
    const ports = [serverPort(adminConfig), serverPort(hostConfig)];
    for (const port of ports) expect(await listening(port)).toBe(true);

    expect(await stopDev(devRun)).toBe(0);
    expect(devRun.output.stderr).toContain('platform dev: stopped');
    for (let i = 0; i < 40 && children.some(alive); i++) await sleep(250);
    expect(children.filter(alive)).toEqual([]);
    expect(processesNaming(stateDir)).toEqual([]);
    for (const port of ports) expect(await listening(port)).toBe(false);
  };

  test(
    'first start: the whole platform with a bootstrap admin whose kubeconfig works at once',
    async () => {
      current = startDev(stateDir);
      await untilRunning(current);
      const { stdout, stderr } = current.output;
      expect(stdout).toContain('The platform is running.');
      expect(stdout).toMatch(/management gateway {2}https:\/\/127\.0\.0\.1:\d+\/kubernetes\/management/);
      expect(stdout).toContain(
        `kubectl --kubeconfig ${adminConfig} get sharedsecrets.management.platform -A`,
      );
      expect(stderr).toContain('platform dev: installing the CRDs');
      expect(stderr).toMatch(/platform dev: starting the operator: controllers .*virtualcluster/);
      expect(stderr).toContain('platform dev: created the User admin');
      // docs/metrics.md: the operator's metrics (the gateway's among them) on a port dev prints.
      const metricsUrl = /operator +metrics (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(stdout)?.[1];
      expect(metricsUrl, stdout).toBeDefined();
      const scraped = await fetch(metricsUrl!);
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain('# TYPE gateway_request_total counter');

      expect(statSync(adminConfig).mode & 0o777).toBe(0o600);
      const key = tokenOfKubeconfig(readFileSync(adminConfig, 'utf8'));
      expect(key).toMatch(/^pak_/);
      // The key exists only in admin.kubeconfig: not in any output, nor in the operator's log.
      expect(stdout).not.toContain(key);
      expect(stderr).not.toContain(key);
      expect(readFileSync(join(stateDir, 'operator.log'), 'utf8')).not.toContain(key);

      // The brief's command, right after "running", through the gateway.
      await ok(adminConfig, ['get', 'sharedsecrets.management.platform', '-A']);
      await ok(hostConfig, ['create', 'namespace', namespace]);
      expect(await ok(hostConfig, ['get', 'ns'])).toContain(namespace);
      const created = await ok(
        adminConfig,
        ['create', '-f', '-'],
        `apiVersion: management.platform/v1
kind: SharedSecret
metadata:
  name: ${secretName}
  namespace: ${namespace}
spec:
  description: made through the gateway
  data:
    token: c2VjcmV0
`,
      );
      expect(created).toContain(`sharedsecret.management.platform/${secretName} created`);
      expect(
        await ok(adminConfig, [
          'get',
          'sharedsecret',
          secretName,
          '-n',
          namespace,
          '-o',
          'jsonpath={.spec.data.token}',
        ]),
      ).toBe('c2VjcmV0');
      expect(await ok(adminConfig, ['get', 'sharedsecrets.management.platform', '-A'])).toContain(secretName);
    },
    RUN_TIMEOUT_MS,
  );

  test(
    "a project owner can do what the chart lets owners do: retrieve a kubeconfig for the project's virtual cluster",
    async () => {
      expect(current?.child.exitCode).toBeNull();
      try {
        await ownerRetrievesKubeconfig();
      } finally {
        await stopAndCheckNothingLeft(current!);
      }
    },
    RUN_TIMEOUT_MS,
  );

  const ownerRetrievesKubeconfig = async () => {
    // As a host admin: an owner, an outsider, a project and a virtual cluster in it.
    await ok(
      hostConfig,
      ['apply', '-f', '-'],
      ['owner', 'outsider']
        .map(
          (name) =>
            `apiVersion: management.platform/v1\nkind: User\nmetadata:\n  name: ${name}\nspec:\n  username: ${name}\n`,
        )
        .join('---\n') +
        `---\napiVersion: management.platform/v1\nkind: Project\nmetadata:\n  name: web\nspec:\n  owner:\n    user: owner\n`,
    );
    for (let i = 0; i < 150 && (await run(hostConfig, ['get', 'namespace', 'p-web'])).code !== 0; i++)
      await sleep(200);
    await ok(
      hostConfig,
      ['apply', '-f', '-'],
      `apiVersion: management.platform/v1
kind: VirtualClusterInstance
metadata:
  name: dev
  namespace: p-web
spec:
  endpoint: https://dev.vcluster.example:6443
  accessPoint:
    ingress:
      enabled: true
`,
    );
    // Keys for both, minted by the admin through the gateway; kubeconfigs that use them.
    const kubeconfigOf = async (user: string) => {
      const created = JSON.parse(
        await ok(
          adminConfig,
          ['create', '-o', 'json', '-f', '-'],
          `apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  generateName: ${user}-\nspec:\n  user: ${user}\n  ttl: 3600\n`,
        ),
      );
      const path = join(stateDir, `${user}.kubeconfig`);
      const adminText = readFileSync(adminConfig, 'utf8');
      writeFileSync(path, adminText.replace(tokenOfKubeconfig(adminText) ?? '', created.spec.key), {
        mode: 0o600,
      });
      return path;
    };
    const retrieve = (kubeconfig: string) =>
      run(
        kubeconfig,
        [
          'create',
          '--raw',
          '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances/dev/kubeconfig',
          '-f',
          '-',
        ],
        '{"apiVersion":"management.platform/v1","kind":"VirtualClusterInstanceKubeConfig","spec":{}}',
      );
    const owner = await kubeconfigOf('owner');
    const outsider = await kubeconfigOf('outsider');

    // The owner's RoleBinding names platform-project-admin, which platform dev installs as
    // the chart does (aggregated from admin, with the platform's edit rules).
    let answer = await retrieve(owner);
    for (let i = 0; i < 50 && answer.code !== 0; i++) {
      await sleep(200); // the project controller binds the owner shortly after the namespace
      answer = await retrieve(owner);
    }
    expect(answer.code, answer.stderr).toBe(0);
    const kubeConfig = parseYaml(JSON.parse(answer.stdout).status.kubeConfig);
    // Token mode points at the virtual cluster's path on the gateway's access proxy.
    const gateway = new URL(parseYaml(readFileSync(adminConfig, 'utf8')).clusters[0].cluster.server);
    expect(kubeConfig.clusters[0].cluster.server).toBe(
      `${gateway.origin}/kubernetes/project/web/virtualcluster/dev`,
    );
    const refused = await retrieve(outsider);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Forbidden|forbidden/);
  };

  test(
    'restart: the state is kept and the same admin.kubeconfig still works',
    async () => {
      const adminBefore = readFileSync(adminConfig, 'utf8');
      const hostBefore = readFileSync(hostConfig, 'utf8');
      current = startDev(stateDir);
      await untilRunning(current);
      expect(readFileSync(adminConfig, 'utf8')).toBe(adminBefore);
      expect(readFileSync(hostConfig, 'utf8')).toBe(hostBefore);
      expect(current.output.stderr).toContain('(its key is still valid)');
      expect(current.output.stderr).not.toContain('created the admin access key');

      expect(
        await ok(adminConfig, ['get', 'sharedsecret', secretName, '-n', namespace, '-o', 'name']),
      ).toContain(secretName);
      expect(await ok(hostConfig, ['get', 'ns'])).toContain(namespace);

      await stopAndCheckNothingLeft(current);
    },
    RUN_TIMEOUT_MS,
  );

  test(
    '--reset: starts from nothing, with a new admin key that works',
    async () => {
      const adminBefore = readFileSync(adminConfig, 'utf8');
      current = startDev(stateDir, ['--reset']);
      await untilRunning(current);
      expect(current.output.stderr).toContain('platform dev: resetting');
      const adminAfter = readFileSync(adminConfig, 'utf8');
      expect(adminAfter).not.toBe(adminBefore);
      expect(tokenOfKubeconfig(adminAfter)).not.toBe(tokenOfKubeconfig(adminBefore));

      expect(await ok(adminConfig, ['get', 'sharedsecrets.management.platform', '-A'])).not.toContain(
        secretName,
      );
      const gone = await run(hostConfig, ['get', 'namespace', namespace]);
      expect(gone.code).not.toBe(0);
      expect(gone.stderr).toContain('NotFound');

      await stopAndCheckNothingLeft(current);
    },
    RUN_TIMEOUT_MS,
  );
});
