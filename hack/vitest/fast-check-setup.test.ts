import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * README's "Tests": `FC_SEED=S FC_PATH=P` replays one failure and `FC_NUM_RUNS=N` sets the runs of
 * every property. The setup module is evaluated again under each environment and fast-check's
 * global configuration read back, then restored.
 */
const before = fc.readConfigureGlobal();

async function configurationUnder(env: Record<string, string>) {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  vi.resetModules();
  await import('./fast-check-setup.ts');
  return fc.readConfigureGlobal();
}

afterEach(() => {
  vi.unstubAllEnvs();
  fc.configureGlobal(before);
});

describe('fast-check-setup', () => {
  it('FC_SEED and FC_PATH replay one case: both reach every property', async () => {
    expect(await configurationUnder({ FC_SEED: '-1234', FC_PATH: '7:0:1' })).toMatchObject({
      seed: -1234,
      path: '7:0:1',
    });
  });

  it('FC_NUM_RUNS sets the runs of every property, and a run of a property obeys it', async () => {
    expect(await configurationUnder({ FC_NUM_RUNS: '3' })).toMatchObject({ numRuns: 3 });
    let runs = 0;
    fc.assert(
      fc.property(fc.integer(), () => {
        runs += 1;
      }),
    );
    expect(runs).toBe(3);
  });

  it('refuses a seed that is not an integer instead of ignoring it', async () => {
    await expect(configurationUnder({ FC_SEED: 'abc' })).rejects.toThrow(
      'FC_SEED must be an integer, not "abc"',
    );
  });
});
