// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
// First (a side-effect import, never reordered): the process's sandbox memory budget, set
// before the platform's modules make it.
import './memory-budget-env.ts';
import { describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import { MEMORY_BUDGET_ENV, processSandboxMemoryBudget } from '../../src/sync/patches/memory-budget.ts';
import { eventually } from '../support/wait.ts';
import {
  conditionOf,
  createInstanceAsMallory,
  MP,
  syncingWhen,
  TEAM,
  useTenantPlatform,
  virtualEventsAbout,
} from './support.ts';

/**
 * Issue 15, item 3: "nothing caps the memory of all isolates together, so enough instances can
 * exhaust the leader". Mallory, a project member with `edit`, creates VirtualClusterInstances
 * whose patches each need a sandbox (an isolate of 32 MiB) until the controller's process has
 * none left to give (its budget here: two). The one past the budget is refused its sandbox, with
 * a condition that says so; the process lives on, every other virtual cluster keeps syncing, and
 * once one of hers goes, the refused one gets the room.
 */
describe('a tenant cannot exhaust the memory of the process that runs the syncers', () => {
  const env = useTenantPlatform();
  const HOGS = ['hog-a', 'hog-b', 'hog-c'];
  const instancePath = (name: string) => `${MP}/namespaces/${TEAM}/virtualclusterinstances/${name}`;
  const syncing = async (name: string) => conditionOf(await env().admin.get(instancePath(name)), 'Syncing');
  const refusal = (c: any) =>
    c?.status === 'False' &&
    c.reason === 'SyncError' &&
    String(c.message).includes('SandboxMemoryBudgetExceeded');

  test('past the budget a sandbox is refused with a clear condition; the process and the other syncers go on', async () => {
    const e = env();
    expect(MEMORY_BUDGET_ENV).toBe('PLATFORM_SANDBOX_MEMORY_BUDGET_MIB');
    expect(processSandboxMemoryBudget.limitMiB).toBe(64);
    // Something for every patch to work on.
    await e.virtual.create('/api/v1/namespaces/apps/configmaps', {
      metadata: { name: 'settings' },
      data: { tier: 'gold' },
    });
    for (const name of HOGS) {
      const created = await createInstanceAsMallory(e, name, {
        sync: {
          toHost: {
            configMaps: {
              enabled: true,
              patches: [{ path: 'data.tier', expression: '"host-" + value' }],
            },
          },
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }
    // Two get a sandbox and sync (their copy made through the patch); the third is refused one,
    // and says why. Nothing else settles: a refusal, once there, stays while the two hold theirs.
    const hostCopy = (vc: string) =>
      e.admin.get(`/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('settings', 'apps', vc)}`);
    let states: Record<string, string> = {};
    await eventually(
      async () => {
        states = {};
        for (const name of HOGS) {
          const c = await syncing(name);
          if (refusal(c)) states[name] = 'refused';
          else if (c?.status === 'True' && (await hostCopy(name))?.data?.tier === 'host-gold')
            states[name] = 'synced';
          else states[name] = JSON.stringify(c ?? null);
        }
        const values = Object.values(states);
        return (
          values.filter((v) => v === 'refused').length === 1 &&
          values.filter((v) => v === 'synced').length === 2
        );
      },
      90_000,
      'two instances to sync and one to be refused its sandbox',
    ).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(states)}`);
    });
    const refused = HOGS.filter((name) => states[name] === 'refused');
    const synced = HOGS.filter((name) => states[name] === 'synced');
    const condition = await syncing(refused[0]!);
    expect(condition.message).toContain(
      `ConfigMap apps/settings: SandboxMemoryBudgetExceeded: sync.toHost.configMaps.patches[0].expression: the sandboxes of this process already hold 64 MiB of their 64 MiB memory budget; this virtual cluster's (32 MiB) is refused until others stop`,
    );
    expect(
      await e.admin.get(
        `/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('settings', 'apps', refused[0]!)}`,
      ),
    ).toBeNull();
    for (const name of synced)
      expect(
        (await e.admin.get(`/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('settings', 'apps', name)}`))
          ?.data,
      ).toEqual({ tier: 'host-gold' });
    await eventually(
      async () =>
        (await virtualEventsAbout(e, 'apps', 'ConfigMap', 'settings')).some(
          (ev: any) => ev.reason === 'SyncError' && ev.note?.includes('SandboxMemoryBudgetExceeded'),
        ),
      30_000,
      'a SyncError event on the virtual ConfigMap',
    );

    // The process lives: every syncer that needs no new sandbox syncs what comes next ('dev'
    // evaluates nothing, the two others have theirs).
    await e.virtual.create('/api/v1/namespaces/apps/configmaps', {
      metadata: { name: 'later' },
      data: { tier: 'silver' },
    });
    for (const name of ['dev', ...synced])
      await eventually(
        async () =>
          (await e.admin.get(
            `/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('later', 'apps', name)}`,
          )) !== null,
        60_000,
        `${name} to sync a new ConfigMap`,
      );
    expect(processSandboxMemoryBudget.reservedMiB).toBe(64);

    // One of hers goes: its sandbox with it, and the refused one gets the room (its objects are
    // retried; a change brings them back at once).
    const gone = await e.mallory.call(
      'DELETE',
      `${MP}/namespaces/${TEAM}/virtualclusterinstances/${synced[0]}`,
    );
    expect(gone.status).toBeLessThan(300);
    await eventually(
      async () => (await e.admin.get(instancePath(synced[0]!))) === null,
      60_000,
      'the instance gone',
    );
    await e.virtual.merge('/api/v1/namespaces/apps/configmaps/settings', {
      metadata: { annotations: { touched: 'yes' } },
    });
    await syncingWhen(e, refused[0]!, (c) => c.status === 'True', 'the refused instance to sync now');
    expect(
      (
        await e.admin.get(
          `/api/v1/namespaces/${TEAM}/configmaps/${hostNameLong('settings', 'apps', refused[0]!)}`,
        )
      )?.data,
    ).toEqual({ tier: 'host-gold' });
    // Two sandboxes again: the one left of the first two, and the one refused before.
    expect(processSandboxMemoryBudget.reservedMiB).toBe(64);
  });
});
