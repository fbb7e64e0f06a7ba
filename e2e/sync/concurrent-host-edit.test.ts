// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { KubeApi, RequestOptions } from '../../src/runtime/kube-api.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { loadSyncConfig } from '../../src/sync/config.ts';
import { type Syncer, startSyncer } from '../../src/sync/controllers/syncer.ts';
import { hostNameLong, PREFIX } from '../../src/sync/names.ts';
import {
  hostKubeConfig,
  kubeConfigFor,
  uniqueName,
  useExtraClusters,
  useNamespace,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { Api } from './support.ts';

/**
 * A host edit that lands while the syncer is between its two writes of one sync (the virtual
 * object first, then the host copy): found by e2e/sync/prototype-keys.test.ts, which lost a host
 * label removal about one run in four. Here the edit is made to land there every time: the
 * syncer's host client (a real client of the host apiserver) makes the test's host edit just
 * before it sends the syncer's host patch, which then meets a newer resourceVersion (409) and is
 * retried. The retry must take the syncer's own virtual write as synced, not as a change of the
 * tenant's that wins over the host: the removal made on the host must reach the virtual object,
 * and the label must not come back on the host.
 */
describe('platform syncer: a host edit between the two writes of one sync', () => {
  const hostNamespace = useNamespace('sync-race');
  const startCluster = useExtraClusters();
  const vcName = uniqueName('vc');
  const host = new Api(hostKubeConfig());
  let cluster: Cluster;
  let virtual: Api;
  let syncer: Syncer | undefined;
  let manager: Manager | undefined;
  const clients: KubeClient[] = [];
  /** Run once, before the next host PATCH of the syncer to the object at `path`. */
  let beforeHostPatch: { path: string; run: () => Promise<void>; ran: boolean } | undefined;

  const hostPath = () =>
    `/api/v1/namespaces/${hostNamespace()}/configmaps/${hostNameLong('race', 'apps', vcName)}`;
  const userLabels = (labels: Record<string, string> | undefined) =>
    JSON.stringify(
      Object.entries(labels ?? {})
        .filter(([key]) => !key.startsWith(`${PREFIX}/`))
        .sort(),
    );

  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('vc') });
    virtual = new Api(kubeConfigFor(cluster));
    await virtual.createNamespace('apps');
    const hostClient = new KubeClient(hostKubeConfig());
    const virtualClient = new KubeClient(kubeConfigFor(cluster));
    clients.push(hostClient, virtualClient);
    const interceptedHost: KubeApi = {
      async request<T>(options: RequestOptions): Promise<T> {
        const armed = beforeHostPatch;
        if (armed && !armed.ran && options.method === 'PATCH' && options.path === armed.path) {
          armed.ran = true;
          await armed.run();
        }
        return hostClient.request<T>(options);
      },
      watch: (...args) => hostClient.watch(...args),
    };
    const logger = pino({ level: 'silent' });
    manager = new Manager({ api: hostClient, logger });
    syncer = startSyncer({
      manager,
      virtual: virtualClient,
      host: interceptedHost,
      hostNamespace: hostNamespace(),
      name: vcName,
      config: loadSyncConfig({ sync: { toHost: { configMaps: { enabled: true } } } }),
      logger,
    });
    await manager.start();
  });
  afterAll(async () => {
    await syncer?.stop();
    await manager?.stop();
    for (const client of clients) client.close();
    virtual?.close();
    host.close();
  });

  test('a label the host removed while the syncer was bringing it back stays removed on both sides', async () => {
    await virtual.create('configmaps', 'apps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'race', labels: { app: 'a' } },
      data: { a: '1' },
    });
    await eventually(
      async () =>
        (await host.get('configmaps', hostNamespace(), hostNameLong('race', 'apps', vcName))) !== null,
      30_000,
      'the host copy',
    );

    // The host adds a label; while the syncer brings it back (virtual written, host not yet),
    // the host removes it again.
    beforeHostPatch = {
      path: hostPath(),
      ran: false,
      run: () =>
        host.patch('configmaps', hostNamespace(), hostNameLong('race', 'apps', vcName), {
          metadata: { labels: { edit: null } },
        }) as Promise<unknown> as Promise<void>,
    };
    await host.patch('configmaps', hostNamespace(), hostNameLong('race', 'apps', vcName), {
      metadata: { labels: { edit: 'one' } },
    });
    await eventually(
      () => beforeHostPatch?.ran === true,
      30_000,
      'the syncer to write the host after the virtual side',
    );

    let last: any;
    await eventually(
      async () => {
        last = {
          virtual: (await virtual.get('configmaps', 'apps', 'race')).metadata.labels,
          host: (await host.get('configmaps', hostNamespace(), hostNameLong('race', 'apps', vcName))).metadata
            .labels,
        };
        return (
          userLabels(last.virtual) === userLabels({ app: 'a' }) &&
          userLabels(last.host) === userLabels({ app: 'a' })
        );
      },
      30_000,
      'the removal on both sides',
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last seen: ${JSON.stringify(last)}`);
    });
    expect(userLabels(last.virtual)).toBe(userLabels({ app: 'a' }));
  });
});
