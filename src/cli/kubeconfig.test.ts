import { describe, expect, test } from 'vitest';
import type { KubeConfigProxyTarget } from '../clusters/kubeconfig.ts';
import {
  type ManagementGet,
  PROXY_CONTEXT_EXTENSION,
  platformContextOf,
  proxyContextsAlone,
  reachableTargets,
  withProxyContexts,
} from './kubeconfig.ts';

const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n').toString('base64');

/** What `platform login` writes, beside a context of someone else's. */
const signedIn = () => ({
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [
    {
      name: 'platform-example',
      cluster: {
        server: 'https://platform.example.com/kubernetes/management',
        'certificate-authority-data': CA,
      },
    },
    { name: 'kind', cluster: { server: 'https://127.0.0.1:6443' } },
  ],
  users: [
    { name: 'platform-example', user: { token: 'key-1' } },
    { name: 'kind-admin', user: { token: 'admin' } },
  ],
  contexts: [
    { name: 'platform-example', context: { cluster: 'platform-example', user: 'platform-example' } },
    { name: 'kind', context: { cluster: 'kind', user: 'kind-admin', namespace: 'default' } },
  ],
  'current-context': 'kind',
  preferences: { colors: true },
});

const cluster = (name: string): KubeConfigProxyTarget => ({ kind: 'Cluster', cluster: name });
const virtualCluster = (project: string, name: string): KubeConfigProxyTarget => ({
  kind: 'ProjectVirtualCluster',
  project,
  virtualCluster: name,
});

