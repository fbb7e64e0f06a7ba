import { describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { uniqueName } from '../support/cluster.ts';
import { call, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * Issue 26, lifetimes, on the management API: a watch held open by a key ends when the key stops
 * being valid (disabled, deleted, its owner removed), not at the watch's natural end (asked for
 * an hour here: longer than any test). The same person's other key holds a watch all along, which
 * goes on and still delivers events: the cut is the invalid key's, nothing else's. There is no
 * time bound but the test's own timeout: a watch that is not cut never ends and the test fails.
 */
describe('gateway: a watch ends when the key that opened it stops being valid', () => {
  const env = useGatewayEnv({ controllers: [] });

  /** A key of `user` with an object name of its own (to change it later), accepted by the gateway. */
  async function namedKey(user: string): Promise<{ name: string; token: string }> {
    const name = uniqueName('key');
    const token = await env().key({ user }, name);
    await env().accepted(token);
    return { name, token };
  }

  interface OpenWatch {
    /** Resolves with the text received once the stream ends (finished or cut). */
    readonly ended: Promise<string>;
    /** Resolves once the stream has carried an event naming `text`. */
    sees(text: string): Promise<void>;
    close(): void;
  }

  /** A watch of the Users (an hour long) through the gateway with `token`, its answer started. */
  async function watchUsers(token: string): Promise<OpenWatch> {
    const controller = new AbortController();
    const response = await fetch(`${env().api}/users?watch=true&timeoutSeconds=3600`, {
      headers: { authorization: `Bearer ${token}` },
      signal: controller.signal,
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

  async function touchUser(name: string): Promise<void> {
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'users',
      body: { apiVersion: GROUP_VERSION, kind: 'User', metadata: { name }, spec: { username: name } },
    });
  }

  async function patchKey(name: string, spec: Record<string, unknown>): Promise<void> {
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${name}`,
      contentType: 'application/merge-patch+json',
      body: { spec },
    });
  }

  async function cutCount(reason: string): Promise<number> {
    const metric = await env()
      .gateway.registry.getSingleMetric('gateway_long_lived_connections_cut_total')
      ?.get();
    return metric?.values.find((value) => value.labels.reason === reason)?.value ?? 0;
  }

  test('disabling the key ends its watch; the same person’s other key’s watch goes on', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(person);
    const other = await namedKey(person);
    const cut = await watchUsers(doomed.token);
    const kept = await watchUsers(other.token);
    const before = await cutCount('KeyDisabled');

    await patchKey(doomed.name, { disabled: true });
    await cut.ended;

    const later = uniqueName('later');
    await touchUser(later);
    await kept.sees(later);
    kept.close();
    expect(await cutCount('KeyDisabled')).toBe(before + 1);
    expect((await call(`${env().api}/users`, { token: doomed.token })).status).toBe(401);
  });

  test('deleting the key ends its watch', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(person);
    const cut = await watchUsers(doomed.token);
    // The watch is live before the key goes.
    const first = uniqueName('first');
    await touchUser(first);
    await cut.sees(first);
    await env().custom.deleteClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'ownedaccesskeys',
      name: doomed.name,
    });
    await cut.ended;
    expect(await cutCount('KeyDeleted')).toBeGreaterThan(0);
  });

  test('removing the key’s owner ends its watch', async () => {
    const person = uniqueName('watcher');
    await env().user(person, { admin: true });
    const doomed = await namedKey(person);
    const cut = await watchUsers(doomed.token);
    await env().custom.deleteClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'users',
      name: person,
    });
    await cut.ended;
    expect(await cutCount('OwnerInvalid')).toBeGreaterThan(0);
  });
});
