import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', './hack/vitest/summary-reporter.ts'],
    // isolated-vm needs `--no-node-snapshot` in every process that loads it, and a process of
    // its own (worker threads would share one V8 platform), hence forks with that flag.
    pool: 'forks',
    execArgv: ['--no-node-snapshot'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'bin/**/*.test.ts', 'hack/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          globalSetup: ['e2e/support/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
