import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION } from '../../src/api/labels.ts';
import { resources, type Stored } from '../../src/api/resources.ts';
import type { VirtualClusterInstance } from '../../src/api/virtualclusterinstance.ts';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { rawRequest } from '../support/access-proxy.ts';
import { kubectl } from '../support/cluster.ts';
import {
  clearLastActivity,
  lastActivity,
  markAsleep,
  markAwake,
  markWaking,
  readInstance,
} from '../support/sleeping-instances.ts';
import { eventually, waitForValue } from '../support/wait.ts';
import { INSTANCE, namespaceOf, SHOP, SHOP_INSTANCE, useProvisionedEnv, WEB } from './provisioned-env.ts';

/**
 * Sleep mode at the access proxy (issue 27), the gateway's side: the test plays the
 * virtualcluster controller (it sets the instance's conditions through the status subresource as
 * the contract says, and wakes it when it sees the wake request); the virtual cluster is a real
 * provisioned control plane (processes provisioner), the gateway real, requests real kubectl and
 * HTTP. A request to an asleep instance writes `sleepmode.platform/last-activity` and waits
 * until the instance is Ready, bounded by the client's timeout; a request the key's scope refuses
 * wakes nothing; an awake instance's requests are recorded as its activity.
 */
describe('access proxy: waking an asleep virtual cluster', () => {
  const env = useProvisionedEnv();
  const admin = () => new KubeClient(env().gateway.kc);
  const web = namespaceOf(WEB);
  // Each sleep starts at a time of its own (the gateway writes one wake per sleep).
  let sleeps = 0;
  const nextSleep = () => new Date(Date.now() - 60_000 * ++sleeps);

  /** Waits until the gateway's cache holds the instance as it is now on the apiserver. */
  async function gatewaySees(namespace: string, name: string, resourceVersion: string | undefined) {
    const informer = env().gateway.manager.informer<Stored<VirtualClusterInstance>>(
      resources.virtualClusterInstances,
    );
    await eventually(
      () => informer.store.getByName(namespace, name)?.metadata.resourceVersion === resourceVersion,
      30_000,
      `the gateway's cache to see ${namespace}/${name} at ${resourceVersion}`,
    );
  }

  /** Puts the instance to sleep (as the controller would), its annotation cleared; returns when it fell asleep. */
  async function asleep(namespace: string, name: string): Promise<Date> {
    await clearLastActivity(admin(), namespace, name);
    const since = nextSleep();
    const marked = await markAsleep(admin(), namespace, name, since);
    await gatewaySees(namespace, name, marked.metadata.resourceVersion);
    return new Date(Math.floor(since.getTime() / 1000) * 1000);
  }

  /** Marks the instance awake (as the controller would) and waits until the gateway sees it. */
  async function awake(namespace: string, name: string): Promise<void> {
    const marked = await markAwake(admin(), namespace, name, new Date());
    await gatewaySees(namespace, name, marked.metadata.resourceVersion);
  }

  /**
   * Plays the controller's wake: once the wake request is written, the request (`pending`) is
   * still held, and the instance is made Ready.
   */
  async function wakeOnRequest(
    namespace: string,
    name: string,
    since: Date,
    pending: { settled: boolean },
  ): Promise<string> {
    const stamp = await waitForValue(
      'the wake request (last-activity)',
      () => lastActivity(admin(), namespace, name),
      (value) => value !== undefined,
      30_000,
    );
    expect(Date.parse(stamp!)).toBeGreaterThan(since.getTime());
    expect(pending.settled).toBe(false);
    await markAwake(admin(), namespace, name, new Date());
    return stamp!;
  }

  const track = <T>(promise: Promise<T>) => {
    const state: { settled: boolean } = { settled: false };
    void promise.finally(() => {
      state.settled = true;
    });
    return state;
  };

  test('kubectl through the proxy wakes it: the request waits until the instance is Ready, then is answered', async () => {
    const { alice } = env().keys;
    await env().grantNamespaceList('alice');
    await eventually(
      async () => (await viaProxy(alice, WEB, INSTANCE, '/api/v1/namespaces')).status === 200,
      30_000,
      'alice to list namespaces while the instance is awake',
    );
    const since = await asleep(web, INSTANCE);
    const file = join(env().gateway.cluster!.kubeconfigPath, '..', 'alice-wake.kubeconfig');
    writeFileSync(
      file,
      kubeConfigYaml({
        name: 'wake',
        server: env().proxyUrl(WEB, INSTANCE),
        caPem: env().gateway.caPem!,
        credentials: { token: alice },
      }),
      { mode: 0o600 },
    );
    const listing = kubectl(['get', 'namespaces', '-o', 'name'], { kubeconfig: file });
    const state = track(listing);
    const stamp = await waitForValue(
      'the wake request',
      () => lastActivity(admin(), web, INSTANCE),
      (value) => value !== undefined,
    );
    expect(stamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(stamp!)).toBeGreaterThan(since.getTime());
    // Asleep, the request is held: nothing answered it yet.
    expect(state.settled).toBe(false);
    await markAwake(admin(), web, INSTANCE, new Date());
    const listed = await listing;
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('namespace/kube-system');
  });

  test("not ready within the client's timeout: 503 naming the instance, with Retry-After; the wake was asked for", async () => {
    const { alice } = env().keys;
    const since = await asleep(web, INSTANCE);
    const answer = await viaProxy(alice, WEB, INSTANCE, '/api/v1/namespaces?timeout=2s');
    expect(answer.status).toBe(503);
    expect(answer.json).toMatchObject({ kind: 'Status', code: 503, reason: 'ServiceUnavailable' });
    expect(answer.json.message).toBe(
      `virtual cluster "${WEB}/${INSTANCE}" is waking up from sleep and was not ready within 2s; try again shortly`,
    );
    expect(answer.headers.get('retry-after')).toBe('5');
    const stamp = await lastActivity(admin(), web, INSTANCE);
    expect(Date.parse(stamp ?? '')).toBeGreaterThan(since.getTime());
  });

  test('a watch waits for the wake, then streams', async () => {
    const { alice } = env().keys;
    await grantWatch('alice');
    const since = await asleep(web, INSTANCE);
    const abort = new AbortController();
    const watch = fetchHead(
      `${env().proxyUrl(WEB, INSTANCE)}/api/v1/namespaces?watch=1`,
      alice,
      abort.signal,
    );
    const state = track(watch);
    await wakeOnRequest(web, INSTANCE, since, state);
    const head = await watch;
    abort.abort();
    expect(head.status).toBe(200);
    expect(head.contentType).toContain('application/json');
  });

  test('an upgrade request (exec) waits for the wake, then reaches the virtual API server', async () => {
    const { alice } = env().keys;
    const since = await asleep(web, INSTANCE);
    const upgrade = upgradeRequest(
      `${env().proxyUrl(WEB, INSTANCE)}/api/v1/namespaces/default/pods/none/exec?command=true&stdout=true`,
      alice,
    );
    const state = track(upgrade);
    await wakeOnRequest(web, INSTANCE, since, state);
    // The virtual API server answered (alice may not exec there, or there is no such pod): not the proxy's 503.
    const code = await upgrade;
    expect([403, 404]).toContain(code);
  });

  test('an instance woken by another and still starting: the request waits for it too, without writing again', async () => {
    const { alice } = env().keys;
    const since = nextSleep();
    await clearLastActivity(admin(), web, INSTANCE);
    const marked = await markWaking(admin(), web, INSTANCE, since, new Date(since.getTime() + 30_000));
    await gatewaySees(web, INSTANCE, marked.metadata.resourceVersion);
    const listing = viaProxy(alice, WEB, INSTANCE, '/api/v1/namespaces');
    const state = track(listing);
    // The request is held until the instance is Ready: a change of the instance that leaves it
    // starting does not release it, Ready does.
    const touched = await markWaking(admin(), web, INSTANCE, since, new Date(since.getTime() + 31_000));
    await gatewaySees(web, INSTANCE, touched.metadata.resourceVersion);
    expect(state.settled).toBe(false);
    await markAwake(admin(), web, INSTANCE, new Date());
    expect((await listing).status).toBe(200);
    expect(await lastActivity(admin(), web, INSTANCE)).toBeUndefined();
  });

  test('a request the key scope refuses wakes nothing: 403, the instance untouched', async () => {
    const alice = await env().gateway.key({
      user: 'alice',
      scope: { virtualClusters: [{ project: WEB, virtualCluster: 'pending' }] },
    });
    await env().gateway.accepted(alice);
    await asleep(web, INSTANCE);
    const before = await readInstance(admin(), web, INSTANCE);
    const refused = await viaProxy(alice, WEB, INSTANCE, '/api/v1/namespaces');
    expect(refused.status).toBe(403);
    expect(refused.json.message).toContain('scope');
    const after = await readInstance(admin(), web, INSTANCE);
    expect(after.metadata.annotations?.[LAST_ACTIVITY_ANNOTATION]).toBeUndefined();
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  test("an awake instance's request is recorded as its activity, without waiting", async () => {
    const { bob } = env().keys;
    const shop = namespaceOf(SHOP);
    await clearLastActivity(admin(), shop, SHOP_INSTANCE);
    const marked = await markAwake(admin(), shop, SHOP_INSTANCE, new Date());
    await gatewaySees(shop, SHOP_INSTANCE, marked.metadata.resourceVersion);
    const before = Date.now();
    const answer = await viaProxy(bob, SHOP, SHOP_INSTANCE, '/version');
    expect(answer.status).toBe(200);
    const stamp = await waitForValue(
      'the activity of the awake instance',
      () => lastActivity(admin(), shop, SHOP_INSTANCE),
      (value) => value !== undefined,
    );
    expect(Date.parse(stamp!)).toBeGreaterThanOrEqual(before);
  });

  /** Lets `user` watch namespaces in the virtual cluster, once it is effective there. */
  async function grantWatch(user: string) {
    const rbac = '/apis/rbac.authorization.k8s.io/v1';
    const name = `e2e-namespace-watcher-${user}`;
    await awake(web, INSTANCE);
    await env().virtualAdmin.request({
      method: 'POST',
      path: `${rbac}/clusterroles`,
      body: { metadata: { name }, rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['watch'] }] },
    });
    await env().virtualAdmin.request({
      method: 'POST',
      path: `${rbac}/clusterrolebindings`,
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    const { alice } = env().keys;
    await eventually(
      async () => {
        const abort = new AbortController();
        const head = await fetchHead(
          `${env().proxyUrl(WEB, INSTANCE)}/api/v1/namespaces?watch=1`,
          alice,
          abort.signal,
        );
        abort.abort();
        return head.status === 200;
      },
      30_000,
      `${user} to watch namespaces in the virtual cluster`,
    );
  }

  function viaProxy(token: string, project: string, instance: string, path: string) {
    return rawRequest(`${env().proxyUrl(project, instance)}${path}`, env().gateway.dispatcher, {
      headers: { authorization: `Bearer ${token}` },
    });
  }

  /** A GET answered once its head arrives (a watch's body goes on). */
  function fetchHead(url: string, token: string, signal: AbortSignal) {
    return new Promise<{ status: number; contentType: string }>((resolve, reject) => {
      const request = https.get(url, {
        ca: env().gateway.caPem!,
        headers: { authorization: `Bearer ${token}` },
        signal,
      });
      request.on('response', (response) => {
        response.on('error', () => undefined);
        resolve({ status: response.statusCode ?? 0, contentType: String(response.headers['content-type']) });
      });
      request.on('error', (error) => {
        if (!signal.aborted) reject(error);
      });
    });
  }

  /** A WebSocket upgrade as kubectl exec sends it; resolves with the status of the answer (101 or a refusal). */
  function upgradeRequest(url: string, token: string) {
    return new Promise<number>((resolve, reject) => {
      const request = https.request(url, {
        ca: env().gateway.caPem!,
        headers: {
          authorization: `Bearer ${token}`,
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': randomBytes(16).toString('base64'),
          'sec-websocket-protocol': 'v5.channel.k8s.io',
        },
      });
      request.on('upgrade', (response, socket) => {
        socket.destroy();
        resolve(response.statusCode ?? 0);
      });
      request.on('response', (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on('error', reject);
      request.end();
    });
  }
});
