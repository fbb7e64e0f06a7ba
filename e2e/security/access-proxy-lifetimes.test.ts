import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { GROUP_VERSION } from '../gateway/support.ts';
import { useAccessProxyEnv } from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import {
  backendProxyPath,
  exposeBackend,
  GREETING,
  openChannelWebSocket,
  startUpgradeBackend,
  type UpgradeBackend,
} from '../support/upgrade-backend.ts';
import { eventually } from '../support/wait.ts';

/**
 * Issue 26, lifetimes: a connection through the access proxy ends when the key that opened it
 * stops being valid, not at the stream's natural end. A watch (asked for an hour) and an upgraded
 * session (a WebSocket with kubectl's exec subprotocol, relayed by the connected cluster's
 * apiserver to a backend of this test through its service proxy, as an exec goes to a kubelet)
 * are opened with a key, proved live, and the key is disabled: the client sees its end. The same
 * person's other key holds the same kind of connection all along, which stays open and live, so
 * the cut is the disabled key's and nothing else. The waits are bounds on a hang, not timings.
 */
describe('security: a disabled key’s open watch and exec session through the access proxy are cut', () => {
  const env = useAccessProxyEnv();
  const person = uniqueName('dora');
  const CUT_BOUND_MS = 60_000;
  let backend: UpgradeBackend;

  beforeAll(async () => {
    backend = await startUpgradeBackend();
    await exposeBackend(env().admin('cluster'), 'work', backend);
    await env().grant('cluster', person);
    // The person's User (and a first key, unused).
    await env().keyFor(person);
  });

  afterAll(async () => {
    await backend?.close();
  });

  /** A key of the person, by name (to disable it later). */
  async function namedKey(): Promise<{ name: string; token: string }> {
    const name = uniqueName('key');
    const token = await env().gateway.key({ user: person }, name);
    await env().gateway.accepted(token);
    return { name, token };
  }

  async function disable(key: string) {
    const api = new KubeClient(env().gateway.kc);
    try {
      await api.request({
        method: 'PATCH',
        path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${key}`,
        contentType: 'application/merge-patch+json',
        body: { spec: { disabled: true } },
      });
    } finally {
      api.close();
    }
  }

  /** A watch of the work namespace's ConfigMaps through the proxy, counting its events. */
  async function watch(token: string) {
    const controller = new AbortController();
    const response = await request(
      `${env().target('cluster').prefix}/api/v1/namespaces/work/configmaps?watch=1&timeoutSeconds=3600`,
      {
        dispatcher: env().gateway.dispatcher,
        signal: controller.signal,
        headers: { authorization: `Bearer ${token}` },
      },
    );
    let text = '';
    let ended = false;
    const reading = (async () => {
      try {
        for await (const chunk of response.body) text += chunk.toString();
      } catch {
        // aborted by the test
      }
      ended = true;
    })();
    return {
      status: response.statusCode,
      text: () => text,
      ended: () => ended,
      close: async () => {
        controller.abort();
        await reading;
      },
    };
  }

  async function touch(): Promise<string> {
    const name = `touch-${randomBytes(4).toString('hex')}`;
    await env()
      .admin('cluster')
      .request({ method: 'POST', path: '/api/v1/namespaces/work/configmaps', body: { metadata: { name } } });
    return name;
  }

  test('a watch held by a key that is disabled ends; the same person’s other key’s watch goes on', async () => {
    const [doomed, kept] = [await namedKey(), await namedKey()];
    const [cut, going] = [await watch(doomed.token), await watch(kept.token)];
    try {
      expect([cut.status, going.status]).toEqual([200, 200]);
      const first = await touch();
      await eventually(
        () => cut.text().includes(first) && going.text().includes(first),
        30_000,
        'both watches to deliver the first event',
      );
      await disable(doomed.name);
      await eventually(() => cut.ended(), CUT_BOUND_MS, 'the disabled key’s watch to end');
      const second = await touch();
      await eventually(() => going.text().includes(second), 30_000, 'the other key’s watch to go on');
      expect(going.ended()).toBe(false);
      expect(cut.text()).not.toContain(second);
      const again = await request(`${env().target('cluster').prefix}/api/v1/namespaces/work/configmaps`, {
        dispatcher: env().gateway.dispatcher,
        headers: { authorization: `Bearer ${doomed.token}` },
      });
      await again.body.text();
      expect(again.statusCode).toBe(401);
    } finally {
      await Promise.all([cut.close(), going.close()]);
    }
  });

  test('an exec (upgraded) session held by a key that is disabled is closed; the other key’s goes on', async () => {
    const [doomed, kept] = [await namedKey(), await namedKey()];
    const url = `${env().target('cluster').prefix}${backendProxyPath('work')}`;
    const caPem = env().gateway.caPem;
    const [cut, going] = [
      await openChannelWebSocket(url, doomed.token, caPem),
      await openChannelWebSocket(url, kept.token, caPem),
    ];
    const closed = { cut: false, going: false };
    cut.socket.on('close', () => {
      closed.cut = true;
    });
    going.socket.on('close', () => {
      closed.going = true;
    });
    const echoed = (session: typeof cut, text: string) =>
      session.received.some((message) => message.toString().includes(text));
    try {
      await eventually(
        () => echoed(cut, GREETING) && echoed(going, GREETING),
        30_000,
        'both sessions to be greeted',
      );
      cut.socket.send('before');
      going.socket.send('before');
      await eventually(() => echoed(cut, 'before') && echoed(going, 'before'), 30_000, 'both echoes');
      await disable(doomed.name);
      await eventually(() => closed.cut, CUT_BOUND_MS, 'the disabled key’s session to be closed');
      going.socket.send('after');
      await eventually(() => echoed(going, 'after'), 30_000, 'the other key’s session to go on');
      expect(closed.going).toBe(false);
      expect(echoed(cut, 'after')).toBe(false);
    } finally {
      cut.socket.terminate();
      going.socket.terminate();
    }
  });
});
