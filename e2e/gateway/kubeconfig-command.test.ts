import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { runPlatform } from '../support/platform-cli.ts';
import { eventually } from '../support/wait.ts';
import { GROUP_VERSION, useGatewayEnv, writeGatewayKubeconfig } from './support.ts';

/**
 * `platform kubeconfig` as a person runs it (`bin/platform.js`, a child process), against a
 * gateway on a real apiserver: the contexts it writes for the clusters and virtual clusters the
 * key may list, with their access-proxy servers, the gateway's CA and the platform context's
 * key; other contexts and the current one untouched; a second run following what changed;
 * `--dry-run`; a key that may list nothing. Using the contexts with kubectl through the proxy is
 * e2e/access-proxy's part.
 */

const dir = mkdtempSync(join(tmpdir(), 'platform-kubeconfig-command-'));
/** `platform <args>` with `HOME` = `dir`: no kubeconfig but the one in `args` is read. */
const platform = (args: string[]) => runPlatform(args, dir);

type Entry = { name: string; [key: string]: unknown };
const names = (entries: Entry[] | undefined) => (entries ?? []).map((entry) => entry.name).sort();
const read = (path: string) => parseYaml(readFileSync(path, 'utf8'));

describe('platform kubeconfig', () => {
  const env = useGatewayEnv({ https: true, controllers: ['project'] });
  let admin: string;
  let nobody: string;
  const create = (plural: string, body: Record<string, unknown>, namespace?: string) =>
    namespace
      ? env().custom.createNamespacedCustomObject({
          group: 'management.platform',
          version: 'v1',
          namespace,
          plural,
          body: { apiVersion: GROUP_VERSION, ...body },
        })
      : env().custom.createClusterCustomObject({
          group: 'management.platform',
          version: 'v1',
          plural,
          body: { apiVersion: GROUP_VERSION, ...body },
        });

  /** The platform context `platform` (as login writes it) beside someone's own `kind` context, which is current. */
  const signedInKubeconfig = (name: string, token: string) => {
    const path = writeGatewayKubeconfig(env(), dir, name, token);
    const config = read(path);
    config.clusters.push({ name: 'kind', cluster: { server: 'https://127.0.0.1:6443' } });
    config.users.push({ name: 'kind-admin', user: { token: 'theirs' } });
    config.contexts.push({ name: 'kind', context: { cluster: 'kind', user: 'kind-admin' } });
    config['current-context'] = 'kind';
    writeFileSync(path, stringifyYaml(config), { mode: 0o600 });
    return path;
  };

  beforeAll(async () => {
    admin = await env().user('kubeconfig-admin', { admin: true });
    nobody = await env().user('kubeconfig-nobody');
    for (const name of ['prod', 'staging'])
      await create('clusters', {
        kind: 'Cluster',
        metadata: { name },
        spec: { endpoint: 'https://10.0.0.1:6443' },
      });
    await create('projects', {
      kind: 'Project',
      metadata: { name: 'web' },
      spec: { owner: { user: 'kubeconfig-admin' } },
    });
    await eventually(
      async () =>
        (
          (await env().custom.getClusterCustomObject({
            group: 'management.platform',
            version: 'v1',
            plural: 'projects',
            name: 'web',
          })) as { status?: { namespace?: string } }
        ).status?.namespace === 'p-web',
      30_000,
      'the project namespace recorded',
    );
    await create(
      'virtualclusterinstances',
      {
        kind: 'VirtualClusterInstance',
        metadata: { name: 'dev' },
        spec: { endpoint: 'https://dev.example.com' },
      },
      'p-web',
    );
    // An instance in a namespace of no project has no access-proxy path.
    await create(
      'virtualclusterinstances',
      {
        kind: 'VirtualClusterInstance',
        metadata: { name: 'loose' },
        spec: { endpoint: 'https://loose.example.com' },
      },
      'default',
    );
  });

  const origin = () => new URL(env().server.url).origin;
  const ca = () => Buffer.from(env().caPem!).toString('base64');

  test('a context per cluster and virtual cluster on its access-proxy path, with the platform key; the rest untouched', async () => {
    const path = signedInKubeconfig('admin', admin);
    const before = read(path);
    const run = await platform(['kubeconfig', '--kubeconfig', path, '--context', 'platform']);
    expect(run.code, run.stderr).toBe(0);
    const after = read(path);
    expect(names(after.contexts)).toEqual([
      'kind',
      'platform',
      'platform_cluster_prod',
      'platform_cluster_staging',
      'platform_vcluster_web_dev',
    ]);
    const cluster = (name: string) => after.clusters.find((entry: Entry) => entry.name === name).cluster;
    expect(cluster('platform_cluster_prod')).toEqual({
      server: `${origin()}/kubernetes/cluster/prod`,
      'certificate-authority-data': ca(),
    });
    expect(cluster('platform_vcluster_web_dev')).toEqual({
      server: `${origin()}/kubernetes/project/web/virtualcluster/dev`,
      'certificate-authority-data': ca(),
    });
    for (const context of after.contexts.filter((entry: Entry) => entry.name.startsWith('platform_')))
      expect(context.context.user).toBe('admin');
    // Someone's own context, the platform context, the users and the current context are as they were.
    for (const name of ['kind', 'platform'])
      expect(after.contexts.find((entry: Entry) => entry.name === name)).toEqual(
        before.contexts.find((entry: Entry) => entry.name === name),
      );
    expect(after.users).toEqual(before.users);
    expect(after['current-context']).toBe('kind');
    expect(run.stderr).toContain('platform_vcluster_web_dev');

    // A cluster gone: the next run removes its context and cluster, and only those.
    await env().custom.deleteClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'clusters',
      name: 'staging',
    });
    const again = await platform(['kubeconfig', '--kubeconfig', path, '--context', 'platform']);
    expect(again.code, again.stderr).toBe(0);
    const next = read(path);
    expect(names(next.contexts)).toEqual([
      'kind',
      'platform',
      'platform_cluster_prod',
      'platform_vcluster_web_dev',
    ]);
    expect(names(next.clusters)).toEqual([
      'kind',
      'platform',
      'platform_cluster_prod',
      'platform_vcluster_web_dev',
    ]);
  });

  test('--dry-run prints the contexts as a kubeconfig of their own and writes nothing', async () => {
    const path = signedInKubeconfig('admin-dry', admin);
    const before = readFileSync(path, 'utf8');
    const run = await platform(['kubeconfig', '--kubeconfig', path, '--context', 'platform', '--dry-run']);
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(path, 'utf8')).toBe(before);
    const printed = parseYaml(run.stdout);
    expect(names(printed.contexts)).toEqual(['platform_cluster_prod', 'platform_vcluster_web_dev']);
    expect(printed.users).toEqual([{ name: 'admin-dry', user: { token: admin } }]);
  });

  test('a key that may list nothing gets no contexts, and is told what was skipped', async () => {
    const path = signedInKubeconfig('nobody', nobody);
    const run = await platform(['kubeconfig', '--kubeconfig', path, '--context', 'platform']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/Skipped clusters: the platform answered 403/);
    expect(run.stderr).toMatch(/Skipped projects: the platform answered 403/);
    expect(names(read(path).contexts)).toEqual(['kind', 'platform']);
  });

  test('a context that is not the management API is refused', async () => {
    const path = signedInKubeconfig('admin-kind', admin);
    const run = await platform(['kubeconfig', '--kubeconfig', path]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/context "kind" does not point at the platform's management API/);
  });
});
