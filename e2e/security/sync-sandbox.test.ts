// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import { eventually } from '../support/wait.ts';
import { everythingVisible, leakForms, syncingWhen, useAttackEnv } from './sync-support.ts';

/**
 * The sandbox channel attack, as a tenant would make it: the patches of its virtual cluster's
 * Secrets stash each Secret's data in every place one evaluation could leave it for a later one
 * (RegExp.input and the other legacy statics, a global, Object.prototype, a hidden intrinsic, the
 * errors' stack accessor, Math.random's state); a later ConfigMap patch throws whatever it finds,
 * which the syncer puts in an Event on the virtual ConfigMap, the instance's Syncing condition and
 * its log (a Secret's own errors are redacted; a ConfigMap's are not). The Secret's value must
 * appear in none of them.
 */
describe('a patch cannot carry a Secret out through the sandbox', () => {
  const env = useAttackEnv();

  test("a later ConfigMap patch finds nothing of an earlier Secret patch's data", async () => {
    const e = env();
    const ns = await e.tenantNamespace('tenant');
    const stash = [
      '/(.+)/.test(value)',
      '(() => { try { globalThis.stash = value; } catch (e) {} })()',
      '(() => { try { Object.prototype.stash = value; } catch (e) {} })()',
      '(() => { try { Object.getPrototypeOf([].values().map((x) => x)).stash = value; } catch (e) {} })()',
      "(() => { try { Object.getOwnPropertyDescriptor(new Error(), 'stack').get.stash = value; } catch (e) {} })()",
      '(() => { for (let i = 0; i < value.length; i++) Math.random(); })()',
    ].join(', ');
    const read = [
      'RegExp.input',
      'RegExp.$1',
      'RegExp.lastMatch',
      "RegExp['$_']",
      'globalThis.stash',
      '({}).stash',
      'Object.getPrototypeOf([].values().map((x) => x)).stash',
      "Object.getOwnPropertyDescriptor(new Error(), 'stack').get.stash",
      'Math.random()',
    ]
      .map((expression) => `(() => { try { return String(${expression}); } catch (e) { return 'x'; } })()`)
      .join(' + "|" + ');
    await e.createInstance(ns, 'vc', {
      sync: {
        toHost: {
          secrets: {
            enabled: true,
            patches: [{ path: 'data.password', expression: `(${stash}, value)` }],
          },
          configMaps: {
            enabled: true,
            patches: [
              { path: 'data.probe', expression: `(() => { throw new Error("found: " + ${read}); })()` },
            ],
          },
        },
      },
    });
    await syncingWhen(e, ns, 'vc', (c) => c.reason !== 'Starting', 'the syncer to run');
    // The Secret syncs first (its patch ran on its data)...
    await e.virtual.create('secrets', 'apps', {
      metadata: { name: 'db' },
      stringData: { password: e.secretValue },
    });
    await eventually(
      async () => (await e.host.get('secrets', ns, hostNameLong('db', 'apps', 'vc'))) !== null,
      60_000,
      'the Secret on the host',
    );
    // ...then a ConfigMap whose patch throws whatever it found.
    await e.virtual.create('configmaps', 'apps', { metadata: { name: 'probe' }, data: { probe: 'x' } });
    const condition = await syncingWhen(
      e,
      ns,
      'vc',
      (c) => c.reason === 'SyncError' && c.message.includes('ConfigMap apps/probe'),
      "the ConfigMap's failure in the condition",
    );
    // The thrown message is where a leak would be, and it is shown: the channel was tried.
    expect(condition.message).toContain('found: ');
    await eventually(
      async () =>
        (await e.virtual.eventsAbout('apps', 'ConfigMap', 'probe')).some((ev) =>
          ev.note?.includes('found: '),
        ),
      30_000,
      "the ConfigMap's SyncError event",
    );
    expect(e.logs()).toContain('found: ');
    const visible = await everythingVisible(e, [ns]);
    // The Secret's value is on the host where it belongs (base64 in its data), nowhere else:
    // take that one object out, then search everything for every form of the value.
    const withoutTheSecret = visible.replace(
      JSON.stringify((await e.host.get('secrets', ns, hostNameLong('db', 'apps', 'vc'))).data),
      '',
    );
    const virtualSecret = JSON.stringify((await e.virtual.get('secrets', 'apps', 'db')).data);
    for (const form of leakForms(e.secretValue)) {
      expect(withoutTheSecret.replaceAll(virtualSecret, '')).not.toContain(form);
    }
  });
});
