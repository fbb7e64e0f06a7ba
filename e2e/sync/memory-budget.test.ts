// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import { MEMORY_BUDGET_ENV } from '../../src/sync/patches/memory-budget.ts';
import { eventually } from '../support/wait.ts';
import { serviceAndEndpoints, TEST_CONFIG, useSpawnedSyncer } from './support.ts';

/**
 * The process-wide sandbox memory budget, reached: a syncer whose process may not build one more
 * isolate (here the budget is set below one isolate's heap) keeps running; the objects whose
 * patches need the sandbox report the refusal as a SyncError Event, the others sync.
 */
describe('past the sandbox memory budget, new sandboxes are refused and the process lives', () => {
  // One isolate needs 32 MiB: none fits.
  const { hostNamespace, vcName, host, virtual, syncer } = useSpawnedSyncer('budget', TEST_CONFIG, {
    [MEMORY_BUDGET_ENV]: '16',
  });

  test('an object that needs an expression fails with SandboxMemoryBudgetExceeded; one that does not syncs', async () => {
    // The Endpoints' annotation has an expression patch; the Service of "plain" has nothing to evaluate.
    const patched = serviceAndEndpoints('patched', { annotations: { 'platform.test/tier': 'gold' } });
    await virtual().create('services', 'apps', patched.service);
    await virtual().create('endpoints', 'apps', patched.endpoints);
    const plain = serviceAndEndpoints('plain');
    await virtual().create('services', 'apps', plain.service);
    await virtual().create('endpoints', 'apps', plain.endpoints);

    await eventually(
      async () =>
        (await host.get('endpoints', hostNamespace(), hostNameLong('plain', 'apps', vcName))) !== null,
      60_000,
      'the Endpoints without expressions on the host',
    );
    let note = '';
    await eventually(
      async () => {
        const events = await virtual().eventsAbout('apps', 'Endpoints', 'patched');
        note = events.find((e) => e.reason === 'SyncError')?.note ?? '';
        return note !== '';
      },
      60_000,
      'a SyncError event on the Endpoints whose patch needs the sandbox',
    );
    expect(note).toContain('SandboxMemoryBudgetExceeded');
    expect(note).toContain('sync.toHost.endpoints.patches[0].expression');
    expect(note).toContain(
      "a sandbox of 32 MiB does not fit in this process's sandbox memory budget of 16 MiB",
    );
    expect(await host.get('endpoints', hostNamespace(), hostNameLong('patched', 'apps', vcName))).toBeNull();
    expect(syncer().child.exitCode).toBeNull();
    expect(await syncer().metrics()).toMatch(
      /platform_syncer_errors_total\{[^}]*kind="Endpoints"[^}]*reason="SandboxMemoryBudgetExceeded"[^}]*\} [1-9]/,
    );
  });
});