describe('platformContextOf', () => {
  test("the gateway's base, the connection to it and the key's user entry of a management API context", () => {
    expect(platformContextOf(signedIn(), 'platform-example')).toEqual({
      name: 'platform-example',
      user: 'platform-example',
      gatewayBase: 'https://platform.example.com',
      connection: { 'certificate-authority-data': CA },
    });
  });

  test('a gateway behind a path prefix keeps it', () => {
    const config = signedIn();
    config.clusters[0]!.cluster.server = 'https://example.com/platform/kubernetes/management/';
    expect(platformContextOf(config, 'platform-example').gatewayBase).toBe('https://example.com/platform');
  });

  test('the current context by default; a context of another server or no context is refused', () => {
    expect(() => platformContextOf(signedIn())).toThrow(/does not point at the platform's management API/);
    expect(() => platformContextOf(signedIn(), 'missing')).toThrow(/no kubeconfig context "missing"/);
    expect(() => platformContextOf(undefined)).toThrow(/no kubeconfig context/);
  });
});

describe('withProxyContexts', () => {
  const platform = platformContextOf(signedIn(), 'platform-example');
  const targets = [cluster('prod'), virtualCluster('web', 'dev')];

  test('a context and a cluster per target on its access-proxy path, with the platform key; the rest untouched', () => {
    const before = signedIn();
    const after = withProxyContexts(before, platform, targets);
    expect(after.clusters).toEqual([
      ...before.clusters,
      {
        name: 'platform-example_cluster_prod',
        cluster: {
          server: 'https://platform.example.com/kubernetes/cluster/prod',
          'certificate-authority-data': CA,
        },
      },
      {
        name: 'platform-example_vcluster_web_dev',
        cluster: {
          server: 'https://platform.example.com/kubernetes/project/web/virtualcluster/dev',
          'certificate-authority-data': CA,
        },
      },
    ]);
    expect(after.contexts).toEqual([
      ...before.contexts,
      {
        name: 'platform-example_cluster_prod',
        context: {
          cluster: 'platform-example_cluster_prod',
          user: 'platform-example',
          extensions: [
            {
              name: PROXY_CONTEXT_EXTENSION,
              extension: { context: 'platform-example', target: '/kubernetes/cluster/prod' },
            },
          ],
        },
      },
      {
        name: 'platform-example_vcluster_web_dev',
        context: {
          cluster: 'platform-example_vcluster_web_dev',
          user: 'platform-example',
          extensions: [
            {
              name: PROXY_CONTEXT_EXTENSION,
              extension: {
                context: 'platform-example',
                target: '/kubernetes/project/web/virtualcluster/dev',
              },
            },
          ],
        },
      },
    ]);
    expect(after.users).toEqual(before.users);
    expect(after['current-context']).toBe('kind');
    expect(after.preferences).toEqual({ colors: true });
  });

  test('a second run replaces its own contexts and removes those of clusters no longer listed, only its own', () => {
    const first = withProxyContexts(signedIn(), platform, targets);
    // Someone's own context that happens to look like ours, without the extension: kept.
    first.contexts!.push({
      name: 'platform-example_cluster_mine',
      context: { cluster: 'kind', user: 'kind-admin' },
    });
    const second = withProxyContexts(first, platform, [virtualCluster('web', 'dev')]);
    expect(second.contexts!.map((entry) => entry.name)).toEqual([
      'platform-example',
      'kind',
      'platform-example_cluster_mine',
      'platform-example_vcluster_web_dev',
    ]);
    expect(second.clusters!.map((entry) => entry.name)).toEqual([
      'platform-example',
      'kind',
      'platform-example_vcluster_web_dev',
    ]);
  });

  test("contexts made from another platform context are not that context's to remove", () => {
    const other = { ...platform, name: 'platform-other' };
    const first = withProxyContexts(signedIn(), other, [cluster('prod')]);
    const second = withProxyContexts(first, platform, []);
    expect(second.contexts!.map((entry) => entry.name)).toContain('platform-other_cluster_prod');
  });

  test('--dry-run: the contexts, their clusters and the one user they use, as a kubeconfig of their own', () => {
    const alone = proxyContextsAlone(signedIn(), platform, [cluster('prod')]);
    expect(alone.users).toEqual([{ name: 'platform-example', user: { token: 'key-1' } }]);
    expect(alone.contexts!.map((entry) => entry.name)).toEqual(['platform-example_cluster_prod']);
    expect(alone.clusters!.map((entry) => entry.name)).toEqual(['platform-example_cluster_prod']);
  });
});

describe('reachableTargets', () => {
  const list = (items: unknown[]) => ({ status: 200, body: { items } });
  const forbidden = { status: 403, body: { kind: 'Status', code: 403 } };
  const named = (name: string, extra: Record<string, unknown> = {}) => ({ metadata: { name, ...extra } });
  const projects = [
    { metadata: { name: 'web' }, status: { namespace: 'p-web' } },
    { metadata: { name: 'new' } },
  ];

  test('clusters and the virtual clusters of readable projects, sorted; instances outside projects left out', async () => {
    const answers: Record<string, { status: number; body: unknown }> = {
      '/apis/management.platform/v1/clusters': list([named('zeta'), named('alpha')]),
      '/apis/management.platform/v1/projects': list(projects),
      '/apis/management.platform/v1/virtualclusterinstances': list([
        named('dev', { namespace: 'p-web' }),
        named('loose', { namespace: 'default' }),
        named('api', { namespace: 'p-web' }),
      ]),
    };
    const get: ManagementGet = async (path) => answers[path] ?? { status: 404, body: undefined };
    expect(await reachableTargets(get, [], () => {})).toEqual([
      cluster('alpha'),
      cluster('zeta'),
      virtualCluster('web', 'api'),
      virtualCluster('web', 'dev'),
    ]);
  });

  test('what the key may not list is skipped and said; instances are then listed per project namespace', async () => {
    const asked: string[] = [];
    const get: ManagementGet = async (path) => {
      asked.push(path);
      if (path === '/apis/management.platform/v1/projects') return list(projects);
      if (path === '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances')
        return list([named('dev', { namespace: 'p-web' })]);
      return forbidden;
    };
    const skipped: string[] = [];
    const targets = await reachableTargets(get, [], (what, code) => skipped.push(`${what} ${code}`));
    expect(targets).toEqual([virtualCluster('web', 'dev')]);
    expect(skipped).toEqual(['clusters 403']);
    expect(asked).toContain('/apis/management.platform/v1/virtualclusterinstances');
  });

  test('--project: only those projects are read, each alone; a refused one is skipped', async () => {
    const get: ManagementGet = async (path) => {
      if (path === '/apis/management.platform/v1/clusters') return list([]);
      if (path === '/apis/management.platform/v1/projects/web') return { status: 200, body: projects[0] };
      if (path === '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances')
        return list([named('dev', { namespace: 'p-web' })]);
      return forbidden;
    };
    const skipped: string[] = [];
    const targets = await reachableTargets(get, ['web', 'secret'], (what) => skipped.push(what));
    expect(targets).toEqual([virtualCluster('web', 'dev')]);
    expect(skipped).toEqual(['project secret']);
  });

  test('a key the platform refuses ends the run', async () => {
    const get: ManagementGet = async () => ({ status: 401, body: {} });
    await expect(reachableTargets(get, [], () => {})).rejects.toThrow(/refused the key \(401\)/);
  });
});
