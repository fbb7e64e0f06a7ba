// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { waitForValue } from '../support/wait.ts';
import { useSpawnedSyncer } from './support.ts';

/**
 * The spec's rules for a patch's `path` and `expression`, as a running `platform syncer` applies
 * them between the run's host cluster and a second apiserver as the virtual cluster: a path that
 * matches nothing is not applied, `*` applies the expression once per element, a quoted literal
 * replaces the value, and an expression sees `atob`, `btoa`, `virtualToHostDNS` and `context`.
 * ConfigMap data does not come back from the host, so those patches need no reverse; a Service's
 * port names do, hence theirs.
 */
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const CONTEXT_EXPRESSION = [
  'context.vcluster.name',
  'context.vcluster.namespace',
  'context.vcluster.config.networking.advanced.clusterDomain',
  'context.virtualObject.metadata.name',
  'context.hostObject.metadata.name',
  'context.path',
].join(' + " " + ');

describe('patch paths and expressions in a running syncer', () => {
  const { hostNamespace, vcName, host, virtual, hostName } = useSpawnedSyncer('sync-expr', {
    sync: {
      toHost: {
        configMaps: {
          enabled: true,
          patches: [
            { path: 'data.double', expression: '"fixed"' },
            { path: 'data.single', expression: "'single'" },
            { path: 'data.absent', expression: '"created"' },
            { path: 'data.encoded', expression: 'btoa(atob(value) + "!")' },
            { path: 'data.address', expression: 'virtualToHostDNS(value)' },
            { path: 'data.context', expression: CONTEXT_EXPRESSION },
          ],
        },
        services: {
          patches: [
            {
              path: 'spec.ports[*].name',
              expression: 'value + "-" + context.path.split(".")[2]',
              reverseExpression: 'value.replace(/-[0-9]+$/, "")',
            },
            { path: 'spec.ports[*].appProtocol', expression: '"created"' },
          ],
        },
      },
    },
  });

  test('quoted literals replace the value; atob, btoa, virtualToHostDNS and context are there; a missing path is not created', async () => {
    await virtual().create('configmaps', 'apps', {
      metadata: { name: 'settings' },
      data: {
        double: 'virtual',
        single: 'virtual',
        encoded: b64('héllo'),
        address: 'db.apps.svc',
        context: 'virtual',
      },
    });
    const settings = await waitForValue(
      'host ConfigMap settings',
      () => host.get('configmaps', hostNamespace(), hostName('settings')),
      (c) => c !== null,
    );
    expect(settings.data).toEqual({
      double: 'fixed',
      single: 'single',
      encoded: b64('héllo!'),
      address: `${hostName('db')}.${hostNamespace()}.svc.cluster.local`,
      context: [
        vcName,
        hostNamespace(),
        'cluster.local',
        'settings',
        hostName('settings'),
        'data.context',
      ].join(' '),
    });
  });

  test('`*` runs the expression once per element, with that element in context.path', async () => {
    await virtual().create('services', 'apps', {
      metadata: { name: 'web' },
      spec: {
        ports: [
          { name: 'http', port: 80 },
          { name: 'metrics', port: 9090 },
          { name: 'admin', port: 9091 },
        ],
      },
    });
    const web = await waitForValue(
      'host Service web',
      () => host.get('services', hostNamespace(), hostName('web')),
      (s) => s !== null,
    );
    expect(web.spec.ports.map((port: any) => port.name)).toEqual(['http-0', 'metrics-1', 'admin-2']);
    // No port had an appProtocol: the patch for it created none.
    expect(web.spec.ports.map((port: any) => port.appProtocol)).toEqual([undefined, undefined, undefined]);
  });
});
