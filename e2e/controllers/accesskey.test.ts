import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../src/api/ownedaccesskey.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';

const GROUP = 'management.platform';
const VERSION = 'v1';
const PLURAL = 'ownedaccesskeys';
const PLATFORM_NAMESPACE = 'platform-system';

// Access keys are cluster-scoped, so this file runs its own apiserver: an expiry controller on
// the shared host cluster would delete other files' keys.
describe('access key lifecycle', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let kc: KubeConfig;
  let operator: Manager | undefined;
  const startOperator = async () => {
    operator = createOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['accesskey'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
      }),
      pino({ level: 'silent' }),
    );
    await operator.start();
  };
  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('keys') });
    kc = kubeConfigFor(cluster);
    await installCrds(kc);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    await startOperator();
  });
  afterAll(async () => {
    await operator?.stop();
  });

  const custom = () => kc.makeApiClient(CustomObjectsApi);
  const createKey = async (name: string, spec: Partial<OwnedAccessKey['spec']>) =>
    (await custom().createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'OwnedAccessKey',
        metadata: { name },
        spec: {
          user: 'alice',
          type: 'User',
          keyId: randomBytes(8)
            .toString('hex')
            .slice(0, 16)
            .replace(/[0189]/g, 'a'),
          keyHash: randomBytes(32).toString('hex'),
          ...spec,
        },
      },
    })) as OwnedAccessKey;
  const exists = (name: string) =>
    custom()
      .getClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, name })
      .then(
        () => true,
        () => false,
      );
  /** Polls until the key is gone; returns how late that was after `deadline` (ms). */
  const gone = async (name: string, deadline: number) => {
    await eventually(async () => !(await exists(name)), 60_000, `${name} to be deleted`);
    return Date.now() - deadline;
  };

  test('a key with ttl 3 s is deleted at its deadline, across an operator restart, and the expiry is in status', async () => {
    const key = await createKey('ttl-3s', { ttl: 3 });
    const deadline = Date.parse(key.metadata.creationTimestamp as string) + 3000;
    await eventually(
      async () => {
        const current = (await custom().getClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          name: 'ttl-3s',
        })) as OwnedAccessKey;
        return current.status?.expirationTimestamp === new Date(deadline).toISOString();
      },
      30_000,
      'status.expirationTimestamp',
    );
    // Restart: the new operator learns the deadline from the object alone.
    await operator?.stop();
    await startOperator();
    const lateness = await gone('ttl-3s', deadline);
    // creationTimestamp has second precision, so the true deadline may be up to 1 s earlier.
    process.stdout.write(
      `access key expiry: deleted ${lateness} ms after its deadline (creationTimestamp truncated to the second)\n`,
    );
    expect(lateness).toBeGreaterThanOrEqual(0);
  });

  test('the platform config caps every key at accessKeyMaxTTLSeconds; a disabled key is kept', async () => {
    await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: PLATFORM_NAMESPACE,
      body: {
        metadata: { name: 'platform-config' },
        stringData: { config: 'auth:\n  accessKeyMaxTTLSeconds: 2\n' },
      },
    });
    const capped = await createKey('no-ttl-capped', {});
    await createKey('disabled-expired', { ttl: 1, disabled: true });
    await gone('no-ttl-capped', Date.parse(capped.metadata.creationTimestamp as string) + 2000);
    expect(await exists('disabled-expired')).toBe(true);
  });
});
