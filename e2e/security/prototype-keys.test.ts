// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { eventually, waitForValue } from '../support/wait.ts';
import { conditionOf, MALLORY, MP, TEAM, useTenantPlatform, V1 } from './support.ts';

/**
 * Issue 29: keys named like Object.prototype members (`constructor`, `toString`, `valueOf`,
 * `__proto__`) in everything mallory controls: her virtual cluster's objects (data, labels,
 * annotations), a SharedSecret's data and access rules, an access key's fields and a request body
 * through the gateway. Each hostile object must be handled as data: it changes no other object's
 * shape, crashes no component (they run in this process: its Object.prototype must stay as it
 * was), and stalls no work queue (an ordinary object after it is still reconciled).
 */
describe('keys named like Object.prototype members cannot hurt the platform', () => {
  const env = useTenantPlatform({ gateway: true });
  /** JSON as mallory sends it: `__proto__` is an own key (an object literal would set the prototype). */
  const json = (text: string) => JSON.parse(text);
  const sorted = (map: Record<string, unknown> | undefined) =>
    JSON.stringify(Object.entries(map ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)));
  const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();
  /** Nothing reached Object.prototype of this process (the components run in it). */
  const expectPrototypeIntact = () => {
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeNames);
    expect(Object.getPrototypeOf({})).toBe(Object.prototype);
    expect(({} as any).user).toBeUndefined();
    expect(({} as any).polluted).toBeUndefined();
  };
  /** Through the operator and a tenant's syncer: 60 s. */
  const waitFor = <T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean) =>
    waitForValue(what, read, ok, 60_000);

  test('through her virtual cluster: a ConfigMap and a Secret with such keys sync exactly, and the syncer goes on with the next object', async () => {
    const { virtual, admin } = env();
    const data = json('{"__proto__": "cA==", "constructor": "Yw==", "toString": "dA==", "plain": "cA=="}');
    const metadata = {
      labels: { constructor: 'a', toString: 'b' },
      annotations: { valueOf: 'c', hasOwnProperty: 'd' },
    };
    await virtual.create('/api/v1/namespaces/apps/configmaps', {
      metadata: { name: 'proto', ...metadata },
      data,
    });
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'proto', ...metadata },
      data,
    });
    // After the hostile ones, an ordinary object of each kind.
    await virtual.create('/api/v1/namespaces/apps/configmaps', {
      metadata: { name: 'after-proto' },
      data: { a: '1' },
    });
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'after-proto' },
      data: { a: 'MQ==' },
    });

    for (const plural of ['configmaps', 'secrets']) {
      const path = (name: string) =>
        `/api/v1/namespaces/${TEAM}/${plural}/${hostNameLong(name, 'apps', 'dev')}`;
      const copy = await waitFor(
        `the host copy of ${plural} proto`,
        () => admin.get(path('proto')),
        (c) => c !== null,
      );
      expect(sorted(copy.data)).toBe(sorted(data));
      expect(copy.metadata.labels).toMatchObject(metadata.labels);
      expect(copy.metadata.annotations).toMatchObject(metadata.annotations);
      const after = await waitFor(
        `the host copy of ${plural} after-proto`,
        () => admin.get(path('after-proto')),
        (c) => c !== null,
      );
      expect(Object.keys(after.data)).toEqual(['a']);
    }
    // Removed on the virtual side: removed on the host, not kept because of its name.
    await virtual.merge('/api/v1/namespaces/apps/configmaps/proto', {
      data: json('{"__proto__": null, "constructor": null, "toString": null}'),
    });
    await waitFor(
      'the removed keys gone from the host copy',
      () => admin.get(`/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('proto', 'apps', 'dev')}`),
      (c) => sorted(c?.data) === sorted({ plain: 'cA==' }),
    );
    const instance = await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`);
    expect(conditionOf(instance, 'Syncing')?.status).toBe('True');
    expectPrototypeIntact();
  });

  test('a SharedSecret with such data keys and access rules: copied exactly, projected, and the controllers go on', async () => {
    const { mallory, admin } = env();
    // `__proto__` is no SharedSecret key (the CRD refuses it: zod, which parses the objects, would
    // drop it); refused as invalid, not failing the apiserver or the webhook.
    const refused = await mallory.call('POST', `${MP}/namespaces/${TEAM}/sharedsecrets`, {
      body: {
        apiVersion: V1,
        kind: 'SharedSecret',
        metadata: { name: 'proto-refused' },
        spec: { data: json('{"__proto__": "cA=="}') },
      },
    });
    expect(refused.status).toBe(422);
    const data = json('{"constructor": "Yw==", "toString": "dA==", "valueOf": "dg=="}');
    await mallory.create(`${MP}/namespaces/${TEAM}/sharedsecrets`, {
      apiVersion: V1,
      kind: 'SharedSecret',
      metadata: { name: 'proto', labels: { constructor: 'a' }, annotations: { toString: 'b' } },
      spec: {
        data,
        access: [
          { name: 'constructor', verbs: ['get'], users: ['constructor', MALLORY], teams: ['constructor'] },
        ],
      },
    });
    // A Secret filled from it, selecting the keys by name, one of them missing.
    await mallory.create(`/api/v1/namespaces/${TEAM}/secrets`, {
      metadata: {
        name: 'proto-copy',
        labels: {
          'management.platform/sharedsecret-name': 'proto',
          'management.platform/sharedsecret-namespace': TEAM,
        },
        annotations: {
          'management.platform/sharedsecret-keys': '__proto__,constructor,toString,valueOf,hasOwnProperty',
        },
      },
    });
    const copy = await waitFor(
      'the Secret filled from the SharedSecret',
      () => admin.get(`/api/v1/namespaces/${TEAM}/secrets/proto-copy`),
      (s) => s?.data !== undefined,
    );
    expect(sorted(copy.data)).toBe(sorted(data));
    // The selected keys it lacks are reported as missing, not found among Object.prototype's.
    const missing = await waitFor(
      'the SharedSecretKeyNotFound Event',
      async () =>
        (await admin.list(`/apis/events.k8s.io/v1/namespaces/${TEAM}/events`)).find(
          (e: any) => e.reason === 'SharedSecretKeyNotFound' && e.regarding?.name === 'proto-copy',
        ),
      (e) => e !== undefined,
    );
    expect(missing.note).toContain('has no key(s) __proto__, hasOwnProperty');
    const shared = await waitFor(
      'the SharedSecret status',
      () => admin.get(`${MP}/namespaces/${TEAM}/sharedsecrets/proto`),
      (s) => Array.isArray(s?.status?.dataKeys),
    );
    expect(shared.status.dataKeys).toEqual(['constructor', 'toString', 'valueOf']);
    // Its access rule is projected; an ordinary SharedSecret after it is projected too.
    await mallory.create(`${MP}/namespaces/${TEAM}/sharedsecrets`, {
      apiVersion: V1,
      kind: 'SharedSecret',
      metadata: { name: 'after-proto' },
      spec: { data: { a: 'MQ==' }, access: [{ name: 'readers', verbs: ['get'], users: [MALLORY] }] },
    });
    const projectedFor = async (uid: string) =>
      (
        await admin.list(
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${TEAM}/roles`,
          `management.platform/sharedsecret-uid=${uid}`,
        )
      ).length;
    const after = await admin.get(`${MP}/namespaces/${TEAM}/sharedsecrets/after-proto`);
    await waitFor(
      'the roles of both SharedSecrets',
      async () => [await projectedFor(shared.metadata.uid), await projectedFor(after.metadata.uid)],
      ([hostile, ordinary]) => hostile === 1 && ordinary === 1,
    );
    expectPrototypeIntact();
  });

  test('through the gateway: an access key body with such keys cannot take another owner or shape, and the gateway goes on', async () => {
    const { admin, gatewayUrl } = env();
    const own = generateAccessKey(randomBytes);
    await admin.create(`${MP}/ownedaccesskeys`, {
      apiVersion: V1,
      kind: 'OwnedAccessKey',
      metadata: { name: 'mallory-proto' },
      spec: { user: MALLORY, type: 'User', key: own.key },
    });
    const gateway = (method: string, path: string, body?: string) =>
      fetch(`${gatewayUrl}/kubernetes/management/apis/${V1}/${path}`, {
        method,
        headers: { authorization: `Bearer ${own.key}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body }),
      });
    await eventually(
      async () => (await gateway('GET', 'ownedaccesskeys')).status === 200,
      60_000,
      'the gateway to accept her key',
    );
    const hostile = `{
      "apiVersion": "${V1}", "kind": "OwnedAccessKey",
      "__proto__": {"spec": {"user": "admin", "type": "User"}, "polluted": true},
      "constructor": {"prototype": {"polluted": true}},
      "metadata": {"name": "proto-key", "labels": {"constructor": "a", "toString": "b"},
                   "annotations": {"valueOf": "c"}},
      "spec": {"__proto__": {"user": "admin", "team": "admins"}, "constructor": {"prototype": {"polluted": true}},
               "toString": "x", "valueOf": "y", "type": "User", "displayName": "proto"}
    }`;
    const answer = await gateway('POST', 'ownedaccesskeys', hostile);
    expect(answer.status, await answer.clone().text()).toBe(201);
    // Created: hers, and of the shape any key has, whatever the body's extra keys said (the
    // apiserver prunes unknown fields; nothing took them for the prototype on the way).
    const stored = await admin.get(`${MP}/ownedaccesskeys/proto-key`);
    expect(stored.spec.user).toBe(MALLORY);
    expect(stored.spec.team).toBeUndefined();
    for (const key of ['__proto__', 'constructor', 'toString', 'valueOf'])
      expect(Object.hasOwn(stored.spec, key), `spec.${key}`).toBe(false);
    expect(sorted(stored.metadata.labels)).toBe(sorted({ constructor: 'a', toString: 'b' }));
    expect(sorted(stored.metadata.annotations)).toBe(sorted({ valueOf: 'c' }));
    // No key of admin's appeared, and the gateway serves the next ordinary request.
    const keys = await admin.list(`${MP}/ownedaccesskeys`);
    expect(keys.filter((k: any) => k.spec?.user === 'admin' || k.spec?.team === 'admins')).toEqual([]);
    const ordinary = await gateway(
      'POST',
      'ownedaccesskeys',
      JSON.stringify({
        apiVersion: V1,
        kind: 'OwnedAccessKey',
        metadata: { name: 'after-proto-key' },
        spec: {},
      }),
    );
    expect(ordinary.status, await ordinary.clone().text()).toBe(201);
    expect((await admin.get(`${MP}/ownedaccesskeys/after-proto-key`)).spec.user).toBe(MALLORY);
    // The access key controller reconciled both, the hostile one and the one after it.
    for (const name of ['proto-key', 'after-proto-key'])
      await waitFor(
        `access key ${name} Ready`,
        () => admin.get(`${MP}/ownedaccesskeys/${name}`),
        (key) => conditionOf(key, 'Ready')?.status === 'True',
      );
    expectPrototypeIntact();
  });
});
