// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { waitForValue } from '../support/wait.ts';
import { useSpawnedSyncer } from './support.ts';

/**
 * A `reference` patch naming a Service, on another synced kind (a ConfigMap's annotation), with
 * `platform syncer` between the run's host cluster and a second apiserver as the virtual cluster:
 * the name goes to the host as the Service's host name, the Service is synced while it is named
 * (Services are not synced otherwise here), and a host edit of the annotation comes back as the
 * virtual name. Tests run in order and build on each other's objects.
 */
describe('reference patches to a Service, to the host and back', () => {
  const BACKEND = 'platform.test/backend';
  const { hostNamespace, host, virtual, hostName } = useSpawnedSyncer('sync-ref', {
    sync: {
      toHost: {
        // Services are synced only while a reference names them.
        services: { enabled: false },
        configMaps: {
          enabled: true,
          patches: [
            {
              path: `metadata.annotations["${BACKEND}"]`,
              reference: { apiVersion: 'v1', kind: 'Service' },
            },
          ],
        },
      },
    },
  });
  const service = (name: string) => ({
    metadata: { name },
    spec: { ports: [{ name: 'http', port: 80 }] },
  });

  test('the named Service is synced and the name on the host is its host name', async () => {
    await virtual().create('services', 'apps', service('api'));
    await virtual().create('services', 'apps', service('web'));
    await virtual().create('configmaps', 'apps', {
      metadata: { name: 'routing', annotations: { [BACKEND]: 'api' } },
      data: { mode: 'fast' },
    });
    await waitForValue(
      'the reference translated on the host ConfigMap',
      () => host.get('configmaps', hostNamespace(), hostName('routing')),
      (c) => c?.metadata.annotations[BACKEND] === hostName('api'),
    );
    const api = await waitForValue(
      'host Service api (referenced)',
      () => host.get('services', hostNamespace(), hostName('api')),
      (s) => s !== null,
    );
    expect(api.metadata.annotations['vcluster.platform/object-name']).toBe('api');
    // web is named by nothing: Services are not synced otherwise.
    expect(await host.get('services', hostNamespace(), hostName('web'))).toBeNull();
  });

  test('a host edit of the reference comes back as the virtual name; the Services follow it', async () => {
    await host.patch('configmaps', hostNamespace(), hostName('routing'), {
      metadata: { annotations: { [BACKEND]: hostName('web') } },
    });
    await waitForValue(
      'the virtual ConfigMap naming web',
      () => virtual().get('configmaps', 'apps', 'routing'),
      (c) => c?.metadata.annotations[BACKEND] === 'web',
    );
    await waitForValue(
      'host Service web (now referenced)',
      () => host.get('services', hostNamespace(), hostName('web')),
      (s) => s !== null,
    );
    await waitForValue(
      'host Service api removed (no longer referenced)',
      () => host.get('services', hostNamespace(), hostName('api')),
      (s) => s === null,
    );
    // Translated once: the host keeps the host name, not a translation of it.
    const routing = await host.get('configmaps', hostNamespace(), hostName('routing'));
    expect(routing.metadata.annotations[BACKEND]).toBe(hostName('web'));
    expect(await virtual().get('services', 'apps', 'api')).not.toBeNull();
  });

  test('a host name that names no virtual object does not come back, and that object is not touched', async () => {
    // A host Service of nobody's virtual cluster, in the namespace the syncer writes to.
    await host.create('services', hostNamespace(), service('payments-db'));
    const before = await host.get('services', hostNamespace(), 'payments-db');
    // One host write: an annotation that comes back as it is, and the reference to payments-db.
    await host.patch('configmaps', hostNamespace(), hostName('routing'), {
      metadata: { annotations: { [BACKEND]: 'payments-db', 'platform.test/note': 'seen' } },
    });
    const routing = await waitForValue(
      'the host edit brought back',
      () => virtual().get('configmaps', 'apps', 'routing'),
      (c) => c?.metadata.annotations['platform.test/note'] === 'seen',
    );
    expect(routing.metadata.annotations[BACKEND]).toBe('web');
    expect(await virtual().get('services', 'apps', 'payments-db')).toBeNull();
    const after = await host.get('services', hostNamespace(), 'payments-db');
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    // web is still what the virtual ConfigMap names: its host copy stays.
    expect(await host.get('services', hostNamespace(), hostName('web'))).not.toBeNull();
  });

  test('a host name too long to read back (hashed) is found among the virtual Services', async () => {
    // Its host name is longer than 63 characters, so it ends in a hash: only the syncer's index of
    // the virtual objects by host name can tell which Service it is.
    const long = 'a-service-whose-host-name-is-too-long-to-invert';
    expect(hostName(long).length).toBe(63);
    expect(hostName(long).startsWith(`${long}-x-apps-x-`)).toBe(false);
    await virtual().create('services', 'apps', service(long));
    await host.patch('configmaps', hostNamespace(), hostName('routing'), {
      metadata: { annotations: { [BACKEND]: hostName(long) } },
    });
    await waitForValue(
      'the virtual ConfigMap naming the long-named Service',
      () => virtual().get('configmaps', 'apps', 'routing'),
      (c) => c?.metadata.annotations[BACKEND] === long,
    );
    await waitForValue(
      'its host copy (now referenced)',
      () => host.get('services', hostNamespace(), hostName(long)),
      (s) => s !== null,
    );
  });
});
