import { beforeAll, describe, expect, test } from 'vitest';
import type { Scope } from '../../src/api/scope.ts';
import { userGroup } from '../../src/identity/groups.ts';
import { isNotFound } from '../../src/runtime/errors.ts';
import {
  CLUSTER,
  PROJECT,
  PROJECT_NAMESPACE,
  type ProxyPath,
  type ResponseBytes,
  rawRequest,
  useAccessProxyEnv,
  VIRTUAL_CLUSTER,
} from '../support/access-proxy.ts';

/**
 * Who decides what through the access proxy (issue 26): the key's scope decides whether a request
 * may leave the platform (refused ones never reach the target), then the target's own RBAC decides
 * for the impersonated person, exactly as for the TokenReview method (username and the group
 * `platform:user:<user>`). A space reaches its namespace and nothing else.
 */
describe('access proxy: scope before forwarding, the target RBAC after', () => {
  const env = useAccessProxyEnv();
  const PATHS: readonly ProxyPath[] = ['cluster', 'virtualcluster', 'space'];
  beforeAll(async () => {
    // sam may do everything the editor role allows in each work namespace: only the scope narrows.
    await env().keyFor('sam');
    for (const path of PATHS) await env().grant(path, 'sam');
  });

  const listConfigMaps = (path: ProxyPath, token: string, namespace = env().target(path).namespace) =>
    env().viaProxy(path, token, `/api/v1/namespaces/${namespace}/configmaps`);
  /** Creates a ConfigMap through the proxy; returns the answer and whether the target holds it after. */
  const createThrough = async (
    path: ProxyPath,
    token: string,
    name: string,
    namespace = env().target(path).namespace,
  ) => {
    const answer = await env().viaProxy(path, token, `/api/v1/namespaces/${namespace}/configmaps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name } }),
    });
    const stored = await env()
      .admin(path)
      .request({ method: 'GET', path: `/api/v1/namespaces/${namespace}/configmaps/${name}` })
      .then(
        () => true,
        (err: unknown) => {
          if (isNotFound(err)) return false;
          throw err;
        },
      );
    return { answer, stored };
  };
  const expectRefused = (answer: ResponseBytes, words: RegExp) => {
    expect(answer.status).toBe(403);
    expect(answer.json).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Forbidden', code: 403 });
    expect(answer.json.message).toMatch(words);
  };

  describe('kubectl auth can-i answers as the target RBAC for the impersonated person', () => {
    test.each(['cluster', 'virtualcluster'] as const)('through the %s path', async (path) => {
      const person = `carol-${path}`;
      const token = await env().keyFor(person);
      const canI = () => env().kubectl(path, token, ['auth', 'can-i', 'create', 'configmaps', '-n', 'work']);
      expect(await canI()).toMatchObject({ code: 1, stdout: 'no\n' });

      // Bound by the group the platform asserts for the person (what TokenReview answers).
      const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/work/rolebindings`;
      await env()
        .admin(path)
        .request({
          method: 'POST',
          path: rbac,
          body: {
            metadata: { name: `by-group-${person}` },
            roleRef: {
              apiGroup: 'rbac.authorization.k8s.io',
              kind: 'ClusterRole',
              name: 'access-proxy-e2e-editor',
            },
            subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: userGroup(person) }],
          },
        });
      expect(await canI()).toMatchObject({ code: 0, stdout: 'yes\n' });
      expect(
        await env().kubectl(path, token, ['auth', 'can-i', 'create', 'configmaps', '-n', 'default']),
      ).toMatchObject({ code: 1, stdout: 'no\n' });
      await env()
        .admin(path)
        .request({ method: 'DELETE', path: `${rbac}/by-group-${person}` });
      expect(await canI()).toMatchObject({ code: 1, stdout: 'no\n' });

      // Bound by the username.
      await env().grant(path, person);
      expect(await canI()).toMatchObject({ code: 0, stdout: 'yes\n' });
    });
  });

  describe('the key scope allows and refuses exactly as written', () => {
    const cases: { name: string; scope: Scope; allowed: ProxyPath[] }[] = [
      { name: `clusters: ${CLUSTER}`, scope: { clusters: [{ cluster: CLUSTER }] }, allowed: ['cluster'] },
      { name: 'clusters: another cluster', scope: { clusters: [{ cluster: 'elsewhere' }] }, allowed: [] },
      {
        name: `virtualClusters: ${PROJECT}/${VIRTUAL_CLUSTER}`,
        scope: { virtualClusters: [{ project: PROJECT, virtualCluster: VIRTUAL_CLUSTER }] },
        allowed: ['virtualcluster'],
      },
      {
        name: `spaces: ${PROJECT}/${PROJECT_NAMESPACE}`,
        scope: { spaces: [{ project: PROJECT, space: PROJECT_NAMESPACE }] },
        allowed: ['space'],
      },
      {
        name: `projects: ${PROJECT}`,
        scope: { projects: [{ project: PROJECT }] },
        allowed: ['virtualcluster', 'space'],
      },
    ];
    test.each(cases)('$name', async ({ scope, allowed }) => {
      const token = await env().keyFor('sam', scope);
      for (const path of PATHS) {
        const name = `scoped-${Math.random().toString(36).slice(2, 8)}`;
        const { answer, stored } = await createThrough(path, token, name);
        if (allowed.includes(path)) {
          expect(answer.status, path).toBe(201);
          expect(stored, path).toBe(true);
        } else {
          expectRefused(answer, /scope/);
          // The Status says which part of the scope refused it, and what the request concerned.
          const part = Object.keys(scope)[0];
          expect(answer.json.message, path).toMatch(
            new RegExp(`scope\\.${part}( does not name|: the request concerns no)`),
          );
          expect(stored, `${path}: the refused request reached the target`).toBe(false);
        }
      }
    });

    test('rules: verbs, resources, namespaces, request targets and cluster, each enforced', async () => {
      const token = await env().keyFor('sam', {
        rules: [
          {
            verbs: ['get', 'list'],
            resources: [{ group: '', resources: ['configmaps'] }],
            namespaces: ['work'],
            requestTargets: ['Cluster'],
            cluster: CLUSTER,
          },
        ],
      });
      expect((await listConfigMaps('cluster', token)).status).toBe(200);
      // Another verb, another resource, another namespace, another target: each refused here.
      const create = await createThrough('cluster', token, 'by-rule');
      expectRefused(create.answer, /create configmaps/);
      expect(create.stored).toBe(false);
      expectRefused(
        await env().viaProxy('cluster', token, '/api/v1/namespaces/work/secrets'),
        /list secrets/,
      );
      expectRefused(await listConfigMaps('cluster', token, 'default'), /list configmaps/);
      expectRefused(await listConfigMaps('virtualcluster', token), /list configmaps/);
      expectRefused(await listConfigMaps('space', token), /list configmaps/);
      // A subresource is not its resource: pods/proxy is not pods.
      const subresourceKey = await env().keyFor('sam', {
        rules: [
          { verbs: ['*'], resources: [{ group: '', resources: ['pods'] }], requestTargets: ['Cluster'] },
        ],
      });
      expect((await env().viaProxy('cluster', subresourceKey, '/api/v1/namespaces/work/pods')).status).toBe(
        200,
      );
      expectRefused(
        await env().viaProxy('cluster', subresourceKey, '/api/v1/namespaces/work/pods/some-pod/proxy/'),
        /pods\/proxy/,
      );
      // nonResourceURLs: /version only.
      const versionKey = await env().keyFor('sam', {
        rules: [{ nonResourceURLs: ['/version'], requestTargets: ['Cluster'] }],
      });
      expect((await env().viaProxy('cluster', versionKey, '/version')).status).toBe(200);
      expectRefused(await env().viaProxy('cluster', versionKey, '/apis'), /\/apis/);
    });
  });

  describe('a space reaches its namespace and nothing else', () => {
    test('another namespace, all namespaces, and cluster-scoped resources are refused, even where RBAC allows', async () => {
      const token = await env().keyFor('sam');
      const host = env().admin('space');
      await host.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: 'elsewhere' } },
      });
      await env().grant('space', 'sam', 'elsewhere');
      // Directly on the host, sam could.
      const direct = await env().direct('space', '/api/v1/namespaces/elsewhere/configmaps', { as: 'sam' });
      expect(direct.status).toBe(200);

      expect((await listConfigMaps('space', token)).status).toBe(200);
      const other = await createThrough('space', token, 'escaped', 'elsewhere');
      expect(other.answer.status).toBe(403);
      expect(other.stored).toBe(false);
      for (const upstream of [
        '/api/v1/configmaps',
        '/api/v1/namespaces',
        '/api/v1/namespaces/elsewhere',
        '/api/v1/nodes',
        '/apis/rbac.authorization.k8s.io/v1/clusterroles',
        '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      ]) {
        const answer = await env().viaProxy('space', token, upstream);
        expect(answer.status, upstream).toBe(403);
        expect(answer.json?.kind, upstream).toBe('Status');
      }
      // A namespace that is not the project's is no space of it: the path names nothing.
      const notOurs = await rawRequest(
        `${env().gateway.server.url}/kubernetes/project/${PROJECT}/space/elsewhere/api/v1/namespaces/elsewhere/configmaps`,
        env().gateway.dispatcher,
        { headers: { authorization: `Bearer ${token}` } },
      );
      expect(notOurs.status).toBe(404);

      // kubectl says so too.
      const kubectlElsewhere = await env().kubectl('space', token, ['get', 'configmaps', '-n', 'elsewhere']);
      expect(kubectlElsewhere.code).not.toBe(0);
      expect(kubectlElsewhere.stderr).toMatch(/[Ff]orbidden/);
      const kubectlAll = await env().kubectl('space', token, ['get', 'configmaps', '-A']);
      expect(kubectlAll.code).not.toBe(0);
    });
  });
});
