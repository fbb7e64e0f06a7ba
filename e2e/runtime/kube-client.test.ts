import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { isApiError, RequestTimeoutError } from '../../src/runtime/errors.ts';
import { collectionPath, KubeClient, objectPath, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { RestClientMetrics } from '../../src/runtime/rest-client-metrics.ts';
import { FakeClock, flushMicrotasks } from '../../test-support/fake-clock.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';
import { eventually } from './support.ts';

const configMaps: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };
const secrets: ResourceRef = { group: '', version: 'v1', plural: 'secrets', namespaced: true };

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

/** A kubeconfig for the host cluster whose only credential is `token`. */
function tokenKubeconfigYaml(token: string): string {
  const kc = hostKubeConfig();
  const cluster = kc.getCurrentCluster()!;
  const rotated = new KubeConfig();
  rotated.loadFromOptions({
    clusters: [{ name: 'host', server: cluster.server, caData: cluster.caData, skipTLSVerify: false }],
    users: [{ name: 'rotating', token }],
    contexts: [{ name: 'host', cluster: 'host', user: 'rotating' }],
    currentContext: 'host',
  });
  return rotated.exportConfig();
}

describe('KubeClient hardening against a real apiserver', () => {
  const namespace = useNamespace('kubeclient');
  const admin = new KubeClient(hostKubeConfig());
  const dir = mkdtempSync(join(tmpdir(), 'platform-kubeclient-'));
  const servers: Server[] = [];
  afterAll(() => {
    for (const server of servers) server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts every request in rest_client_requests_total by method, code and host, and times it', async () => {
    const registry = new Registry();
    const api = new KubeClient(hostKubeConfig(), { metrics: RestClientMetrics.for(registry) });
    const host = new URL(hostKubeConfig().getCurrentCluster()!.server).host;
    await api.request({ method: 'GET', path: collectionPath(configMaps, namespace()) });
    await api
      .request({ method: 'GET', path: objectPath(configMaps, namespace(), 'missing') })
      .catch(() => {});
    expect(
      await metricValue(registry, 'rest_client_requests_total', { method: 'GET', code: '200', host }),
    ).toBe(1);
    expect(
      await metricValue(registry, 'rest_client_requests_total', { method: 'GET', code: '404', host }),
    ).toBe(1);
    const text = await registry.metrics();
    expect(text).toMatch(/rest_client_request_duration_seconds_count\{verb="GET",host="[^"]+"\} 2/);
    // Never a path or an object name in a label.
    expect(text).not.toContain('missing');
    expect(text).not.toContain(namespace());
    api.close();
  });

  it('a request that gets no answer fails with RequestTimeoutError after the default timeout', async () => {
    // A server that accepts connections and never answers (a hung apiserver or load balancer).
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'silent', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'x' }],
      contexts: [{ name: 'c', cluster: 'silent', user: 'u' }],
      currentContext: 'c',
    });
    const api = new KubeClient(kc, { timeoutMs: 300 });
    await expect(api.request({ method: 'GET', path: '/api/v1/namespaces' })).rejects.toBeInstanceOf(
      RequestTimeoutError,
    );
    for (const socket of sockets) socket.destroy();
    api.close();
  });

  it('the client-side rate limit holds a request above the burst until its token is due', async () => {
    const clock = new FakeClock();
    const registry = new Registry();
    const api = new KubeClient(hostKubeConfig(), {
      clock,
      qps: 1,
      burst: 1,
      metrics: RestClientMetrics.for(registry),
    });
    const list = () => api.request({ method: 'GET', path: collectionPath(configMaps, namespace()) });
    await list();
    let second = false;
    const pending = list().then(() => {
      second = true;
    });
    await flushMicrotasks();
    // Nothing was sent for the second request: the apiserver has seen one.
    expect(await metricValue(registry, 'rest_client_requests_total', { method: 'GET' })).toBe(1);
    expect(second).toBe(false);
    await clock.advance(1000);
    await pending;
    expect(await metricValue(registry, 'rest_client_requests_total', { method: 'GET' })).toBe(2);
    api.close();
  });

  it('rotated credentials are read again: after a 401 at once, otherwise when the refresh period passed', async () => {
    // A ServiceAccount with tokens bound to Secrets: deleting a Secret revokes its token.
    const ns = namespace();
    await admin.request({
      method: 'POST',
      path: collectionPath({ group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true }, ns),
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'rotating' } },
    });
    const tokenBoundTo = async (secretName: string): Promise<string> => {
      const secret = await admin.request<{ metadata: { uid: string } }>({
        method: 'POST',
        path: collectionPath(secrets, ns),
        body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName } },
      });
      const review = await admin.request<{ status: { token: string } }>({
        method: 'POST',
        path: `/api/v1/namespaces/${ns}/serviceaccounts/rotating/token`,
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: {
            expirationSeconds: 3600,
            boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secretName, uid: secret.metadata.uid },
          },
        },
      });
      return review.status.token;
    };
    const whoami = (api: KubeClient) =>
      api.request<{ status: { userInfo: { username: string } } }>({
        method: 'POST',
        path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      });
    const revoke = async (secretName: string, token: string) => {
      await admin.request({ method: 'DELETE', path: objectPath(secrets, ns, secretName) });
      // The apiserver caches a token's authentication for a few seconds.
      const probe = new KubeClient(
        (() => {
          const kc = new KubeConfig();
          kc.loadFromString(tokenKubeconfigYaml(token));
          return kc;
        })(),
      );
      await eventually(
        () =>
          whoami(probe).then(
            () => false,
            (err) => isApiError(err, 401),
          ),
        30_000,
        `the token bound to ${secretName} to be refused`,
      );
      probe.close();
    };

    const path = join(dir, 'rotating.kubeconfig');
    const load = () => {
      const kc = new KubeConfig();
      kc.loadFromFile(path);
      return kc;
    };
    const clock = new FakeClock();
    const registry = new Registry();
    const tokenA = await tokenBoundTo('token-a');
    writeFileSync(path, tokenKubeconfigYaml(tokenA));
    const api = new KubeClient(load(), {
      reload: load,
      clock,
      credentialsRefreshMs: 60_000,
      metrics: RestClientMetrics.for(registry),
    });
    const expected = `system:serviceaccount:${ns}:rotating`;
    expect((await whoami(api)).status.userInfo.username).toBe(expected);

    // The token file is rewritten (as the kubelet does) and the old token revoked: the next
    // request is refused once, and sent again with the credentials read anew.
    const tokenB = await tokenBoundTo('token-b');
    writeFileSync(path, tokenKubeconfigYaml(tokenB));
    await revoke('token-a', tokenA);
    expect((await whoami(api)).status.userInfo.username).toBe(expected);
    expect(await metricValue(registry, 'rest_client_requests_total', { code: '401' })).toBe(1);

    // Rotated again; once the refresh period has passed, the new token is used without a 401.
    const tokenC = await tokenBoundTo('token-c');
    writeFileSync(path, tokenKubeconfigYaml(tokenC));
    await revoke('token-b', tokenB);
    await clock.advance(60_000);
    expect((await whoami(api)).status.userInfo.username).toBe(expected);
    expect(await metricValue(registry, 'rest_client_requests_total', { code: '401' })).toBe(1);
    api.close();
  });
});
