import { randomBytes } from 'node:crypto';
import { type Dispatcher, fetch as undiciFetch } from 'undici';
import { describe, expect, test } from 'vitest';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../src/api/config.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { useAccessProxyEnv } from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { call, type GatewayEnv, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * Issue 26, lifetimes: a watch held open by a key ends when the key stops being valid (disabled,
 * deleted, expired, its owner removed or disabled), not at the watch's natural end (asked for an hour here:
 * longer than any test), on the management API and through the access proxy. The same person's
 * other key holds a watch all along, which goes on and still delivers events: the cut is the
 * invalid key's, nothing else's. There is no time bound but the test's own timeout: a watch that
 * is not cut never ends and the test fails. (e2e/security/access-proxy-lifetimes covers a disabled
 * key's watch and exec session on the cluster path.)
 */

interface OpenWatch {
  /** Resolves with the text received once the stream ends (finished or cut). */
  readonly ended: Promise<string>;
  /** Resolves once the stream has carried an event naming `text`. */
  sees(text: string): Promise<void>;
  close(): void;
}

/** A watch at `url` (a collection with `?watch=...`) with `token` as the bearer, its answer started. */
async function openWatch(url: string, token: string, dispatcher?: Dispatcher): Promise<OpenWatch> {
  const controller = new AbortController();
  const response = await undiciFetch(url, {
    headers: { authorization: `Bearer ${token}` },
    signal: controller.signal,
    ...(dispatcher ? { dispatcher } : {}),
  });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  const ended = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
        for (const waiter of waiters.filter((w) => text.includes(w.text))) waiter.resolve();
      }
    } catch {
      return text; // the connection was cut under the stream
    }
  })();
  return {
    ended,
    sees: (wanted) =>
      text.includes(wanted)
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push({ text: wanted, resolve })),
    close: () => controller.abort(),
  };
}

/** A key of `user` with an object name of its own (to change it later), accepted by the gateway. */
async function namedKey(gateway: GatewayEnv, user: string): Promise<{ name: string; token: string }> {
  const name = uniqueName('key');
  const token = await gateway.key({ user }, name);
  await gateway.accepted(token);
  return { name, token };
}

/** A merge patch of a platform object (`<plural>/<name>`) on the gateway's apiserver. */
async function patchPlatformObject(gateway: GatewayEnv, object: string, body: unknown): Promise<void> {
  const api = new KubeClient(gateway.kc);
  try {
    await api.request({
      method: 'PATCH',
      path: `/apis/${GROUP_VERSION}/${object}`,
      contentType: 'application/merge-patch+json',
      body,
    });
  } finally {
    api.close();
  }
}

async function deletePlatformObject(gateway: GatewayEnv, plural: string, name: string): Promise<void> {
  await gateway.custom.deleteClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural, name });
}

async function cutCount(gateway: GatewayEnv, reason: string): Promise<number> {
  const metric = await gateway.gateway.registry
    .getSingleMetric('gateway_long_lived_connections_cut_total')
    ?.get();
  return metric?.values.find((value) => value.labels.reason === reason)?.value ?? 0;
}

