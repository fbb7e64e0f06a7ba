import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { processesNaming } from '../support/instance-processes.ts';
import {
  type DevPlatform,
  type DevRun,
  killDev,
  startDev,
  stopDev,
  untilRunning,
} from '../support/platform-dev.ts';
import { eventually, waitForValue } from '../support/wait.ts';
import { runDocExamples } from './runner.ts';
import { trustedCas, useTempDir } from './support.ts';

/**
 * docs/virtual-clusters.md on a real `platform dev` (the whole platform on a local control
 * plane; its virtual clusters provisioned as child processes): the admin's template and project,
 * then everything as alice with her own key through the gateway. The User alice and her key are
 * made here, as a platform admin would give them to her.
 */
const dir = useTempDir('doc-virtual-clusters-');
const stateDir = join(dir, 'dev');
let run: DevRun | undefined;
let platform: DevPlatform | undefined;
let aliceKey = '';

beforeAll(async () => {
  run = startDev(stateDir);
  platform = await untilRunning(run);
  const admin = platform.adminKubeconfig;
  const user = await kubectl(['apply', '-f', '-'], {
    kubeconfig: admin,
    stdin:
      'apiVersion: management.platform/v1\nkind: User\nmetadata:\n  name: alice\nspec:\n  username: alice\n',
  });
  if (user.code !== 0) throw new Error(user.stderr);
  const key = await kubectl(['create', '-o', 'json', '-f', '-'], {
    kubeconfig: admin,
    stdin:
      'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  generateName: alice-\nspec:\n  user: alice\n  ttl: 86400\n',
  });
  if (key.code !== 0) throw new Error(key.stderr);
  aliceKey = JSON.parse(key.stdout).spec.key;
  await untilQuotaControllerCountsInstances(platform.hostKubeconfig);
}, 420_000);

/**
 * The page's reader has a platform that has run for a while. On one started moments ago the
 * host's quota controller counts VirtualClusterInstances only after its discovery resync (30 s)
 * found their CRD, and a quota set before that only at its full resync (5 minutes), as the page
 * says: wait until a scratch quota is counted, so the project's quota is counted at once.
 */
async function untilQuotaControllerCountsInstances(kubeconfig: string): Promise<void> {
  const count = 'count/virtualclusterinstances.management.platform';
  const ok = async (args: string[]) => {
    const result = await kubectl(args, { kubeconfig });
    if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  await ok(['create', 'namespace', 'quota-scratch']);
  await eventually(
    async () => {
      await ok(['-n', 'quota-scratch', 'delete', 'resourcequota', 'probe', '--ignore-not-found', '--wait']);
      await ok(['-n', 'quota-scratch', 'create', 'resourcequota', 'probe', `--hard=${count}=1`]);
      for (let i = 0; i < 20; i++) {
        const used = await ok([
          '-n',
          'quota-scratch',
          'get',
          'resourcequota',
          'probe',
          '-o',
          'jsonpath={.status.used}',
        ]);
        if (used.includes(count)) return true;
        await sleep(500);
      }
      return false;
    },
    120_000,
    'the quota controller to count VirtualClusterInstances',
  );
  await ok(['delete', 'namespace', 'quota-scratch', '--wait=false']);
}

afterAll(async () => {
  if (run && (await stopDev(run)) !== 0)
    throw new Error(`platform dev did not stop cleanly:\n${run.output.stderr}`);
  await killDev(run);
  for (let i = 0; i < 40 && processesNaming(stateDir).length > 0; i++) await sleep(250);
});

const dev = () => {
  if (!platform) throw new Error('platform dev is not running');
  return platform;
};
const instanceDir = () => dev().instanceDir('p-web', 'dev');

runDocExamples('virtual-clusters.md', {
  env: () => ({
    PLATFORM_URL: dev().url,
    ...trustedCas(dir, 'trusted-cas.pem', [dev().caPem]),
    PLATFORM_ACCESS_KEY: aliceKey,
    PLATFORM_ADMIN_KEY: dev().adminKey,
  }),
  hooks: {
    ready: {
      // What the page says runs: the instance's own etcd, kube-apiserver and controller manager.
      after: () => {
        expect(
          processesNaming(instanceDir())
            .map((p) => p.component)
            .sort(),
        ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
      },
    },
    sleep: {
      // Asleep: its processes ended, its storage kept.
      after: async () => {
        await waitForValue(
          'no process of the instance',
          async () => processesNaming(instanceDir()),
          (p) => p.length === 0,
        );
        expect(existsSync(join(instanceDir(), 'data'))).toBe(true);
      },
    },
    'wake-command': {
      after: () => {
        expect(
          processesNaming(instanceDir())
            .map((p) => p.component)
            .sort(),
        ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
      },
    },
    wake: {
      after: () => {
        expect(
          processesNaming(instanceDir())
            .map((p) => p.component)
            .sort(),
        ).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
      },
    },
    delete: {
      // Nothing of it on disk, and no process.
      after: () => {
        expect(processesNaming(instanceDir())).toEqual([]);
        expect(existsSync(instanceDir())).toBe(false);
      },
    },
  },
});
