// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { readFileSync } from 'node:fs';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import {
  hostKubeConfig,
  kubeConfigFor,
  uniqueName,
  useExtraClusters,
  useNamespace,
} from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { useOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';
import { Api, configYaml, serviceAndEndpoints, TEST_CONFIG } from './support.ts';

const PLURAL = 'virtualclusterinstances';
const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * The operator's `virtualcluster` controller runs a syncer per VirtualClusterInstance. The
 * virtual cluster is a second apiserver; the instance reaches it with a bearer token (or a
 * kubeconfig) from a Secret beside it. The host namespace is the instance's own namespace.
 */
describe('the operator syncs a VirtualClusterInstance', () => {
  const namespace = useNamespace('vci-sync');
  const startCluster = useExtraClusters();
  const kc = hostKubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const host = new Api(kc);
  let cluster: Cluster;
  let virtual: Api;
  beforeAll(async () => {
    await installCrds(kc);
    cluster = await startCluster({ name: uniqueName('vc') });
    virtual = new Api(kubeConfigFor(cluster));
    await virtual.createNamespace('apps');
  });
  const operator = useOperator(namespace, { controllers: ['virtualcluster'] });
  afterAll(() => {
    virtual?.close();
    host.close();
  });

  const instance = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind: 'VirtualClusterInstance',
    metadata: { name },
    spec,
  });
  const readInstance = (name: string) =>
    custom.getNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: namespace(),
      plural: PLURAL,
      name,
    }) as Promise<any>;
  const syncing = async (name: string) =>
    ((await readInstance(name)).status?.conditions ?? []).find((c: any) => c.type === 'Syncing');
  const waitSyncing = async (name: string, check: (c: any) => boolean, what: string) => {
    let last: unknown;
    await eventually(
      async () => {
        last = await syncing(name);
        return Boolean(last) && check(last);
      },
      60_000,
      what,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last condition: ${JSON.stringify(last)}`);
    });
    return last as any;
  };
  const waitHost = (plural: string, name: string, check: (o: any) => boolean, what: string) =>
    eventually(async () => check(await host.get(plural, namespace(), name)), 60_000, what);

  test('token credentials: the syncer runs, objects sync, failures and recovery show in Syncing', async () => {
    const ns = namespace();
    await host.create('secrets', ns, {
      metadata: { name: 'dev-creds' },
      data: { token: b64(cluster.adminToken) },
    });
    await custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: ns,
      plural: PLURAL,
      body: instance('dev', {
        endpoint: cluster.server,
        caData: b64(cluster.caPem),
        credentialsSecretRef: { name: 'dev-creds' },
        config: configYaml(),
      }),
    });
    const condition = await waitSyncing('dev', (c) => c.status === 'True', 'Syncing=True');
    expect(condition).toMatchObject({ reason: 'Synced', observedGeneration: 1 });

    const { service, endpoints } = serviceAndEndpoints('db', {
      annotations: { 'platform.test/tier': 'gold' },
    });
    await virtual.create('services', 'apps', service);
    await virtual.create('endpoints', 'apps', endpoints);
    const hostName = (name: string) => hostNameLong(name, 'apps', 'dev');
    await waitHost(
      'endpoints',
      hostName('db'),
      (e) => e?.metadata.annotations['platform.test/tier'] === 'host-gold',
      'host Endpoints db',
    );

    // docs/metrics.md: the operator's metrics carry the syncer's, its controllers named
    // syncer:<namespace>/<name>:<kind>, its vcluster label <host namespace>/<name>.
    const metrics = await operator().registry.metrics();
    for (const kind of ['service', 'endpoints'])
      expect(metrics).toContain(
        `controller_runtime_max_concurrent_reconciles{controller="syncer:${ns}/dev:${kind}"}`,
      );
    expect(metrics).toContain(`platform_syncer_ready{vcluster="${ns}/dev"} 1`);
    const syncedToHost = metrics
      .split('\n')
      .filter(
        (line) =>
          line.startsWith('platform_syncer_objects_synced_total{') &&
          [`vcluster="${ns}/dev"`, 'kind="Endpoints"', 'direction="toHost"'].every((label) =>
            line.includes(label),
          ),
      );
    expect(syncedToHost, metrics).toHaveLength(1);
    expect(Number(syncedToHost[0]!.split(' ').at(-1))).toBeGreaterThan(0);

    // A hostile patch: that object fails, the condition says which, the rest keeps syncing.
    const evil = serviceAndEndpoints('evil', { annotations: { 'platform.test/hostile': 'yes' } });
    await virtual.create('services', 'apps', evil.service);
    await virtual.create('endpoints', 'apps', evil.endpoints);
    const failed = await waitSyncing('dev', (c) => c.reason === 'SyncError', 'Syncing=False/SyncError');
    expect(failed.status).toBe('False');
    expect(failed.message).toContain('Endpoints apps/evil');
    expect(failed.message).toContain('ExpressionTimeout');
    const good = serviceAndEndpoints('good');
    await virtual.create('services', 'apps', good.service);
    await virtual.create('endpoints', 'apps', good.endpoints);
    await waitHost('endpoints', hostName('good'), (e) => e !== null, 'host Endpoints good');
    expect(await host.get('endpoints', namespace(), hostName('evil'))).toBeNull();

    // Removing the hostile object clears the failure.
    await virtual.delete('endpoints', 'apps', 'evil');
    await waitSyncing('dev', (c) => c.status === 'True', 'Syncing=True again');

    // A new configuration restarts the syncer, which applies it to the existing objects.
    const changed = structuredClone(TEST_CONFIG);
    changed.sync.toHost.endpoints.patches[0]!.expression = '"h2-" + value';
    changed.sync.toHost.endpoints.patches[0]!.reverseExpression = 'value.replace(/^h2-/, "")';
    await custom.patchNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'dev',
      body: [{ op: 'replace', path: '/spec/config', value: configYaml(changed) }],
    });
    await waitHost(
      'endpoints',
      hostName('db'),
      (e) => e?.metadata.annotations['platform.test/tier'] === 'h2-gold',
      'the new expression applied',
    );
    await waitSyncing(
      'dev',
      (c) => c.status === 'True' && c.observedGeneration === 2,
      'Syncing for generation 2',
    );

    // Deleting the instance stops its syncer: nothing new reaches the host.
    await custom.deleteNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'dev',
    });
    await eventually(
      async () => (await readInstance('dev').catch(() => null)) === null,
      30_000,
      'dev deleted',
    );
    await new Promise((r) => setTimeout(r, 1000));
    await virtual.create('services', 'apps', {
      metadata: { name: 'unsynced' },
      spec: { ports: [{ port: 1 }] },
    });
    await new Promise((r) => setTimeout(r, 3000));
    expect(await host.get('services', namespace(), hostName('unsynced'))).toBeNull();
  });

  test('missing credentials are reported; a kubeconfig added later connects', async () => {
    const ns = namespace();
    await custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: ns,
      plural: PLURAL,
      body: instance('staging', {
        endpoint: cluster.server,
        credentialsSecretRef: { name: 'staging-creds' },
        config: configYaml({ sync: { toHost: { endpoints: { enabled: false } } } }),
      }),
    });
    const missing = await waitSyncing(
      'staging',
      (c) => c.reason === 'CredentialsMissing',
      'CredentialsMissing',
    );
    expect(missing.status).toBe('False');
    expect(missing.message).toContain('staging-creds');

    // A kubeconfig that would read a file of the operator's is refused, without quoting it.
    const hostile = [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
      'users: [{name: u, user: {token-file: /var/run/secrets/kubernetes.io/serviceaccount/token}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');
    await host.create('secrets', ns, {
      metadata: { name: 'staging-creds' },
      data: { kubeconfig: b64(hostile) },
    });
    const refused = await waitSyncing(
      'staging',
      (c) => c.reason === 'InvalidCredentials',
      'InvalidCredentials',
    );
    expect(refused.message).toContain('token-file');

    await host.patch('secrets', ns, 'staging-creds', {
      data: { kubeconfig: b64(readFileSync(cluster.kubeconfigPath, 'utf8')) },
    });
    await waitSyncing('staging', (c) => c.status === 'True', 'Syncing=True with the kubeconfig');
    // Only Services are enabled for this one; they land under its own name.
    await waitHost(
      'services',
      hostNameLong('db', 'apps', 'staging'),
      (s) => s !== null,
      'host Service db of staging',
    );
    expect(await host.get('endpoints', ns, hostNameLong('db', 'apps', 'staging'))).toBeNull();
  });
});
