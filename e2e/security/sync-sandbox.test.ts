// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import { eventually } from '../support/wait.ts';
import {
  b64,
  createInstanceAsMallory,
  leaksOf,
  syncingWhen,
  TEAM,
  useTenantPlatform,
  virtualEventsAbout,
} from './support.ts';

/**
 * Issue 15, item 3: "the sandbox keeps state between evaluations", attacked as mallory (a
 * project member with `edit`) would: her VirtualClusterInstance's Secret patch stashes the
 * Secret's data in every place one evaluation could leave it for a later one, and records, in an
 * annotation of the host copy, which stashes ran and which the realm refused; a later ConfigMap
 * patch reads every place and throws what it found, which the syncer puts in an Event on the
 * virtual ConfigMap, the instance's Syncing condition and its log (a Secret's own errors are
 * redacted; a ConfigMap's are not). The components run as their own ServiceAccounts, the syncer
 * as its own. The Secret's value must be nowhere but in the Secret and its host copy: not in any
 * other object of the host or of the virtual cluster, an Event, a condition, a log line or the
 * apiserver's audit log.
 *
 * Each channel is one the unit test (src/sync/patches/channels.test.ts) shows carrying the value
 * in a realm nothing protects; here the read of each must run cleanly (no read throws, so none
 * could hide a leak behind its error) and the stash must have run first.
 */
