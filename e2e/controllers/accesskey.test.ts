import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../src/api/ownedaccesskey.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { AccessKeyDisabled, InvalidAccessKey } from '../../src/identity/authenticate.ts';
import {
  type AccessKeyAuthenticator,
  setupAccessKeyAuthenticator,
} from '../../src/identity/authenticator.ts';
import { generateAccessKey, hashAccessKey } from '../../src/identity/keys.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
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
  // The gateway's authentication library, as each gateway replica runs it.
  let authentication:
    | { manager: Manager; authenticator: AccessKeyAuthenticator; pepper: Uint8Array }
    | undefined;
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
    const api = new KubeClient(kc);
    const pepper = await new PepperStore(api, PLATFORM_NAMESPACE, randomBytes).ensure();
    const manager = new Manager({
      api,
      clock: systemClock,
      random: systemRandom,
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
    });
    const authenticator = setupAccessKeyAuthenticator(manager, {
      api,
      clock: systemClock,
      pepper: new PepperStore(api, PLATFORM_NAMESPACE, randomBytes),
      platformNamespace: PLATFORM_NAMESPACE,
    });
    await manager.start();
    await authenticator.start();
    await eventually(async () => authenticator.ready(), 30_000, 'authenticator caches');
    authentication = { manager, authenticator, pepper };
  });
  afterAll(async () => {
    await authentication?.authenticator.stop();
    await authentication?.manager.stop();
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
  /** A key whose plaintext we hold (hashed with the platform's pepper, as admission would). */
  const createUsableKey = async (name: string, spec: Partial<OwnedAccessKey['spec']>) => {
    const generated = generateAccessKey(randomBytes);
    const key = await createKey(name, {
      keyId: generated.id,
      keyHash: hashAccessKey(generated.key, authentication!.pepper),
      ...spec,
    });
    return { key, token: generated.key };
  };
  const getKey = async (name: string) =>
    (await custom().getClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      name,
    })) as OwnedAccessKey;
  const authenticateWhenCached = async (name: string, token: string) => {
    await eventually(
      async () => authentication!.authenticator.keys.get(name) !== undefined,
      10_000,
      `${name} cached`,
    );
    return authentication!.authenticator.authenticateCached(token);
  };
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

  const readyOf = async (name: string) =>
    (await getKey(name)).status?.conditions?.find((condition) => condition.type === 'Ready');
  const setDisabled = (name: string, disabled: boolean) =>
    custom().patchClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      name,
      body: [{ op: 'add', path: '/spec/disabled', value: disabled }],
    });
  /** Polls until the key's Ready condition matches; returns it. */
  const waitReady = async (
    name: string,
    expected: { status: string; reason: string; observedGeneration: number },
  ) => {
    let last: Awaited<ReturnType<typeof readyOf>>;
    await eventually(
      async () => {
        last = await readyOf(name);
        return (
          last?.status === expected.status &&
          last.reason === expected.reason &&
          last.observedGeneration === expected.observedGeneration
        );
      },
      30_000,
      `${name}: Ready ${expected.status}/${expected.reason} for generation ${expected.observedGeneration}`,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last: ${JSON.stringify(last)}`);
    });
    return last!;
  };

  test('Ready: Active until its expiry (or without one), Disabled while spec.disabled, for the current generation', async () => {
    await createKey('ready-ttl', { ttl: 3600 });
    const expiring = await waitReady('ready-ttl', {
      status: 'True',
      reason: 'Active',
      observedGeneration: 1,
    });
    const { expirationTimestamp } = (await getKey('ready-ttl')).status ?? {};
    expect(expirationTimestamp).toBeDefined();
    expect(expiring.message).toBe(`the key is active until ${expirationTimestamp}`);

    await createKey('ready-forever', {});
    const forever = await waitReady('ready-forever', {
      status: 'True',
      reason: 'Active',
      observedGeneration: 1,
    });
    expect(forever.message).toBe('the key is active and does not expire');
    expect((await getKey('ready-forever')).status?.expirationTimestamp).toBeUndefined();

    await setDisabled('ready-forever', true);
    const disabled = await waitReady('ready-forever', {
      status: 'True',
      reason: 'Disabled',
      observedGeneration: 2,
    });
    expect(disabled.message).toContain('spec.disabled');
    // Steady: reconciling an unchanged key writes nothing (no timestamps in the message). A
    // fresh operator reconciles every key once; this one keeps its resourceVersion.
    const steady = (await getKey('ready-forever')).metadata.resourceVersion;
    await operator?.stop();
    await startOperator();
    const keyCount = (
      (await custom().listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as {
        items: unknown[];
      }
    ).items.length;
    const reconciles = async () =>
      (await operator!.registry.getSingleMetric('controller_runtime_reconcile_total')!.get()).values
        .filter((v) => v.labels.controller === 'accesskey')
        .reduce((sum, v) => sum + v.value, 0);
    await eventually(async () => (await reconciles()) >= keyCount, 30_000, 'every key reconciled');
    expect((await getKey('ready-forever')).metadata.resourceVersion).toBe(steady);

    await setDisabled('ready-forever', false);
    const enabled = await waitReady('ready-forever', {
      status: 'True',
      reason: 'Active',
      observedGeneration: 3,
    });
    expect(Date.parse(enabled.lastTransitionTime)).toBeGreaterThanOrEqual(
      Date.parse(disabled.lastTransitionTime),
    );
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
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespacedSecret({ namespace: PLATFORM_NAMESPACE, name: 'platform-config' });
  });

  test('ttlAfterLastActivity extends the key while it is used; unused, it expires from its last activity', async () => {
    await custom()
      .createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: 'users',
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'User', metadata: { name: 'alice' }, spec: {} },
      })
      .catch(() => {});
    const { key, token } = await createUsableKey('inactivity-4s', { ttl: 4, ttlAfterLastActivity: true });
    const created = Date.parse(key.metadata.creationTimestamp as string);
    // Used every second for 10 s: far past creation + ttl, it keeps working and keeps existing.
    const usedUntil = created + 10_000;
    while (Date.now() < usedUntil) {
      const result = await authenticateWhenCached('inactivity-4s', token);
      expect(result.ok, JSON.stringify(result)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    expect(await exists('inactivity-4s')).toBe(true);
    const lastActivity = (await getKey('inactivity-4s')).status?.lastActivity;
    expect(Date.parse(lastActivity as string)).toBeGreaterThan(created + 5000);
    // Now unused: deleted 4 s after the recorded last activity (stored to the second).
    const lateness = await gone('inactivity-4s', Date.parse(lastActivity as string) + 4000);
    process.stdout.write(`inactivity expiry: deleted ${lateness} ms after lastActivity + ttl\n`);
    expect(lateness).toBeGreaterThanOrEqual(0);
  });

  test('authentication follows the cache: a key disabled, enabled again and deleted, at once', async () => {
    const { token } = await createUsableKey('follows-cache', {
      user: undefined,
      subject: 'follows-cache-bot',
      type: 'Other',
    });
    expect((await authenticateWhenCached('follows-cache', token)).ok).toBe(true);
    const { authenticator } = authentication!;
    /** Waits until the cached key (undefined: none) is as `holds` says. */
    const cachedWhen = (holds: (cached: OwnedAccessKey | undefined) => boolean) =>
      eventually(
        async () => holds(authenticator.keys.get('follows-cache')),
        10_000,
        'the change in the cache',
      );
    // keyId and keyHash cannot change (the CRD refuses it): what changes is disabled, and the end.
    await setDisabled('follows-cache', true);
    await cachedWhen((cached) => cached?.spec.disabled === true);
    const refused = authenticator.authenticateCached(token);
    expect(!refused.ok && refused.failure).toBeInstanceOf(AccessKeyDisabled);
    await setDisabled('follows-cache', false);
    await cachedWhen((cached) => cached?.spec.disabled === false);
    expect(authenticator.authenticateCached(token).ok).toBe(true);
    await custom().deleteClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      name: 'follows-cache',
    });
    await cachedWhen((cached) => cached === undefined);
    const gone = authenticator.authenticateCached(token);
    expect(!gone.ok && gone.failure).toBeInstanceOf(InvalidAccessKey);
  });

  test('a disabled key is kept past its deadline but never authenticates', async () => {
    const { key, token } = await createUsableKey('disabled-usable', { ttl: 1, disabled: true });
    const result = await authenticateWhenCached('disabled-usable', token);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.failure).toBeInstanceOf(AccessKeyDisabled);
    await new Promise((resolve) =>
      setTimeout(resolve, Date.parse(key.metadata.creationTimestamp as string) + 3000 - Date.now()),
    );
    expect(await exists('disabled-usable')).toBe(true);
    const later = authentication!.authenticator.authenticateCached(token);
    expect(!later.ok && later.failure).toBeInstanceOf(AccessKeyDisabled);
  });
});
