import { defineConfig } from 'vitest/config';

/**
 * e2e files run in parallel where they share nothing: most start apiservers of their own on the
 * run's etcd (`useExtraClusters`, `useGatewayEnv`). Files that work on the run's shared host
 * cluster (its cluster-wide objects, controllers watching every namespace) run one at a time,
 * beside the others. Files that measure time or load the machine on purpose (leader failover
 * bounds, the soak's memory curve, benchmark smoke runs) run last, alone.
 */
const E2E_SHARED_HOST = [
  'e2e/api/crds.test.ts',
  'e2e/controllers/cluster.test.ts',
  'e2e/controllers/faults.test.ts',
  'e2e/controllers/sharedsecret.test.ts',
  'e2e/foundation/control-plane.test.ts',
  'e2e/gateway/direct-token-revocation.test.ts',
  'e2e/gateway/fuzz.test.ts',
  'e2e/gateway/tokenreview.test.ts',
  'e2e/runtime/**/*.test.ts',
  'e2e/sync/**/*.test.ts',
];
const E2E_ALONE = [
  'e2e/reliability/**/*.test.ts',
  'e2e/bench/**/*.test.ts',
  // Three operators and thirteen apiservers; a takeover bound by the lease duration.
  'e2e/controllers/syncers-across-replicas.test.ts',
];

const e2e = {
  globalSetup: ['e2e/support/global-setup.ts'],
  testTimeout: 120_000,
  hookTimeout: 180_000,
};

export default defineConfig({
  test: {
    reporters: ['default', './hack/vitest/summary-reporter.ts'],
    // isolated-vm needs `--no-node-snapshot` in every process that loads it, and a process of
    // its own (worker threads would share one V8 platform), hence forks with that flag.
    pool: 'forks',
    execArgv: ['--no-node-snapshot'],
    // FC_SEED, FC_PATH, FC_NUM_RUNS: rerun a fast-check failure (README, "Tests").
    setupFiles: ['hack/vitest/fast-check-setup.ts'],
    // Two cores: the e2e files mostly wait on apiservers, so a few run at once.
    maxWorkers: 4,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'bin/**/*.test.ts', 'hack/**/*.test.ts'],
          maxWorkers: 1,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          exclude: [...E2E_SHARED_HOST, ...E2E_ALONE],
          maxWorkers: 2,
          ...e2e,
        },
      },
      {
        extends: true,
        test: { name: 'e2e-host', include: E2E_SHARED_HOST, fileParallelism: false, ...e2e },
      },
      {
        extends: true,
        test: {
          name: 'e2e-alone',
          include: E2E_ALONE,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          ...e2e,
        },
      },
    ],
  },
});
