// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed audit events
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { CLUSTER, PROJECT, PROJECT_NAMESPACE, useAccessProxyEnv } from '../support/access-proxy.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { connectCluster, PROXY_IDENTITY, prepareTarget, VIRTUAL_CLUSTER } from '../support/proxy-targets.ts';

/**
 * Issue 26: a key scoped to one cluster reaches no other by any spelling of the path, a space key
 * reaches nothing outside its namespace, and impersonation headers of the caller never travel.
 * Cluster A is `edge`; cluster B is an apiserver of this file, writing an audit log (every request,
 * blocking), connected as a Cluster named `cluster` (like a path segment of the proxy's grammar).
 * The person may read ConfigMaps on both targets and in two namespaces of the host, so only the
 * platform stands between the key and B's or the other namespace's secret value. The paths are
 * sent as written (node:https, no URL parser resolving `..` on the way), and every refusal is
 * checked against B's audit log: the target never saw the request.
 */
const OTHER = 'cluster';
const OTHER_PROJECT = uniqueName('other');

describe('security: the access proxy reaches only what the key names, by any spelling', () => {
  const env = useAccessProxyEnv();
  const startCluster = useExtraClusters();
  const person = uniqueName('tess');
  const marker = `b-secret-${randomBytes(12).toString('hex')}`;
  let workDir: string;
  let other: Cluster;
  let auditLog: string;
  let scopedToA: string;
  let inSpace: string;
  let unscoped: string;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'access-proxy-paths-'));
    auditLog = join(workDir, 'audit.log');
    const policy = join(workDir, 'policy.yaml');
    writeFileSync(
      policy,
      stringify({
        apiVersion: 'audit.k8s.io/v1',
        kind: 'Policy',
        omitStages: ['RequestReceived'],
        rules: [{ level: 'Metadata' }],
      }),
    );
    other = await startCluster({
      name: uniqueName('other'),
      extraApiServerArgs: [
        `--audit-policy-file=${policy}`,
        `--audit-log-path=${auditLog}`,
        '--audit-log-mode=blocking',
      ],
    });
    await connectCluster(env().gateway, {
      name: OTHER,
      endpoint: other.server,
      caPem: other.caPem,
      credentials: { token: await prepareTarget(other) },
    });
    const b = new KubeClient(kubeConfigFor(other));
    await b.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name: 'work' } } });
    await b.request({
      method: 'POST',
      path: '/api/v1/namespaces/work/configmaps',
      body: { metadata: { name: 'marker' }, data: { value: marker } },
    });
    await b.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        metadata: { name: 'person-reads' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: person }],
      },
    });
    b.close();
    // The same secret value in A, in the space and outside it (another project's space and a plain namespace).
    const g = env().gateway;
    await g.custom.createClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'projects',
      body: {
        apiVersion: 'management.platform/v1',
        kind: 'Project',
        metadata: { name: OTHER_PROJECT },
        spec: {},
      },
    });
    for (const namespace of ['elsewhere'])
      await g.core.createNamespace({ body: { metadata: { name: namespace } } });
    await waitForNamespace(`p-${OTHER_PROJECT}`);
    for (const namespace of ['elsewhere', `p-${OTHER_PROJECT}`]) {
      await g.core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name: 'marker' }, data: { value: marker } },
      });
      await env().grant('space', person, namespace);
    }
    await env().grant('space', person);
    await env().grant('cluster', person);
    scopedToA = await env().keyFor(person, { clusters: [{ cluster: CLUSTER }] });
    inSpace = await env().keyFor(person, { spaces: [{ project: PROJECT, space: PROJECT_NAMESPACE }] });
    unscoped = await env().keyFor(person);
  });

  afterAll(() => {
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  async function waitForNamespace(name: string) {
    const deadline = Date.now() + 30_000;
    while (
      !(await env()
        .gateway.core.readNamespace({ name })
        .catch(() => undefined))
    ) {
      if (Date.now() > deadline) throw new Error(`no namespace ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** A GET of `path` exactly as written (no client resolves or re-encodes it). */
  function rawGet(path: string, token: string, headers: Record<string, string> = {}) {
    const url = new URL(env().gateway.server.url);
    return new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = https.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'GET',
          ca: env().gateway.caPem,
          headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...headers },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end();
    });
  }

  /** B's audit events of the person (impersonated) or of the platform's identity there. */
  function eventsOnB(): any[] {
    const platform = `system:serviceaccount:${PROXY_IDENTITY.namespace}:${PROXY_IDENTITY.name}`;
    return readFileSync(auditLog, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line))
      .filter((event) => event.impersonatedUser?.username === person || event.user?.username === platform);
  }

  const CM = 'api/v1/namespaces/work/configmaps/marker';
  const toB = [
    `/kubernetes/cluster/${OTHER}/${CM}`,
    `/kubernetes/cluster/%63luster/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/../${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/%2e%2e/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/%2E%2E/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/.%2e/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}%2F..%2F${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}%2f${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}\\..\\${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/api/v1/../../../${OTHER}/${CM}`,
    `/kubernetes/cluster//${OTHER}/${CM}`,
    `/kubernetes//cluster/${OTHER}/${CM}`,
    `//kubernetes/cluster/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}//../${OTHER}/${CM}`,
    `/kubernetes/cluster/${OTHER}./${CM}`,
    `/kubernetes/cluster/${OTHER}../${CM}`,
    `/kubernetes/cluster/${CLUSTER}./../${OTHER}/${CM}`,
    `/kubernetes/cluster/${OTHER.toUpperCase()}/${CM}`,
    `/kubernetes/CLUSTER/${OTHER}/${CM}`,
    `/Kubernetes/cluster/${OTHER}/${CM}`,
    `/kubernetes/cluster/${OTHER}%00/${CM}`,
    `/kubernetes/cluster/${OTHER}%20/${CM}`,
    `/kubernetes/project/${PROJECT}/virtualcluster/../../cluster/${OTHER}/${CM}`,
    `/kubernetes/management/../cluster/${OTHER}/${CM}`,
    `/kubernetes/management/%2e%2e/cluster/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/kubernetes/cluster/${OTHER}/${CM}`,
    `/kubernetes/cluster/${CLUSTER}/..;/${OTHER}/${CM}`,
  ];

  test('a key scoped to cluster A reaches cluster B by no spelling, and B never sees the attempt', async () => {
    const before = eventsOnB().length;
    for (const path of toB) {
      const answer = await rawGet(path, scopedToA);
      expect([400, 403, 404], `${path}: ${answer.status} ${answer.body.slice(0, 300)}`).toContain(
        answer.status,
      );
      expect(answer.body, path).not.toContain(marker);
    }
    expect(eventsOnB().slice(before), 'requests B saw').toEqual([]);
    // The direct spelling is refused by the scope, which says so.
    const refused = await rawGet(toB[0] as string, scopedToA);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ kind: 'Status', code: 403 });
    // The key does reach A, and an unscoped key of the same person reaches B: only the scope refused.
    expect(
      (await rawGet(`/kubernetes/cluster/${CLUSTER}/api/v1/namespaces/work/configmaps`, scopedToA)).status,
    ).toBe(200);
    const reached = await rawGet(toB[0] as string, unscoped);
    expect(reached.status, reached.body).toBe(200);
    expect(reached.body).toContain(marker);
    expect(eventsOnB().slice(before).length).toBeGreaterThan(0);
  });

  const SPACE = `/kubernetes/project/${PROJECT}/space/${PROJECT_NAMESPACE}`;
  const outOfSpace = [
    `${SPACE}/api/v1/namespaces/elsewhere/configmaps/marker`,
    `${SPACE}/api/v1/namespaces/${PROJECT_NAMESPACE}/../elsewhere/configmaps/marker`,
    `${SPACE}/api/v1/namespaces/${PROJECT_NAMESPACE}/configmaps/../../elsewhere/configmaps/marker`,
    `${SPACE}/api/v1/namespaces/${PROJECT_NAMESPACE}%2F..%2Felsewhere/configmaps/marker`,
    `${SPACE}/api/v1/namespaces/${PROJECT_NAMESPACE}/%2e%2e/elsewhere/configmaps/marker`,
    `${SPACE}/api/v1/namespaces//elsewhere/configmaps/marker`,
    `${SPACE}/api/v1/configmaps`,
    `${SPACE}/api/v1/namespaces`,
    `${SPACE}/api/v1/namespaces/elsewhere`,
    `${SPACE}/../elsewhere/api/v1/namespaces/elsewhere/configmaps/marker`,
    `/kubernetes/project/${PROJECT}/space/elsewhere/api/v1/namespaces/elsewhere/configmaps/marker`,
    `/kubernetes/project/${PROJECT}/space/p-${OTHER_PROJECT}/api/v1/namespaces/p-${OTHER_PROJECT}/configmaps/marker`,
    `/kubernetes/project/${OTHER_PROJECT}/space/p-${OTHER_PROJECT}/api/v1/namespaces/p-${OTHER_PROJECT}/configmaps/marker`,
    `/kubernetes/project/${PROJECT}/space/${PROJECT_NAMESPACE}./api/v1/namespaces/elsewhere/configmaps/marker`,
    `/kubernetes/project/${PROJECT}/space/${PROJECT_NAMESPACE.toUpperCase()}/api/v1/namespaces/elsewhere/configmaps/marker`,
    `/kubernetes/project/${PROJECT}/space/${PROJECT_NAMESPACE}/api/v1/namespaces/elsewhere/configmaps?watch=1`,
    `/kubernetes/cluster/${CLUSTER}/../../project/${OTHER_PROJECT}/space/p-${OTHER_PROJECT}/api/v1/namespaces/p-${OTHER_PROJECT}/configmaps/marker`,
  ];

  test('a space key reaches nothing outside its namespace: not another namespace, project or anything cluster-wide', async () => {
    for (const path of outOfSpace) {
      const answer = await rawGet(path, inSpace);
      expect([400, 403, 404], `${path}: ${answer.status} ${answer.body.slice(0, 300)}`).toContain(
        answer.status,
      );
      expect(answer.body, path).not.toContain(marker);
    }
    // The same person and key reach their space; an unscoped key reaches the other namespace only
    // through the management API's own paths, never through this space.
    const own = await rawGet(`${SPACE}/api/v1/namespaces/${PROJECT_NAMESPACE}/configmaps`, inSpace);
    expect(own.status, own.body).toBe(200);
    for (const path of outOfSpace.slice(0, 10)) {
      const answer = await rawGet(path, unscoped);
      expect([400, 403], `${path} (unscoped key): ${answer.status}`).toContain(answer.status);
      expect(answer.body, path).not.toContain(marker);
    }
  });

  test('a key scoped to one cluster learns nothing of what else exists: an existing and a made-up cluster, project, virtual cluster or space get the same 403', async () => {
    const pairs: Array<[string, string]> = [
      [`/kubernetes/cluster/${OTHER}/api`, `/kubernetes/cluster/${uniqueName('none')}/api`],
      [
        `/kubernetes/project/${PROJECT}/virtualcluster/${VIRTUAL_CLUSTER}/api`,
        `/kubernetes/project/${uniqueName('none')}/virtualcluster/${VIRTUAL_CLUSTER}/api`,
      ],
      [
        `/kubernetes/project/${PROJECT}/virtualcluster/${VIRTUAL_CLUSTER}/api`,
        `/kubernetes/project/${PROJECT}/virtualcluster/${uniqueName('none')}/api`,
      ],
      [`${SPACE}/api`, `/kubernetes/project/${PROJECT}/space/${uniqueName('none')}/api`],
      [`${SPACE}/api`, `/kubernetes/project/${uniqueName('none')}/space/${PROJECT_NAMESPACE}/api`],
    ];
    for (const [existing, madeUp] of pairs) {
      const [known, unknown] = [await rawGet(existing, scopedToA), await rawGet(madeUp, scopedToA)];
      expect([known.status, unknown.status], `${existing} / ${madeUp}`).toEqual([403, 403]);
    }
    // The unscoped key is told what does not exist.
    expect((await rawGet(pairs[1]![1], unscoped)).status).toBe(404);
    expect((await rawGet(pairs[4]![1], unscoped)).status).toBe(404);
  });

  const impersonation: Array<[string, Record<string, string>]> = [
    ['Impersonate-User', { 'Impersonate-User': 'admin' }],
    ['Impersonate-Group', { 'Impersonate-Group': 'system:masters' }],
    ['Impersonate-Uid', { 'Impersonate-Uid': '0' }],
    ['Impersonate-Extra-Scopes', { 'Impersonate-Extra-Scopes': 'all' }],
    [
      'Impersonate-Extra-management.platform%2Faccess-key',
      { 'Impersonate-Extra-management.platform%2Faccess-key': 'k' },
    ],
    ['iMpErSoNaTe-UsEr', { 'iMpErSoNaTe-UsEr': 'admin' }],
    ['IMPERSONATE-GROUP', { 'IMPERSONATE-GROUP': 'system:masters' }],
  ];

  test.each(impersonation)(
    'a caller header %s is refused 403 naming it, and never reaches the target',
    async (name, headers) => {
      const before = eventsOnB().length;
      const path = `/kubernetes/cluster/${OTHER}/api/v1/namespaces/work/configmaps/marker`;
      const answer = await rawGet(path, unscoped, headers);
      expect(answer.status, answer.body).toBe(403);
      const status = JSON.parse(answer.body);
      expect(status).toMatchObject({ kind: 'Status', status: 'Failure', code: 403 });
      expect(status.message.toLowerCase()).toContain(name.toLowerCase());
      expect(answer.body).not.toContain(marker);
      expect(eventsOnB().slice(before), 'requests B saw').toEqual([]);
      // Without the header the same request goes through, impersonating the person.
      const plain = await rawGet(path, unscoped);
      expect(plain.status, plain.body).toBe(200);
      const seen = eventsOnB().slice(before);
      expect(seen.length).toBeGreaterThan(0);
      for (const event of seen) {
        expect(event.impersonatedUser?.username, JSON.stringify(event)).toBe(person);
        expect(event.impersonatedUser?.groups ?? []).not.toContain('system:masters');
      }
    },
  );
});
