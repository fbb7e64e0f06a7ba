// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { PREFIX } from '../../src/sync/names.ts';
import { waitForValue } from '../support/wait.ts';
import { useSpawnedSyncer } from './support.ts';

/**
 * Keys named like Object.prototype members (issue 29) through `platform syncer`, between the run's
 * host cluster and a second apiserver as the virtual cluster: a ConfigMap's and a Secret's data
 * keys `constructor`, `__proto__` and `toString` added, changed and removed on the virtual side
 * (the host copy follows exactly), and labels and annotations named so that flow back from the
 * host. `__proto__` is a valid data key, not a valid label or annotation key.
 */
describe('platform syncer: keys named like Object.prototype members', () => {
  const { hostNamespace, host, virtual, hostName } = useSpawnedSyncer('sync-proto', {
    sync: { toHost: { configMaps: { enabled: true }, secrets: { enabled: true } } },
  });
  /** JSON as a client sends it: `__proto__` an own key (an object literal would set the prototype). */
  const json = (text: string): Record<string, string | null> => JSON.parse(text);
  /** A map's text with its keys sorted (missing: `{}`), so maps compare as documents. */
  const text = (map: Record<string, unknown> | undefined) =>
    JSON.stringify(Object.entries(map ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)));
  const withoutBookkeeping = (map: Record<string, unknown> | undefined) =>
    Object.fromEntries(Object.entries(map ?? {}).filter(([key]) => !key.startsWith(`${PREFIX}/`)));
  const b64 = (value: string) => Buffer.from(value).toString('base64');

  /** Waits until the host copy's data is exactly `expected` (and checks the virtual side has it too). */
  const hostDataBecomes = async (plural: string, name: string, expected: Record<string, string>) => {
    expect(text((await virtual().get(plural, 'apps', name)).data)).toBe(text(expected));
    await waitForValue(
      `host ${plural} ${name} with data ${text(expected)}`,
      () => host.get(plural, hostNamespace(), hostName(name)),
      (obj) => obj !== null && text(obj.data) === text(expected),
    );
  };

  test.each([
    ['configmaps', 'ConfigMap', (v: string) => v],
    ['secrets', 'Secret', b64],
  ])(
    '%s: data keys constructor, __proto__ and toString added, changed and removed; the host follows exactly',
    async (plural, kind, encode) => {
      const name = `proto-${plural}`;
      await virtual().create(plural, 'apps', {
        apiVersion: 'v1',
        kind,
        metadata: { name },
        data: { plain: encode('1') },
      });
      await hostDataBecomes(plural, name, { plain: encode('1') });

      const added = json(
        `{"plain": "${encode('1')}", "constructor": "${encode('c')}", "__proto__": "${encode('p')}", "toString": "${encode('t')}"}`,
      );
      await virtual().patch(plural, 'apps', name, { data: added });
      await hostDataBecomes(plural, name, added as Record<string, string>);

      const changed = json(
        `{"plain": "${encode('1')}", "constructor": "${encode('c2')}", "__proto__": "${encode('p2')}", "toString": "${encode('t2')}"}`,
      );
      await virtual().patch(plural, 'apps', name, { data: changed });
      await hostDataBecomes(plural, name, changed as Record<string, string>);

      // Removed one at a time, then the case: replaced by data holding none of them.
      await virtual().patch(plural, 'apps', name, { data: json('{"constructor": null}') });
      const { constructor: _c, ...withoutConstructor } = changed;
      await hostDataBecomes(plural, name, withoutConstructor as Record<string, string>);
      await virtual().patch(plural, 'apps', name, { data: json('{"__proto__": null}') });
      await hostDataBecomes(
        plural,
        name,
        json(`{"plain": "${encode('1')}", "toString": "${encode('t2')}"}`) as any,
      );
      const current = await virtual().get(plural, 'apps', name);
      await virtual().client.request({
        method: 'PUT',
        path: `/api/v1/namespaces/apps/${plural}/${name}`,
        body: { ...current, data: { a: encode('1') } },
      });
      await hostDataBecomes(plural, name, { a: encode('1') });
    },
  );

  test('labels and annotations constructor, toString and valueOf go to the host and come back from it exactly', async () => {
    const name = 'proto-labels';
    await virtual().create('configmaps', 'apps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels: { constructor: 'v1', app: 'a' }, annotations: { toString: 'v1' } },
      data: { a: '1' },
    });
    const hostMapsAre = (labels: Record<string, string>, annotations: Record<string, string>) =>
      waitForValue(
        `host labels ${text(labels)} and annotations ${text(annotations)}`,
        () => host.get('configmaps', hostNamespace(), hostName(name)),
        (obj) =>
          obj !== null &&
          text(withoutBookkeeping(obj.metadata.labels)) === text(labels) &&
          text(withoutBookkeeping(obj.metadata.annotations)) === text(annotations),
      );
    const virtualMapsAre = (labels: Record<string, string>, annotations: Record<string, string>) =>
      waitForValue(
        `virtual labels ${text(labels)} and annotations ${text(annotations)}`,
        () => virtual().get('configmaps', 'apps', name),
        (obj) =>
          text(obj.metadata.labels) === text(labels) && text(obj.metadata.annotations) === text(annotations),
      );
    await hostMapsAre({ constructor: 'v1', app: 'a' }, { toString: 'v1' });

    // Added and changed on the host: they come back.
    await host.patch('configmaps', hostNamespace(), hostName(name), {
      metadata: {
        labels: { constructor: 'h2', toString: 'h1' },
        annotations: { toString: 'h2', valueOf: 'h1', constructor: 'h1' },
      },
    });
    await virtualMapsAre(
      { constructor: 'h2', toString: 'h1', app: 'a' },
      { toString: 'h2', valueOf: 'h1', constructor: 'h1' },
    );

    // Removed on the host: removed on the virtual side, not left behind.
    await host.patch('configmaps', hostNamespace(), hostName(name), {
      metadata: {
        labels: { constructor: null, toString: null },
        annotations: { toString: null, constructor: null },
      },
    });
    await virtualMapsAre({ app: 'a' }, { valueOf: 'h1' });
    await hostMapsAre({ app: 'a' }, { valueOf: 'h1' });

    // And the virtual side's own change goes out again.
    await virtual().patch('configmaps', 'apps', name, {
      metadata: { labels: { hasOwnProperty: 'v2' }, annotations: { valueOf: null, constructor: 'v2' } },
    });
    await hostMapsAre({ app: 'a', hasOwnProperty: 'v2' }, { constructor: 'v2' });
  });
});
