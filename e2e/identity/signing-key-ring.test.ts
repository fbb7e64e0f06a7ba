import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signingKeyRing } from '../../src/identity/signing-key-ring.ts';
import {
  type RotationPolicy,
  SIGNING_KEYS_SECRET,
  SigningKeyStore,
} from '../../src/identity/signing-keys.ts';
import type { KubeApi, RequestOptions } from '../../src/runtime/kube-api.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * The signing keys every part of a process reads (direct tokens, JWKS, the OpenID provider) come
 * from the informer's copy of their Secret: after the first rotation wrote it, reading the ring
 * asks the apiserver nothing, and keys another replica adds are seen through the watch.
 */
describe('signing key ring: the Secret watched by name', () => {
  const namespace = useNamespace('signing-keys');
  // No rotation falls due during the test, except the one another replica makes on purpose.
  const policy: RotationPolicy = {
    rotationPeriodMs: 3600_000,
    publishLeadMs: 60_000,
    maxTokenTtlMs: 7200_000,
  };
  const clients: KubeClient[] = [];
  const client = () => {
    const created = new KubeClient(hostKubeConfig());
    clients.push(created);
    return created;
  };
  let manager: Manager;
  /** The requests the ring sent for the signing keys' Secret. */
  const ringRequests: string[] = [];

  beforeAll(async () => {
    manager = new Manager({ api: client(), logger: pino({ level: 'silent' }) });
    const hostClient = client();
    const counting: KubeApi = {
      request<T>(options: RequestOptions): Promise<T> {
        if (options.path.includes('/secrets'))
          ringRequests.push(`${options.method ?? 'GET'} ${options.path}`);
        return hostClient.request<T>(options);
      },
      watch: (...args) => hostClient.watch(...args),
    };
    signingKeyRing(manager, namespace(), { api: counting, policy });
    await manager.start();
  });
  afterAll(async () => {
    await manager?.stop();
    for (const each of clients) each.close();
  });

  test('one ring per manager and namespace; reads after the first rotation ask the apiserver nothing', async () => {
    const ring = signingKeyRing(manager, namespace(), { api: client(), policy });
    // The gateway and the login ask for it with their own options: the same ring answers both.
    expect(signingKeyRing(manager, namespace(), { api: client() })).toBe(ring);
    const first = await ring.current();
    expect(first).toHaveLength(1);
    expect(ringRequests.some((request) => request.startsWith('POST'))).toBe(true);

    await eventually(
      async () => JSON.stringify(await ring.current()) === JSON.stringify(first),
      30_000,
      'the informer to hold the ring written',
    );
    const asked = ringRequests.length;
    for (let i = 0; i < 5; i++) expect((await ring.current()).map((key) => key.kid)).toEqual([first[0]!.kid]);
    expect(ringRequests.slice(asked)).toEqual([]);

    // Another replica rotates (its clock a rotation period ahead): its new key is seen through the watch.
    const replica = new SigningKeyStore(client(), namespace(), policy);
    const rotated = await replica.ensure(Date.now() + policy.rotationPeriodMs);
    expect(rotated).toHaveLength(2);
    await eventually(
      async () => (await ring.current()).length === 2,
      30_000,
      `the other replica's key in Secret ${SIGNING_KEYS_SECRET}`,
    );
    expect((await ring.current()).map((key) => key.kid)).toEqual(rotated.map((key) => key.kid));
    expect(ringRequests.slice(asked)).toEqual([]);
  });
});
