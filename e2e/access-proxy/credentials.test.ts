import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fetch as undiciFetch } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { ACCESS_KEY_EXTRA, GROUP_AUTHENTICATED } from '../../src/identity/groups.ts';
import { issueCertificate } from '../../src/pki/certificates.ts';
import {
  CLUSTER,
  connectCluster,
  IMPERSONATOR_ROLE,
  rawRequest,
  useAccessProxyEnv,
} from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually, waitForValue } from '../support/wait.ts';

/**
 * What docs/access-proxy.md says of the platform's credentials for a target and of what the
 * target sees: the credentials Secret holds a `token`, or a `kubeconfig` whose credentials are
 * inline (a client certificate here); a kubeconfig that would run a program is refused with 503
 * `InvalidCredentials`, naming the cluster; either way the target sees the caller (user, platform
 * groups, the key's name as the `management.platform/access-key` extra), never the platform's
 * identity. And long-lived connections through the proxy hold the same per-identity slots as the
 * management API's watches (two here): a third is 429 wherever it is opened.
 */
const WATCH_SLOTS = 2;

describe('access proxy: the credentials a target is reached with, whom it sees, and the watch slots it shares with the management API', () => {
  const env = useAccessProxyEnv({
    gateway: { watchLimits: { perIdentity: WATCH_SLOTS, maxTimeoutSeconds: 3600 } },
  });
  const CERT_CLUSTER = 'edge-by-certificate';
  const EXEC_CLUSTER = 'edge-by-exec';
  const CERT_IDENTITY = 'platform-access-proxy-certificate';
  /** The file the refused kubeconfig's program would create. */
  const RAN = join(tmpdir(), uniqueName('exec-ran'));

  beforeAll(async () => {
    const { connected, gateway } = env();
    // A client certificate of the connected cluster's CA (the control plane's, beside its state),
    // for a user bound to the same impersonator role as the token's ServiceAccount.
    const pki = join(dirname(connected.kubeconfigPath), '..', '..', 'pki');
    const ca = {
      certPem: readFileSync(join(pki, 'ca.crt'), 'utf8'),
      keyPem: readFileSync(join(pki, 'ca.key'), 'utf8'),
    };
    const certificate = await issueCertificate(ca, {
      commonName: CERT_IDENTITY,
      usage: 'client',
      validForSeconds: 3600,
    });
    await env()
      .admin('cluster')
      .request({
        method: 'POST',
        path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
        body: {
          metadata: { name: CERT_IDENTITY },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: IMPERSONATOR_ROLE },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: CERT_IDENTITY }],
        },
      });
    await connectCluster(gateway, {
      name: CERT_CLUSTER,
      // Where nothing listens: a kubeconfig is used as it is, its own server included.
      endpoint: 'https://127.0.0.1:1',
      credentials: {
        kubeconfig: kubeConfigYaml({
          name: 'edge',
          server: connected.server,
          caPem: connected.caPem,
          credentials: { clientCertificatePem: certificate.certPem, clientKeyPem: certificate.keyPem },
        }),
      },
    });
    await connectCluster(gateway, {
      name: EXEC_CLUSTER,
      endpoint: connected.server,
      credentials: {
        kubeconfig: stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'c', cluster: { server: connected.server } }],
          users: [
            {
              name: 'u',
              user: {
                exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'touch', args: [RAN] },
              },
            },
          ],
          contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
          'current-context': 'c',
        }),
      },
    });
  });

  /** A SelfSubjectReview through the proxy to the Cluster `cluster`. */
  const whoAmI = (cluster: string, token: string) =>
    rawRequest(
      `${env().gateway.server.url}/kubernetes/cluster/${cluster}/apis/authentication.k8s.io/v1/selfsubjectreviews`,
      env().gateway.dispatcher,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      },
    );

  /** whoAmI once the gateway knows the Cluster (404 until its informer has it). */
  const whoAmIOnceKnown = (cluster: string, token: string) =>
    waitForValue(
      `the Cluster ${cluster} known to the gateway`,
      () => whoAmI(cluster, token),
      (answer) => answer.status !== 404,
    );

  test('a token and a kubeconfig with a client certificate: the target sees the caller, with the platform groups and the key’s name', async () => {
    const person = uniqueName('cert-caller');
    await env().keyFor(person);
    const keyName = uniqueName('key');
    const token = await env().gateway.key({ user: person }, keyName);
    await env().gateway.accepted(token);
    for (const cluster of [CLUSTER, CERT_CLUSTER]) {
      const answer = await whoAmIOnceKnown(cluster, token);
      expect(answer.status, `${cluster}: ${answer.body.toString()}`).toBe(201);
      expect(answer.json.status.userInfo).toEqual({
        username: person,
        groups: expect.arrayContaining([
          GROUP_AUTHENTICATED,
          `platform:user:${person}`,
          'system:authenticated',
        ]),
        extra: { [ACCESS_KEY_EXTRA]: [keyName] },
      });
    }
  });

  test('a kubeconfig that would run a program: 503 InvalidCredentials naming the cluster, nothing run', async () => {
    const token = await env().keyFor(uniqueName('exec-caller'));
    const answer = await whoAmIOnceKnown(EXEC_CLUSTER, token);
    expect(answer.status).toBe(503);
    expect(answer.json).toMatchObject({ kind: 'Status', code: 503, reason: 'ServiceUnavailable' });
    expect(answer.json.message).toContain(`"${EXEC_CLUSTER}"`);
    expect(answer.json.message).toContain('InvalidCredentials');
    expect(answer.json.message).toContain('exec');
    expect(existsSync(RAN), 'the kubeconfig’s program was run').toBe(false);
  });

  test('watches through the proxy and on the management API share one per-identity limit: the next is 429 until one closes', async () => {
    const person = uniqueName('watcher');
    // An admin, who may watch the platform's users on the management API.
    const token = await env().gateway.user(person, { admin: true });
    await env().grant('cluster', person);
    await env().grant('virtualcluster', person);
    const other = await env().keyFor(uniqueName('other-watcher'));
    const g = env().gateway;
    const proxied = (path: 'cluster' | 'virtualcluster') => {
      const { prefix, namespace } = env().target(path);
      return `${prefix}/api/v1/namespaces/${namespace}/configmaps?watch=1&timeoutSeconds=3600`;
    };
    const management = `${g.api}/users?watch=true&timeoutSeconds=3600`;
    const open = async (url: string, bearer: string) => {
      const controller = new AbortController();
      const response = await undiciFetch(url, {
        headers: { authorization: `Bearer ${bearer}` },
        signal: controller.signal,
        dispatcher: g.dispatcher,
      });
      return {
        status: response.status,
        text: () => response.text(),
        close: () => {
          controller.abort();
          response.body?.cancel().catch(() => {});
        },
      };
    };

    const held = [await open(management, token), await open(proxied('cluster'), token)];
    expect(held.map((watch) => watch.status)).toEqual([200, 200]);
    const third = await open(proxied('virtualcluster'), token);
    expect(third.status).toBe(429);
    expect(JSON.parse(await third.text())).toMatchObject({
      kind: 'Status',
      code: 429,
      reason: 'TooManyRequests',
    });
    const alsoManagement = await open(management, token);
    expect(alsoManagement.status).toBe(429);
    alsoManagement.close();
    // The limit is the person's, not everyone's.
    const others = await open(proxied('cluster'), other);
    expect(others.status).not.toBe(429);
    others.close();

    // Closing the management watch frees a slot for a watch through the proxy.
    held[0]!.close();
    let freed: Awaited<ReturnType<typeof open>> | undefined;
    await eventually(
      async () => {
        const attempt = await open(proxied('virtualcluster'), token);
        if (attempt.status === 200) freed = attempt;
        else attempt.close();
        return attempt.status === 200;
      },
      30_000,
      'a slot given back when a watch closes',
    );
    freed?.close();
    held[1]!.close();
  });
});