describe('gateway: a management API watch ends when the key that opened it stops being valid', () => {
  const env = useGatewayEnv({ controllers: [] });
  const watchUsers = (token: string) => openWatch(`${env().api}/users?watch=true&timeoutSeconds=3600`, token);

  async function touchUser(name: string): Promise<void> {
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'users',
      body: { apiVersion: GROUP_VERSION, kind: 'User', metadata: { name }, spec: { username: name } },
    });
  }

  test('disabling the key ends its watch; the same person’s other key’s watch goes on', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(env(), person);
    const other = await namedKey(env(), person);
    const cut = await watchUsers(doomed.token);
    const kept = await watchUsers(other.token);
    const before = await cutCount(env(), 'KeyDisabled');

    await patchPlatformObject(env(), `ownedaccesskeys/${doomed.name}`, { spec: { disabled: true } });
    await cut.ended;

    const later = uniqueName('later');
    await touchUser(later);
    await kept.sees(later);
    kept.close();
    expect(await cutCount(env(), 'KeyDisabled')).toBe(before + 1);
    expect((await call(`${env().api}/users`, { token: doomed.token })).status).toBe(401);
  });

  test('deleting the key ends its watch', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(env(), person);
    const cut = await watchUsers(doomed.token);
    // The watch is live before the key goes.
    const first = uniqueName('first');
    await touchUser(first);
    await cut.sees(first);
    await deletePlatformObject(env(), 'ownedaccesskeys', doomed.name);
    await cut.ended;
    expect(await cutCount(env(), 'KeyDeleted')).toBeGreaterThan(0);
  });

  test('removing the key’s owner ends its watch', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(env(), person);
    const cut = await watchUsers(doomed.token);
    await deletePlatformObject(env(), 'users', person);
    await cut.ended;
    expect(await cutCount(env(), 'OwnerInvalid')).toBeGreaterThan(0);
  });

  // Last of this block: the limit expires every key of its gateway.
  test('a lifetime limit that expires the key ends its watch', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(env(), person);
    const cut = await watchUsers(doomed.token);
    const before = await cutCount(env(), 'KeyExpired');
    await env().core.createNamespacedSecret({
      namespace: env().platformNamespace,
      body: {
        metadata: { name: PLATFORM_CONFIG_SECRET },
        stringData: { [PLATFORM_CONFIG_KEY]: 'auth:\n  accessKeyMaxTTLSeconds: 1\n' },
      },
    });
    await cut.ended;
    expect(await cutCount(env(), 'KeyExpired')).toBeGreaterThan(before);
  });
});

describe('access proxy: a watch through it ends when the key that opened it stops being valid', () => {
  const env = useAccessProxyEnv();

  async function touchConfigMap(path: 'virtualcluster' | 'space'): Promise<string> {
    const name = `touch-${randomBytes(4).toString('hex')}`;
    await env()
      .admin(path)
      .request({
        method: 'POST',
        path: `/api/v1/namespaces/${env().target(path).namespace}/configmaps`,
        body: { metadata: { name } },
      });
    return name;
  }

  const watchConfigMaps = (path: 'virtualcluster' | 'space', token: string) => {
    const { prefix, namespace } = env().target(path);
    return openWatch(
      `${prefix}/api/v1/namespaces/${namespace}/configmaps?watch=1&timeoutSeconds=3600`,
      token,
      env().gateway.dispatcher,
    );
  };

  test('deleting the key ends its watch of a virtual cluster; its sibling key’s watch goes on', async () => {
    const person = uniqueName('vc-watcher');
    await env().keyFor(person);
    await env().grant('virtualcluster', person);
    const doomed = await namedKey(env().gateway, person);
    const other = await namedKey(env().gateway, person);
    const cut = await watchConfigMaps('virtualcluster', doomed.token);
    const kept = await watchConfigMaps('virtualcluster', other.token);
    const first = await touchConfigMap('virtualcluster');
    await cut.sees(first);

    await deletePlatformObject(env().gateway, 'ownedaccesskeys', doomed.name);
    await cut.ended;

    const second = await touchConfigMap('virtualcluster');
    await kept.sees(second);
    kept.close();
  });

  test('the key expiring ends its watch of a virtual cluster', async () => {
    const person = uniqueName('vc-expiring');
    await env().keyFor(person);
    await env().grant('virtualcluster', person);
    const doomed = await namedKey(env().gateway, person);
    const cut = await watchConfigMaps('virtualcluster', doomed.token);
    const first = await touchConfigMap('virtualcluster');
    await cut.sees(first);
    const before = await cutCount(env().gateway, 'KeyExpired');

    // A ttl of 1 s from its creation: the key expires (at once, or within the second).
    await patchPlatformObject(env().gateway, `ownedaccesskeys/${doomed.name}`, { spec: { ttl: 1 } });
    await cut.ended;
    expect(await cutCount(env().gateway, 'KeyExpired')).toBe(before + 1);
  });

  test('disabling the key’s owner ends its watch of a space', async () => {
    const person = uniqueName('space-watcher');
    await env().keyFor(person);
    await env().grant('space', person);
    const doomed = await namedKey(env().gateway, person);
    const cut = await watchConfigMaps('space', doomed.token);
    const first = await touchConfigMap('space');
    await cut.sees(first);

    await patchPlatformObject(env().gateway, `users/${person}`, { spec: { disabled: true } });
    await cut.ended;
    expect(await cutCount(env().gateway, 'OwnerDisabled')).toBeGreaterThan(0);
  });
});
