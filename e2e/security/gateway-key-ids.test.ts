import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { BY_KEY_ID } from '../../src/identity/authenticator.ts';
import {
  composeAccessKey,
  generateAccessKey,
  hashAccessKey,
  parseAccessKey,
} from '../../src/identity/keys.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 2 of issue 16: key ids are public, and were not unique. A user created a key whose
 * `spec.key` carried a victim's id with a secret of their own; the authenticator took the first
 * object of its index for that id, whose order changes with every status write, and from then on
 * the victim's key answered 401. Now admission refuses a second key with an id (also when the
 * creates race: exactly one of many wins), and authentication tells keys apart by their hash,
 * whatever order they come in.
 */
describe('security: access key ids are unique', () => {
  const env = useGatewayEnv();
  let victim: string;
  let mallory: string;

  beforeAll(async () => {
    victim = await env().user(uniqueName('victim'));
    mallory = await env().user(uniqueName('mallory'));
  });

  const victimId = () => {
    const parsed = parseAccessKey(victim);
    if (parsed instanceof Error) throw parsed;
    return parsed.id;
  };
  const works = async (token: string) => (await call(`${env().base}/apis`, { token })).status;

  test("a key carrying the victim's id is refused, through the gateway and directly", async () => {
    const copy = composeAccessKey(victimId(), generateAccessKey(randomBytes).secret);
    const through = await call(`${env().api}/ownedaccesskeys`, {
      method: 'POST',
      token: mallory,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { key: copy } }),
    });
    expect(through.status, through.text).toBe(422);
    expect(through.json.details.causes).toContainEqual(
      expect.objectContaining({ field: 'spec.key', reason: 'FieldValueDuplicate' }),
    );
    const direct = await env()
      .custom.createClusterCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'ownedaccesskeys',
        body: {
          apiVersion: GROUP_VERSION,
          kind: 'OwnedAccessKey',
          metadata: { name: uniqueName('copy') },
          spec: { subject: 'm', key: copy },
        },
      })
      .then(
        () => 201,
        (error: { code?: number }) => error.code,
      );
    expect(direct).toBe(422);
    // The victim's key goes on working, many status writes later.
    for (let i = 0; i < 20; i++) expect(await works(victim)).toBe(200);
  });

  test('of many concurrent creates with one id, exactly one is admitted', async () => {
    const id = generateAccessKey(randomBytes).id;
    const api = new KubeClient(env().kc);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api
          .request({
            method: 'POST',
            path: `/apis/${GROUP_VERSION}/ownedaccesskeys`,
            body: {
              apiVersion: GROUP_VERSION,
              kind: 'OwnedAccessKey',
              metadata: { name: uniqueName(`race-${i}`) },
              spec: {
                subject: `racer-${i}`,
                key: composeAccessKey(id, generateAccessKey(randomBytes).secret),
              },
            },
          })
          .then(
            () => 201,
            (error: { code?: number }) => error.code ?? 0,
          ),
      ),
    );
    expect(results.filter((code) => code === 201)).toHaveLength(1);
    expect(results.filter((code) => code !== 201).every((code) => code === 422)).toBe(true);
    const stored = await api.request<{ items: unknown[] }>({
      method: 'GET',
      path: `/apis/${GROUP_VERSION}/ownedaccesskeys`,
      query: { fieldSelector: `spec.keyId=${id}` },
    });
    expect(stored.items).toHaveLength(1);
  });
});

/**
 * Keys stored without admission (before it ran, or while it was away) may share an id: each still
 * authenticates with its own secret and only its own, whatever order the index holds them in and
 * however often their status is written.
 */
describe('security: keys sharing an id are told apart by their hash', () => {
  const env = useGatewayEnv({ onHost: true });

  test('two keys with one id each authenticate as their own owner, through status writes', async () => {
    const id = generateAccessKey(randomBytes).id;
    const shared = [0, 1].map(() => composeAccessKey(id, generateAccessKey(randomBytes).secret));
    const owners = [uniqueName('owner-a'), uniqueName('owner-b')];
    const names = [uniqueName('shared-a'), uniqueName('shared-b')];
    // Stored with the hash made here, as admission would, but with one id: no admission runs here.
    const pepper = await new PepperStore(
      new KubeClient(env().kc),
      env().platformNamespace,
      randomBytes,
    ).load();
    if (!pepper) throw new Error('the gateway has no pepper yet');
    const api = new KubeClient(env().kc);
    for (const [i, token] of shared.entries()) {
      await api.request({
        method: 'POST',
        path: `/apis/${GROUP_VERSION}/ownedaccesskeys`,
        body: {
          apiVersion: GROUP_VERSION,
          kind: 'OwnedAccessKey',
          metadata: { name: names[i] },
          spec: { subject: owners[i], type: 'Other', keyId: id, keyHash: hashAccessKey(token, pepper) },
        },
      });
    }
    // Both in the gateway's caches first: while they hold one of the two, the other is judged
    // against it alone (a cached key with the id is not a miss: no read past the caches), and
    // admission would never have let the second id in anyway.
    await eventually(
      () => env().gateway.authenticator.keys.byIndex(BY_KEY_ID, id).length === 2,
      60_000,
      'both keys in the caches',
    );
    const whoami = async (token: string) =>
      env().gateway.authenticator.authenticate(token) as Promise<{
        ok: boolean;
        identity?: { username: string };
      }>;
    for (let round = 0; round < 10; round++) {
      // Status writes reorder the index; each key stays its owner's.
      await api.request({
        method: 'PATCH',
        path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${names[round % 2]}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            lastActivity: new Date(Date.now() + round * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
          },
        },
      });
      const [a, b] = await Promise.all(shared.map(whoami));
      expect(a?.identity?.username).toBe(owners[0]);
      expect(b?.identity?.username).toBe(owners[1]);
    }
    const wrong = composeAccessKey(id, generateAccessKey(randomBytes).secret);
    expect((await whoami(wrong)).ok).toBe(false);
  });
});