describe('a patch cannot carry a Secret out through the sandbox', () => {
  const env = useTenantPlatform();

  /** [channel, stash (the secret is `secret`), read]. */
  const CHANNELS: Array<[string, string, string]> = [
    ['regexp', '/(.+)/.test(secret)', "[RegExp.input, RegExp.$1, RegExp.lastMatch, RegExp['$_']].join('|')"],
    ['global', 'globalThis.stash = secret', 'globalThis.stash'],
    ['prototype', 'Object.prototype.stash = secret', '({}).stash'],
    [
      'hidden intrinsic',
      'Object.getPrototypeOf([].values().map((x) => x)).stash = secret',
      'Object.getPrototypeOf([].values().map((x) => x)).stash',
    ],
    [
      'stack accessor',
      "Object.getOwnPropertyDescriptor(new Error(), 'stack').get.stash = secret",
      "Object.getOwnPropertyDescriptor(new Error(), 'stack').get.stash",
    ],
    [
      'prepareStackTrace',
      'Error.prepareStackTrace = () => secret',
      "new Error('probe').stack.split('\\n')[0]",
    ],
    ['random', 'for (let i = 0; i < secret.length; i++) Math.random()', 'Math.random()'],
    [
      'symbol registry',
      "Symbol.prototype[Symbol.for('platform.stash')] = Symbol.for(secret)",
      "(() => { const kept = Symbol.for('platform.stash')[Symbol.for('platform.stash')]; return typeof kept === 'symbol' ? Symbol.keyFor(kept) : null; })()",
    ],
    [
      'closure on a helper',
      'atob.keep = ((kept) => () => kept)(secret)',
      "typeof atob.keep === 'function' ? atob.keep() : null",
    ],
    [
      'toJSON',
      'Object.prototype.toJSON = ((kept) => function () { return kept; })(secret)',
      "JSON.stringify({ nothing: 'here' })",
    ],
  ];

  test("a later ConfigMap patch finds nothing of an earlier Secret patch's data", async () => {
    const e = env();
    const value = `sandbox-secret-${randomBytes(12).toString('hex')}`;
    // The stash: every channel tried with the Secret's data, each one's outcome recorded
    // ("stored", or the error the frozen realm threw), in the host copy's annotation.
    const stash = `(() => {
      const secret = context.virtualObject.data.password;
      const outcome = (f) => { try { f(); return 'stored'; } catch (e) { return e.name; } };
      return JSON.stringify({ ${CHANNELS.map(([name, code]) => `${JSON.stringify(name)}: outcome(() => { ${code}; })`).join(', ')} });
    })()`;
    // The read: what each channel holds, or "threw" when reading it failed.
    const read = `(() => { throw new Error("found: " + JSON.stringify({ ${CHANNELS.map(
      ([name, , code]) =>
        `${JSON.stringify(name)}: (() => { try { return String(${code}); } catch (e) { return 'threw ' + e.name; } })()`,
    ).join(', ')} })); })()`;
    const created = await createInstanceAsMallory(e, 'forget', {
      sync: {
        toHost: {
          secrets: { enabled: true, patches: [{ path: 'metadata.annotations.stashed', expression: stash }] },
          configMaps: { enabled: true, patches: [{ path: 'data.probe', expression: read }] },
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await syncingWhen(e, 'forget', (c) => c.reason !== 'Starting', 'the syncer to run');

    // The Secret syncs first: its patch ran on its data...
    await e.virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'db', annotations: { stashed: 'pending' } },
      data: { password: b64(value) },
    });
    const hostSecret = `/api/v1/namespaces/${TEAM}/secrets/${hostNameLong('db', 'apps', 'forget')}`;
    let report: Record<string, string> = {};
    await eventually(
      async () => {
        const copy = await e.admin.get(hostSecret);
        const stashed = copy?.metadata?.annotations?.stashed;
        if (!stashed || stashed === 'pending') return false;
        report = JSON.parse(stashed);
        return true;
      },
      60_000,
      'the host copy with the outcome of every stash',
    );
    // ...every stash was tried with the secret: what did not store was refused by the realm.
    expect(Object.keys(report).sort()).toEqual(CHANNELS.map(([name]) => name).sort());
    for (const [name, outcome] of Object.entries(report))
      expect(['stored', 'TypeError'], `${name}: ${outcome}`).toContain(outcome);
    // The stashes that do not throw ran with the secret (a match, draws from Math.random).
    expect(report.regexp).toBe('stored');
    expect(report.random).toBe('stored');

    // ...then a ConfigMap whose patch throws whatever it found.
    await e.virtual.create('/api/v1/namespaces/apps/configmaps', {
      metadata: { name: 'probe' },
      data: { probe: 'x' },
    });
    const condition = await syncingWhen(
      e,
      'forget',
      (c) => c.reason === 'SyncError' && c.message.includes('ConfigMap apps/probe'),
      "the ConfigMap's failure in the condition",
    );
    expect(condition.message).toContain('found: ');
    // Where a leak would be, shown in full in the Event (the condition clips each entry): every
    // read ran, and none threw (a read that throws could hide a value behind its error).
    let note = '';
    await eventually(
      async () => {
        note =
          (await virtualEventsAbout(e, 'apps', 'ConfigMap', 'probe')).find((ev: any) =>
            ev.note?.includes('found: '),
          )?.note ?? '';
        return note !== '';
      },
      30_000,
      "the ConfigMap's SyncError event",
    );
    const found = JSON.parse(/found: (\{.*\})$/.exec(note)?.[1] ?? 'null') as Record<string, string> | null;
    expect(Object.keys(found ?? {}).sort()).toEqual(CHANNELS.map(([name]) => name).sort());
    for (const [name, text] of Object.entries(found ?? {})) expect(text, name).not.toMatch(/^threw/);
    expect(e.logs()).toContain('found: ');

    // The value is where it belongs (the virtual Secret, its host copy, the syncers' writes of
    // that copy, which the audit log records) and nowhere else.
    const hostCopies = [hostNameLong('db', 'apps', 'forget'), hostNameLong('db', 'apps', 'dev')];
    const byDesign = (where: string) =>
      where === 'virtual Secret apps/db' ||
      hostCopies.some(
        (copy) =>
          where === `host Secret ${TEAM}/${copy}` ||
          new RegExp(
            `^audit: (create|patch|update) /api/v1/namespaces/${TEAM}/secrets(/${copy})? by system:serviceaccount:${TEAM}:vcluster-syncer-`,
          ).test(where),
      );
    const leaks = await leaksOf(e, value);
    expect(leaks.filter((where) => !byDesign(where))).toEqual([]);
    // The search sees the value where it is by design (so it would see it elsewhere).
    expect(leaks).toContain(`host Secret ${TEAM}/${hostNameLong('db', 'apps', 'forget')}`);
  });
});
