// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { hostNameLong, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { waitForValue } from '../support/wait.ts';
import { serviceAndEndpoints, useSpawnedSyncer } from './support.ts';

/**
 * `platform syncer` as a child process between the run's host cluster and a second apiserver
 * acting as the virtual cluster. Virtual objects live in the virtual namespace `apps`; their host
 * copies in this file's host namespace. Tests run in order and build on each other's objects.
 */
describe('platform syncer: Services and Endpoints between a virtual cluster and its host namespace', () => {
  const { hostNamespace, vcName, host, virtual, syncer, hostName, restart } = useSpawnedSyncer('sync');
  const createPair = async (name: string, options: Parameters<typeof serviceAndEndpoints>[1] = {}) => {
    const { service, endpoints } = serviceAndEndpoints(name, options);
    await virtual().create('services', 'apps', service);
    await virtual().create('endpoints', 'apps', endpoints);
  };

  test('Services and Endpoints appear on the host, translated and patched', async () => {
    await virtual().create('services', 'apps', {
      metadata: { name: 'web', labels: { release: 'r1' }, annotations: { 'platform.test/tier': 'gold' } },
      spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }], type: 'LoadBalancer' },
    });
    await createPair('db', { annotations: { 'platform.test/tier': 'gold' } });

    const web = await waitForValue(
      'host Service web',
      () => host.get('services', hostNamespace(), hostName('web')),
      (s) => s !== null,
    );
    const virtualWeb = await virtual().get('services', 'apps', 'web');
    expect(web.spec.selector).toEqual({
      app: 'web',
      'vcluster.platform/managed-by': vcName,
      'vcluster.platform/namespace': 'apps',
    });
    expect(web.metadata.labels).toMatchObject({
      [LABEL_MANAGED_BY]: vcName,
      'vcluster.platform/namespace': 'apps',
    });
    expect(web.metadata.labels.release).toBeUndefined(); // translated to a hashed key
    expect(web.metadata.annotations).toMatchObject({
      'platform.test/tier': 'host-gold',
      'vcluster.platform/object-name': 'web',
      'vcluster.platform/object-namespace': 'apps',
      'vcluster.platform/object-uid': virtualWeb.metadata.uid,
      'vcluster.platform/object-kind': '/v1, Kind=Service',
    });
    // The ClusterIP and node ports are the host's own allocations, not copies.
    expect(web.spec.clusterIP).toBeTruthy();
    expect(web.spec.ports[0].nodePort).toBeTruthy();
    expect(web.spec.ports[0].targetPort).toBe(8080);

    const db = await waitForValue(
      'host Endpoints db',
      () => host.get('endpoints', hostNamespace(), hostName('db')),
      (e) => e !== null,
    );
    expect(db.metadata.annotations['platform.test/tier']).toBe('host-gold');
    expect(db.subsets).toEqual([
      {
        addresses: [
          {
            ip: '10.1.0.5',
            targetRef: {
              kind: 'Pod',
              name: hostNameLong('db-0', 'apps', vcName),
              namespace: hostNamespace(),
            },
          },
        ],
        ports: [{ name: 'p', port: 5432, protocol: 'TCP' }],
      },
    ]);
    // A selector Service's Endpoints are the host's business; default/kubernetes is never synced.
    expect(await host.get('endpoints', hostNamespace(), hostName('web'))).toBeNull();
    expect(
      await host.get('services', hostNamespace(), hostNameLong('kubernetes', 'default', vcName)),
    ).toBeNull();
  });

  test('host edits: annotations come back through reverseExpression, subsets are reverted', async () => {
    await host.patch('endpoints', hostNamespace(), hostName('db'), {
      metadata: { annotations: { 'platform.test/tier': 'host-silver', 'host.test/added': 'yes' } },
      subsets: [{ addresses: [{ ip: '10.9.9.9' }], ports: [{ port: 1 }] }],
    });
    const back = await waitForValue(
      'the host annotation in the virtual cluster',
      () => virtual().get('endpoints', 'apps', 'db'),
      (e) => e.metadata.annotations?.['platform.test/tier'] === 'silver',
    );
    expect(back.metadata.annotations['host.test/added']).toBe('yes');
    expect(back.subsets[0].addresses[0].ip).toBe('10.1.0.5');
    const reverted = await waitForValue(
      'the host subsets reverted',
      () => host.get('endpoints', hostNamespace(), hostName('db')),
      (e) => e.subsets?.[0]?.addresses?.[0]?.ip === '10.1.0.5',
    );
    expect(reverted.metadata.annotations['platform.test/tier']).toBe('host-silver');

    // A Service's status is the host's (a load balancer controller writes it there).
    await host.client.request({
      method: 'PATCH',
      path: `/api/v1/namespaces/${hostNamespace()}/services/${hostName('web')}/status`,
      body: { status: { loadBalancer: { ingress: [{ ip: '203.0.113.10' }] } } },
      contentType: 'application/merge-patch+json',
    });
    await waitForValue(
      'the host Service status in the virtual cluster',
      () => virtual().get('services', 'apps', 'web'),
      (svc) => svc.status?.loadBalancer?.ingress?.[0]?.ip === '203.0.113.10',
    );

    // And a virtual change goes out again through expression.
    await virtual().patch('endpoints', 'apps', 'db', {
      metadata: { annotations: { 'platform.test/tier': 'bronze' }, labels: { role: 'primary' } },
    });
    await waitForValue(
      'the virtual change on the host',
      () => host.get('endpoints', hostNamespace(), hostName('db')),
      (e) =>
        e.metadata.annotations['platform.test/tier'] === 'host-bronze' &&
        e.metadata.labels.role === 'primary',
    );
  });

  test('a Service port renamed on the host comes back through its reverse patch', async () => {
    const before = await waitForValue(
      'host Service db with its patched port name',
      () => host.get('services', hostNamespace(), hostName('db')),
      (s) => s?.spec.ports?.[0]?.name === 't-p',
    );
    await host.patch('services', hostNamespace(), hostName('db'), {
      spec: { ports: [{ ...before.spec.ports[0], name: 't-q' }] },
    });
    await waitForValue(
      'the port name back in the virtual cluster, without the host prefix',
      () => virtual().get('services', 'apps', 'db'),
      (s) => s.spec.ports[0].name === 'q',
    );
    // The way out again gives the host what it has: it keeps its form, nothing flaps.
    const after = await host.get('services', hostNamespace(), hostName('db'));
    expect(after.spec.ports[0].name).toBe('t-q');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await host.get('services', hostNamespace(), hostName('db'))).metadata.resourceVersion).toBe(
      after.metadata.resourceVersion,
    );
  });

  test('Endpoints created before their Service sync once the Service exists', async () => {
    const { service, endpoints } = serviceAndEndpoints('late');
    await virtual().create('endpoints', 'apps', endpoints);
    await new Promise((r) => setTimeout(r, 2000));
    expect(await host.get('endpoints', hostNamespace(), hostName('late'))).toBeNull();
    await virtual().create('services', 'apps', service);
    await waitForValue(
      'host Endpoints late',
      () => host.get('endpoints', hostNamespace(), hostName('late')),
      (e) => e !== null,
    );
  });

  test('a Service that gains a selector has its host Endpoints removed', async () => {
    await virtual().patch('services', 'apps', 'late', { spec: { selector: { app: 'late' } } });
    await waitForValue(
      'host Endpoints late gone',
      () => host.get('endpoints', hostNamespace(), hostName('late')),
      (e) => e === null,
    );
    const service = await host.get('services', hostNamespace(), hostName('late'));
    expect(service.spec.selector).toMatchObject({ app: 'late', 'vcluster.platform/managed-by': vcName });
    // The virtual Endpoints stay: they are the user's.
    expect(await virtual().get('endpoints', 'apps', 'late')).not.toBeNull();
  });

  test('deletes propagate both ways', async () => {
    await createPair('gone');
    await waitForValue(
      'host Endpoints gone',
      () => host.get('endpoints', hostNamespace(), hostName('gone')),
      (e) => e !== null,
    );
    // Virtual deleted -> host deleted.
    await virtual().delete('endpoints', 'apps', 'gone');
    await waitForValue(
      'host Endpoints deleted',
      () => host.get('endpoints', hostNamespace(), hostName('gone')),
      (e) => e === null,
    );
    // Host deleted -> virtual deleted.
    await waitForValue(
      'host Service gone',
      () => host.get('services', hostNamespace(), hostName('gone')),
      (s) => s !== null,
    );
    await host.delete('services', hostNamespace(), hostName('gone'));
    await waitForValue(
      'virtual Service deleted',
      () => virtual().get('services', 'apps', 'gone'),
      (s) => s === null,
    );
  });

  test('host objects that are not ours are never imported or touched', async () => {
    // Host-only Endpoints, even with our marker label, are not imported.
    await host.create('endpoints', hostNamespace(), {
      metadata: { name: 'stray', labels: { [LABEL_MANAGED_BY]: vcName } },
      subsets: [{ addresses: [{ ip: '10.2.0.1' }], ports: [{ port: 80 }] }],
    });
    // A foreign object holding a translated name blocks that object only, and stays as it is.
    const foreign = (await host.create('services', hostNamespace(), {
      metadata: { name: hostName('taken'), annotations: { owner: 'someone-else' } },
      spec: { ports: [{ port: 81 }] },
    })) as any;
    await virtual().create('services', 'apps', {
      metadata: { name: 'taken' },
      spec: { ports: [{ port: 80 }] },
    });
    const events = await waitForValue(
      'a SyncError event on the virtual Service taken',
      () => virtual().eventsAbout('apps', 'Service', 'taken'),
      (list) => list.some((e) => e.reason === 'SyncError'),
    );
    expect(events.find((e) => e.reason === 'SyncError').note).toMatch(/not managed by virtual cluster/);
    const after = await host.get('services', hostNamespace(), hostName('taken'));
    expect(after.metadata.uid).toBe(foreign.metadata.uid);
    expect(after.metadata.resourceVersion).toBe(foreign.metadata.resourceVersion);
    expect(await virtual().get('endpoints', 'apps', 'stray')).toBeNull();
    expect(await host.get('endpoints', hostNamespace(), 'stray')).not.toBeNull();
  });

  test('a hostile patch fails only its own object; the syncer keeps going', async () => {
    await createPair('evil', { annotations: { 'platform.test/hostile': 'yes' } });
    const events = await waitForValue(
      'a SyncError event on the virtual Endpoints evil',
      () => virtual().eventsAbout('apps', 'Endpoints', 'evil'),
      (list) => list.some((e) => e.reason === 'SyncError'),
    );
    const event = events.find((e) => e.reason === 'SyncError');
    expect(event.type).toBe('Warning');
    expect(event.action).toBe('SyncEndpoints');
    expect(event.note).toContain('sync.toHost.endpoints.patches[1].expression');
    expect(event.note).toContain('ExpressionTimeout');
    // Its Service (no hostile patch there) synced; its Endpoints did not.
    expect(await host.get('services', hostNamespace(), hostName('evil'))).not.toBeNull();
    expect(await host.get('endpoints', hostNamespace(), hostName('evil'))).toBeNull();

    await createPair('good', { annotations: { 'platform.test/tier': 'gold' } });
    await waitForValue(
      'host Endpoints good',
      () => host.get('endpoints', hostNamespace(), hostName('good')),
      (e) => e?.metadata.annotations['platform.test/tier'] === 'host-gold',
    );
    expect(syncer().child.exitCode).toBeNull();
    const metrics = await syncer().metrics();
    expect(metrics).toMatch(
      /platform_syncer_errors_total\{[^}]*kind="Endpoints"[^}]*reason="ExpressionTimeout"[^}]*\} [1-9]/,
    );
    expect(metrics).toMatch(
      /platform_syncer_objects_synced_total\{[^}]*kind="Endpoints",direction="toHost"\} [1-9]/,
    );
    // docs/metrics.md: platform syncer's controllers are syncer-<kind>; vcluster is <host namespace>/<name>.
    for (const kind of ['service', 'endpoints'])
      expect(metrics).toContain(`controller_runtime_max_concurrent_reconciles{controller="syncer-${kind}"}`);
    expect(metrics).toContain(`platform_syncer_ready{vcluster="${hostNamespace()}/${vcName}"} 1`);
  });

  test('ConfigMaps sync when enabled; Secrets only while a synced object references them', async () => {
    await virtual().create('configmaps', 'apps', { metadata: { name: 'settings' }, data: { mode: 'fast' } });
    await virtual().create('secrets', 'apps', { metadata: { name: 'web-tls' }, stringData: { key: 'k' } });
    await virtual().create('secrets', 'apps', { metadata: { name: 'unused' }, stringData: { key: 'u' } });
    await waitForValue(
      'host ConfigMap settings',
      () => host.get('configmaps', hostNamespace(), hostName('settings')),
      (c) => c?.data?.mode === 'fast',
    );
    await virtual().patch('configmaps', 'apps', 'settings', { data: { mode: 'safe' } });
    await waitForValue(
      'the ConfigMap change on the host',
      () => host.get('configmaps', hostNamespace(), hostName('settings')),
      (c) => c?.data?.mode === 'safe',
    );

    // A Service names the Secret through a reference patch: the Secret is copied, the name rewritten.
    await virtual().patch('services', 'apps', 'web', {
      metadata: { annotations: { 'platform.test/tls-secret': 'web-tls' } },
    });
    const secret = await waitForValue(
      'host Secret web-tls',
      () => host.get('secrets', hostNamespace(), hostName('web-tls')),
      (s) => s !== null,
    );
    expect(Buffer.from(secret.data.key, 'base64').toString()).toBe('k');
    await waitForValue(
      'the reference rewritten on the host Service',
      () => host.get('services', hostNamespace(), hostName('web')),
      (s) => s.metadata.annotations['platform.test/tls-secret'] === hostName('web-tls'),
    );
    expect(await host.get('secrets', hostNamespace(), hostName('unused'))).toBeNull();

    // Once nothing references it, the host copy goes (the virtual Secret stays).
    await virtual().patch('services', 'apps', 'web', {
      metadata: { annotations: { 'platform.test/tls-secret': null } },
    });
    await waitForValue(
      'host Secret web-tls removed',
      () => host.get('secrets', hostNamespace(), hostName('web-tls')),
      (s) => s === null,
    );
    expect(await virtual().get('secrets', 'apps', 'web-tls')).not.toBeNull();
    await virtual().delete('configmaps', 'apps', 'settings');
    await waitForValue(
      'host ConfigMap settings removed',
      () => host.get('configmaps', hostNamespace(), hostName('settings')),
      (c) => c === null,
    );
  });

  test('reference.labels: the Secrets a Service selects are synced while it selects them', async () => {
    // web selects app=web; its patch reference.labels makes the Secrets it selects references.
    await virtual().create('secrets', 'apps', {
      metadata: { name: 'web-settings', labels: { app: 'web' } },
      stringData: { mode: 'fast' },
    });
    await virtual().create('secrets', 'apps', {
      metadata: { name: 'db-settings', labels: { app: 'db' } },
      stringData: { mode: 'slow' },
    });
    await waitForValue(
      'host Secret web-settings',
      () => host.get('secrets', hostNamespace(), hostName('web-settings')),
      (s) => s !== null,
    );
    const web = await host.get('services', hostNamespace(), hostName('web'));
    expect(web.spec.selector).toEqual({
      app: 'web',
      'vcluster.platform/managed-by': vcName,
      'vcluster.platform/namespace': 'apps',
    });
    expect(await host.get('secrets', hostNamespace(), hostName('db-settings'))).toBeNull();
    // Relabelled, the other Secret is selected too; unlabelled, the first is no longer.
    await virtual().patch('secrets', 'apps', 'db-settings', { metadata: { labels: { app: 'web' } } });
    await waitForValue(
      'host Secret db-settings once selected',
      () => host.get('secrets', hostNamespace(), hostName('db-settings')),
      (s) => s !== null,
    );
    await virtual().patch('secrets', 'apps', 'web-settings', { metadata: { labels: { app: null } } });
    await waitForValue(
      'host Secret web-settings removed once no longer selected',
      () => host.get('secrets', hostNamespace(), hostName('web-settings')),
      (s) => s === null,
    );
    expect(await virtual().get('secrets', 'apps', 'web-settings')).not.toBeNull();
    await virtual().delete('secrets', 'apps', 'db-settings');
    await waitForValue(
      'host Secret db-settings removed with the virtual one',
      () => host.get('secrets', hostNamespace(), hostName('db-settings')),
      (s) => s === null,
    );
  });

  test('a restart converges to exactly the virtual state, without duplicates or recreations', async () => {
    const before = await host.get('services', hostNamespace(), hostName('db'));
    const goodBefore = await host.get('services', hostNamespace(), hostName('good'));
    await syncer().kill();
    // While it is down: a new pair, a removed Service, a recreated pair, a host edit.
    await createPair('after');
    await virtual().delete('services', 'apps', 'late');
    // Deleted and created again: new uids, so the host copies must be recreated. (Deleting a
    // Service makes the apiserver delete its Endpoints too, so both are created again.)
    await virtual().delete('services', 'apps', 'good');
    const again = serviceAndEndpoints('good', { ip: '10.1.0.99' });
    const goodAgain = (await virtual().create('services', 'apps', again.service)) as any;
    await virtual().create('endpoints', 'apps', again.endpoints);
    await host.patch('endpoints', hostNamespace(), hostName('db'), {
      subsets: [{ addresses: [{ ip: '10.6.6.6' }], ports: [{ port: 1 }] }],
    });
    await restart();

    // The expected host state, derived from the virtual cluster as it is now.
    const expected = async () => {
      const services = (await virtual().list('services', 'apps')).map((s) => s.metadata.name as string);
      const endpoints = (await virtual().list('endpoints', 'apps')).map((e) => e.metadata.name as string);
      const selectorLess = new Set(
        (await virtual().list('services', 'apps'))
          .filter((s) => !s.spec.selector)
          .map((s) => s.metadata.name),
      );
      return {
        services: services
          .filter((n) => n !== 'taken')
          .map(hostName)
          .sort(),
        endpoints: endpoints
          .filter((n) => selectorLess.has(n) && n !== 'evil')
          .map(hostName)
          .sort(),
      };
    };
    const want = await expected();
    expect(want.services).toContain(hostName('after'));
    expect(want.services).not.toContain(hostName('late'));
    await waitForValue(
      'the host namespace to hold exactly the expected objects',
      async () => ({
        services: await host.managedNames('services', hostNamespace(), vcName),
        endpoints: (await host.managedNames('endpoints', hostNamespace(), vcName)).filter(
          (n) => n !== 'stray',
        ),
        good: (await host.get('endpoints', hostNamespace(), hostName('good')))?.subsets?.[0]?.addresses?.[0]
          ?.ip,
        db: (await host.get('endpoints', hostNamespace(), hostName('db')))?.subsets?.[0]?.addresses?.[0]?.ip,
      }),
      (state) =>
        JSON.stringify(state.services) === JSON.stringify(want.services) &&
        JSON.stringify(state.endpoints) === JSON.stringify(want.endpoints) &&
        state.good === '10.1.0.99' &&
        state.db === '10.1.0.5',
      60_000,
    );
    const goodAfter = await waitForValue(
      'host Service good recreated for the new virtual uid',
      () => host.get('services', hostNamespace(), hostName('good')),
      (svc) => svc?.metadata.annotations['vcluster.platform/object-uid'] === goodAgain.metadata.uid,
    );
    expect(goodAfter.metadata.uid).not.toBe(goodBefore.metadata.uid);
    // Objects that existed were updated in place, not recreated.
    const afterRestart = await host.get('services', hostNamespace(), hostName('db'));
    expect(afterRestart.metadata.uid).toBe(before.metadata.uid);
    // Patched values survive the restart (no record: compared with the host as it is).
    expect(
      (await host.get('endpoints', hostNamespace(), hostName('db'))).metadata.annotations[
        'platform.test/tier'
      ],
    ).toBe('host-bronze');
  });
});
