import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rawRequest, useAccessProxyEnv } from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { connectCluster } from '../support/proxy-targets.ts';

/**
 * Issue 26: a Cluster whose endpoint is the platform's own apiserver (or a link-local address, or
 * any server at all) is only ever reached as the caller, impersonated, never as the platform.
 *
 * - `self`: the host apiserver, its credentials Secret holding a cluster-admin token. Through it
 *   a tenant reads nothing the tenant may not read on the host (the platform's Secrets, the access
 *   keys), and the host sees the tenant, not system:masters.
 * - `self-nosecret`, `self-empty`: the host, with a missing Secret or one without credentials: 503,
 *   never a fallback to the gateway's own identity (cluster-admin in this environment).
 * - `metadata`: a link-local address (the cloud metadata service's): an error Status naming it.
 * - `recorder`: a plain HTTP server of this test recording what the proxy sends it: the Secret's
 *   credential and the caller's impersonation, and never the caller's own access key.
 */
describe('security: a target pointing at the platform itself is reached only as the caller', () => {
  const env = useAccessProxyEnv();
  const tenant = uniqueName('tina');
  const recorderToken = `recorder-${randomBytes(16).toString('hex')}`;
  const recorded: http.IncomingHttpHeaders[] = [];
  let recorder: http.Server;
  let key: string;

  beforeAll(async () => {
    const g = env().gateway;
    const host = env().host;
    recorder = http.createServer((request, response) => {
      recorded.push(request.headers);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"APIVersions"}');
    });
    await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
    const { port } = recorder.address() as AddressInfo;
    await connectCluster(g, {
      name: 'self',
      endpoint: host.server,
      caPem: host.caPem,
      credentials: { token: host.adminToken },
    });
    await connectCluster(g, { name: 'self-nosecret', endpoint: host.server, caPem: host.caPem });
    await connectCluster(g, {
      name: 'self-empty',
      endpoint: host.server,
      caPem: host.caPem,
      credentials: { note: 'no credentials here' },
    });
    await connectCluster(g, {
      name: 'metadata',
      endpoint: 'http://169.254.169.254',
      credentials: { token: 'x' },
    });
    await connectCluster(g, {
      name: 'recorder',
      endpoint: `http://127.0.0.1:${port}`,
      credentials: { token: recorderToken },
    });
    key = await env().keyFor(tenant);
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => (recorder ? recorder.close(() => resolve()) : resolve()));
  });

  const through = (cluster: string, path: string, init: Parameters<typeof rawRequest>[2] = {}) =>
    rawRequest(`${env().gateway.server.url}/kubernetes/cluster/${cluster}${path}`, env().gateway.dispatcher, {
      ...init,
      headers: { authorization: `Bearer ${key}`, ...init.headers },
    });

  test('through a Cluster that is the platform’s own apiserver, a tenant acts as the tenant', async () => {
    const g = env().gateway;
    const secrets = `/api/v1/namespaces/${g.platformNamespace}/secrets`;
    // The credential could read them: only the impersonation stands in the way.
    const direct = await env().direct('space', secrets);
    expect(direct.status).toBe(200);
    const names: string[] = direct.json.items.map(
      (item: { metadata: { name: string } }) => item.metadata.name,
    );
    expect(names.length).toBeGreaterThan(0);
    const values = direct.json.items.flatMap((item: { data?: Record<string, string> }) =>
      Object.values(item.data ?? {}),
    );
    for (const path of [
      secrets,
      `${secrets}/${names[0]}`,
      '/api/v1/secrets',
      '/apis/management.platform/v1/ownedaccesskeys',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    ]) {
      const answer = await through('self', path);
      const body = answer.body.toString();
      expect(answer.status, `${path}: ${body.slice(0, 200)}`).toBe(403);
      expect(answer.json).toMatchObject({ kind: 'Status', reason: 'Forbidden' });
      expect(body, path).not.toContain('"items"');
      for (const value of values) expect(body, path).not.toContain(value);
    }
    const review = await through('self', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    });
    expect(review.status, review.body.toString()).toBe(201);
    expect(review.json.status.userInfo.username).toBe(tenant);
    expect(review.json.status.userInfo.groups).not.toContain('system:masters');
  });

  test.each(['self-nosecret', 'self-empty'])(
    '%s: no usable credential is a 503, never the gateway’s own identity',
    async (cluster) => {
      for (const path of [
        '/api/v1/namespaces',
        `/api/v1/namespaces/${env().gateway.platformNamespace}/secrets`,
      ]) {
        const answer = await through(cluster, path);
        expect([502, 503], `${path}: ${answer.status} ${answer.body.toString().slice(0, 200)}`).toContain(
          answer.status,
        );
        expect(answer.json).toMatchObject({ kind: 'Status', status: 'Failure' });
        expect(answer.json.message).toContain(cluster);
        expect(answer.body.toString()).not.toContain('"items"');
      }
    },
  );

  test('a link-local endpoint: an answer (the address’s, or an error Status naming the cluster), never a hang or the platform’s credential', async () => {
    // What sits at a link-local address differs by machine (nothing, a metadata service, a
    // network filter answering for it): the recorder test below shows what any endpoint is sent.
    const answer = await through('metadata', '/api/v1/namespaces', { signal: AbortSignal.timeout(60_000) });
    const body = answer.body.toString();
    if (answer.status === 502 || answer.status === 503 || answer.status === 504) {
      expect(answer.json).toMatchObject({ kind: 'Status', status: 'Failure' });
      expect(answer.json.message).toContain('metadata');
    }
    for (const secret of [env().host.adminToken, key]) expect(body).not.toContain(secret);
  });

  test('what any endpoint receives: the Secret’s credential and the caller’s impersonation, never the caller’s key', async () => {
    recorded.length = 0;
    const answer = await through('recorder', '/apis', { headers: { 'x-custom': 'kept' } });
    expect(answer.status).toBe(200);
    expect(recorded).toHaveLength(1);
    const headers = recorded[0] as http.IncomingHttpHeaders;
    expect(headers.authorization).toBe(`Bearer ${recorderToken}`);
    expect(headers['impersonate-user']).toBe(tenant);
    expect(String(headers['impersonate-group'])).toContain(`platform:user:${tenant}`);
    expect(String(headers['impersonate-group'])).not.toContain('system:masters');
    expect(JSON.stringify(headers)).not.toContain(key);
    expect(JSON.stringify(headers)).not.toContain(key.split('_').at(-1) as string);
  });
});
