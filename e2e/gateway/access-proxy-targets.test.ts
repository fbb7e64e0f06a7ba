import net from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { StatusError } from '../../src/api/status.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { TargetConnection } from '../../src/gateway/access-proxy/target.ts';
import {
  MIN_SECRET_READ_INTERVAL_MS,
  type ProxyTargets,
  type ProxyTargetsOptions,
  setupProxyTargets,
  TargetConnectTimeout,
} from '../../src/gateway/access-proxy/targets.ts';
import { type Clock, systemClock } from '../../src/runtime/clock.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { get, open } from '../support/target-requests.ts';
import { eventually } from '../support/wait.ts';

const MP = '/apis/management.platform/v1';
const b64 = (text: string) => Buffer.from(text).toString('base64');

/**
 * How the access proxy reaches its targets (`src/gateway/access-proxy/targets.ts`), against real
 * apiservers: a host of its own (the platform's, with the CRDs; Clusters are cluster-scoped, so
 * not the run's shared host) and a second apiserver as the connected cluster and the virtual
 * cluster. The gateway's informers run on a Manager of the host; requests go out with the
 * resolved agent and credential as the relay sends them.
 */
describe('access proxy targets: a Cluster, a virtual cluster or a space, resolved to a connection', () => {
  const startCluster = useExtraClusters();
  const NAMESPACE = 'p-web';
  let host: Cluster;
  let target: Cluster;
  let admin: KubeClient;
  let manager: Manager;
  let now = Date.now();
  const clock: Clock = { now: () => now, setTimer: systemClock.setTimer };
  const closers: Array<() => unknown> = [];

  beforeAll(async () => {
    [host, target] = await Promise.all([
      startCluster({ name: uniqueName('proxy-host') }),
      startCluster({ name: uniqueName('proxy-target') }),
    ]);
    await installCrds(kubeConfigFor(host));
    admin = new KubeClient(kubeConfigFor(host));
    await admin.request({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: { metadata: { name: NAMESPACE } },
    });
    manager = new Manager({ api: new KubeClient(kubeConfigFor(host)), logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await manager?.stop();
    admin?.close();
  });

  /** A ProxyTargets on the test's manager (started on the first call), the gateway's identity being the host's admin. */
  let started = false;
  const proxyTargets = async (options: Partial<ProxyTargetsOptions> = {}): Promise<ProxyTargets> => {
    const targets = setupProxyTargets(manager, {
      api: new KubeClient(kubeConfigFor(host)),
      hostKubeConfig: kubeConfigFor(host),
      clock,
      projectNamespace: (project) => `p-${project}`,
      projectOfNamespace: (namespace) => (namespace.startsWith('p-') ? namespace.slice(2) : undefined),
      ...options,
    });
    closers.push(() => targets.close());
    if (!started) {
      started = true;
      await manager.start();
    }
    return targets;
  };
  const secret = (name: string, data: Record<string, string>) =>
    admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${NAMESPACE}/secrets`,
      body: { metadata: { name }, data },
    });
  const setSecret = (name: string, data: Record<string, string>) =>
    admin.request({
      method: 'PATCH',
      path: `/api/v1/namespaces/${NAMESPACE}/secrets/${name}`,
      body: { data },
      contentType: 'application/merge-patch+json',
    });
  const cluster = async (spec: Record<string, unknown>) => {
    const name = uniqueName('c');
    await admin.request({
      method: 'POST',
      path: `${MP}/clusters`,
      body: { apiVersion: 'management.platform/v1', kind: 'Cluster', metadata: { name }, spec },
    });
    return name;
  };
  /** The spec fields that reach the target apiserver. */
  const toTarget = () => ({ endpoint: target.server, caData: b64(target.caPem) });
  /** A Cluster reaching the target apiserver with the admin token, from a Secret of its own. */
  const workingCluster = async () => {
    const secretName = uniqueName('creds');
    await secret(secretName, { token: b64(target.adminToken) });
    const name = await cluster({
      ...toTarget(),
      credentialsSecretRef: { namespace: NAMESPACE, name: secretName },
    });
    return { name, secretName };
  };
  /** Resolves once the informer has the object (resolve answers 404 before). */
  const resolved = async (targets: ProxyTargets, to: Parameters<ProxyTargets['resolve']>[0]) => {
    let connection: TargetConnection | undefined;
    await eventually(
      async () => {
        connection = await targets.resolve(to).catch((err: unknown) => {
          if (err instanceof StatusError && err.code === 404) return undefined;
          throw err;
        });
        return connection !== undefined;
      },
      30_000,
      `${JSON.stringify(to)} in the cache`,
    );
    return connection!;
  };
  /** The StatusError a resolve is refused with. */
  const refusal = async (resolving: Promise<unknown>) =>
    (await resolving.catch((err: unknown) => err)) as StatusError;

  test('a Cluster: its agent and the platform credential GET /version of the target', async () => {
    const targets = await proxyTargets();
    const { name } = await workingCluster();
    const connection = await resolved(targets, { kind: 'Cluster', cluster: name });
    expect(connection.description).toBe(`cluster "${name}"`);
    expect(connection.server.origin).toBe(new URL(target.server).origin);
    const answer = await get(connection, '/version');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toHaveProperty('gitVersion');
    // Cached: the same connection while nothing changed.
    expect(await targets.resolve({ kind: 'Cluster', cluster: name })).toBe(connection);
  });

  test('a Cluster that does not exist: 404 in kube-apiserver words', async () => {
    const targets = await proxyTargets();
    const error = await refusal(targets.resolve({ kind: 'Cluster', cluster: 'no-such-cluster' }));
    expect(error).toBeInstanceOf(StatusError);
    expect(error.toStatus()).toMatchObject({
      code: 404,
      reason: 'NotFound',
      message: 'clusters.management.platform "no-such-cluster" not found',
      details: { name: 'no-such-cluster', group: 'management.platform', kind: 'clusters' },
    });
  });

  test('missing or unusable credentials: 503 naming the cluster and the reason, never the credentials', async () => {
    const targets = await proxyTargets();
    const missingSecret = await cluster({
      ...toTarget(),
      credentialsSecretRef: { namespace: NAMESPACE, name: 'absent' },
    });
    const noRef = await cluster(toTarget());
    const tokenName = uniqueName('tok');
    await secret(tokenName, { token: b64('s3cret-token-value') });
    const noEndpoint = await cluster({ credentialsSecretRef: { namespace: NAMESPACE, name: tokenName } });
    const expectations: Array<[string, string]> = [
      [missingSecret, `CredentialsMissing): Secret ${NAMESPACE}/absent does not exist`],
      [noRef, 'CredentialsNotConfigured): spec.credentialsSecretRef is not set'],
      [noEndpoint, 'CredentialsMissing): spec.endpoint is required with a token'],
    ];
    for (const [name, why] of expectations) {
      const message = `cluster "${name}" cannot be reached (${why}`;
      await eventually(
        () =>
          targets.resolve({ kind: 'Cluster', cluster: name }).then(
            () => false,
            (err: StatusError) => err.code !== 404,
          ),
        30_000,
        `${name} in the cache`,
      );
      const error = await refusal(targets.resolve({ kind: 'Cluster', cluster: name }));
      expect(error.toStatus()).toMatchObject({ code: 503, reason: 'ServiceUnavailable', message });
      expect(error.headers, 'no Retry-After: not transient, client-go would retry ten times').toEqual({});
      expect(JSON.stringify(error.toStatus())).not.toContain('s3cret-token-value');
    }
    // A refusal is answered from memory (no Secret read per request) for a second; then read again.
    await secret('absent', { token: b64(target.adminToken) });
    const fixed = { kind: 'Cluster', cluster: missingSecret } as const;
    expect((await refusal(targets.resolve(fixed))).code).toBe(503);
    now += MIN_SECRET_READ_INTERVAL_MS;
    expect((await get(await targets.resolve(fixed), '/version')).status).toBe(200);
  });

  test('a changed Secret: the same connection until it is read again (10 s, or invalidate), then a new one with the new credential', async () => {
    const targets = await proxyTargets();
    const { name, secretName } = await workingCluster();
    const to = { kind: 'Cluster', cluster: name } as const;
    const first = await resolved(targets, to);
    expect((await get(first, '/version')).status).toBe(200);

    // Read again, the same content: the connection (and its sockets) stays.
    now += MIN_SECRET_READ_INTERVAL_MS;
    targets.invalidate(to);
    expect(await targets.resolve(to)).toBe(first);

    await setSecret(secretName, { token: b64('not-a-token-of-the-target') });
    expect(await targets.resolve(to), 'within the recheck period').toBe(first);
    now += 10_000;
    const second = await targets.resolve(to);
    expect(second).not.toBe(first);
    expect(second.credentials()).not.toEqual(first.credentials());
    expect((await get(second, '/version')).status).toBe(401);

    // The 401 answer makes the relay invalidate; the fixed Secret is read at once, but not more
    // than once a second.
    await setSecret(secretName, { token: b64(target.adminToken) });
    targets.invalidate(to);
    expect(await targets.resolve(to), 'just read').toBe(second);
    now += MIN_SECRET_READ_INTERVAL_MS;
    const third = await targets.resolve(to);
    expect(third).not.toBe(second);
    expect((await get(third, '/version')).status).toBe(200);
  });

  test('a watch open on a replaced connection runs on: the old agent is retired, not destroyed', async () => {
    const targets = await proxyTargets();
    const { name, secretName } = await workingCluster();
    const to = { kind: 'Cluster', cluster: name } as const;
    const first = await resolved(targets, to);
    const watch = await open(
      first,
      '/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=false',
    );
    expect(watch.statusCode).toBe(200);
    let events = '';
    watch.on('data', (chunk: Buffer) => {
      events += chunk.toString();
    });

    await setSecret(secretName, { token: b64(`${target.adminToken}`), unrelated: b64('a change') });
    now += MIN_SECRET_READ_INTERVAL_MS;
    targets.invalidate(to);
    expect(await targets.resolve(to), 'a change that leaves the credential as it was').toBe(first);
    await setSecret(secretName, { token: b64('rotated-elsewhere') });
    now += MIN_SECRET_READ_INTERVAL_MS;
    targets.invalidate(to);
    expect(await targets.resolve(to)).not.toBe(first);

    const configMap = uniqueName('cm');
    const targetAdmin = new KubeClient(kubeConfigFor(target));
    closers.push(() => targetAdmin.close());
    await targetAdmin.request({
      method: 'POST',
      path: '/api/v1/namespaces/default/configmaps',
      body: { metadata: { name: configMap } },
    });
    await eventually(
      () => events.includes(`"name":"${configMap}"`),
      30_000,
      'the watch event on the retired connection',
    );
    watch.destroy();
  });

  test("a space's credential, the gateway's own, is read again from its kubeconfig every minute and after invalidate", async () => {
    const gatewayKubeConfig = kubeConfigFor(host);
    const targets = await proxyTargets({ hostKubeConfig: gatewayKubeConfig });
    const space = { kind: 'ProjectSpace', project: 'web', space: NAMESPACE } as const;
    const connection = await targets.resolve(space);
    const withToken = (token: string) =>
      gatewayKubeConfig.loadFromOptions({
        clusters: gatewayKubeConfig.clusters,
        users: [{ ...gatewayKubeConfig.getCurrentUser()!, token }],
        contexts: gatewayKubeConfig.contexts,
        currentContext: gatewayKubeConfig.currentContext,
      });
    const reads = (token: string) => () =>
      targets.resolve(space).then((c) => c.credentials().authorization === `Bearer ${token}`);
    withToken('rotated-token');
    expect(await reads('rotated-token')(), 'within the minute').toBe(false);
    now += 60_000;
    await eventually(reads('rotated-token'), 30_000, 'the rotated token read');
    expect((await get(connection, `/api/v1/namespaces/${NAMESPACE}`)).status).toBe(401);
    withToken(host.adminToken);
    targets.invalidate(space);
    await eventually(reads(host.adminToken), 30_000, 'the token read again after invalidate');
    expect((await get(connection, `/api/v1/namespaces/${NAMESPACE}`)).status).toBe(200);
  });

  test('beyond maxCachedTargets the least recently used connection goes', async () => {
    const targets = await proxyTargets({ maxCachedTargets: 1 });
    const [a, b] = [await workingCluster(), await workingCluster()];
    const first = await resolved(targets, { kind: 'Cluster', cluster: a.name });
    await resolved(targets, { kind: 'Cluster', cluster: b.name });
    expect(await targets.resolve({ kind: 'Cluster', cluster: a.name })).not.toBe(first);
  });

  test('a changed Cluster (another Secret) gives a new connection; a deleted one is 404', async () => {
    const targets = await proxyTargets();
    const { name } = await workingCluster();
    const to = { kind: 'Cluster', cluster: name } as const;
    const first = await resolved(targets, to);
    const other = uniqueName('creds');
    await secret(other, { token: b64('another-token') });
    await admin.request({
      method: 'PATCH',
      path: `${MP}/clusters/${name}`,
      body: { spec: { credentialsSecretRef: { namespace: NAMESPACE, name: other } } },
      contentType: 'application/merge-patch+json',
    });
    await eventually(async () => (await targets.resolve(to)) !== first, 30_000, 'a new connection');
    expect((await targets.resolve(to)).credentials()).toEqual({ authorization: 'Bearer another-token' });
    await admin.request({ method: 'DELETE', path: `${MP}/clusters/${name}` });
    await eventually(
      () =>
        targets.resolve(to).then(
          () => false,
          (err: StatusError) => err.code === 404,
        ),
      30_000,
      'the deleted Cluster answers 404',
    );
  });

  test('an endpoint that accepts TCP and never answers: the request fails with TargetConnectTimeout', async () => {
    const silent = net.createServer((socket) => closers.push(() => socket.destroy()));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    closers.push(() => silent.close());
    const port = (silent.address() as net.AddressInfo).port;
    const targets = await proxyTargets({ connectTimeoutMs: 500 });
    const secretName = uniqueName('creds');
    await secret(secretName, { token: b64('whatever') });
    const name = await cluster({
      endpoint: `https://127.0.0.1:${port}`,
      credentialsSecretRef: { namespace: NAMESPACE, name: secretName },
    });
    const connection = await resolved(targets, { kind: 'Cluster', cluster: name });
    const error = await get(connection, '/version').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(TargetConnectTimeout);
  });

  test("a project's virtual cluster: the instance in the project's namespace, its Secret there; 404 when absent", async () => {
    const targets = await proxyTargets();
    const secretName = uniqueName('vc-creds');
    await secret(secretName, { token: b64(target.adminToken) });
    const vc = uniqueName('vc');
    await admin.request({
      method: 'POST',
      path: `${MP}/namespaces/${NAMESPACE}/virtualclusterinstances`,
      body: {
        apiVersion: 'management.platform/v1',
        kind: 'VirtualClusterInstance',
        metadata: { name: vc },
        spec: {
          endpoint: target.server,
          caData: b64(target.caPem),
          credentialsSecretRef: { name: secretName },
        },
      },
    });
    const connection = await resolved(targets, {
      kind: 'ProjectVirtualCluster',
      project: 'web',
      virtualCluster: vc,
    });
    expect(connection.description).toBe(`virtual cluster "web/${vc}"`);
    expect((await get(connection, '/version')).status).toBe(200);
    // The same name in another project's namespace is another (absent) instance.
    const error = await refusal(
      targets.resolve({ kind: 'ProjectVirtualCluster', project: 'other', virtualCluster: vc }),
    );
    expect(error.toStatus()).toMatchObject({
      code: 404,
      message: `virtualclusterinstances.management.platform "${vc}" not found`,
    });
  });

  test("a project's space: the host apiserver with the gateway's own credential; another project's namespace is 404", async () => {
    const targets = await proxyTargets();
    const connection = await targets.resolve({ kind: 'ProjectSpace', project: 'web', space: NAMESPACE });
    expect(connection.description).toBe(`space "web/${NAMESPACE}"`);
    expect(connection.server.origin).toBe(new URL(host.server).origin);
    const answer = await get(connection, `/api/v1/namespaces/${NAMESPACE}`);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).metadata.name).toBe(NAMESPACE);
    const error = await refusal(
      targets.resolve({ kind: 'ProjectSpace', project: 'other', space: NAMESPACE }),
    );
    expect(error.code).toBe(404);
  });
});
