import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { createOperator, defaultOperatorOptions, type OperatorOptions } from '../../src/cli/operator.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { hostKubeconfigPath } from './cluster.ts';

/**
 * Runs the operator in the test process for the calling describe block, watching only the
 * namespace the getter returns (other test files share the host cluster). Returns a getter for
 * the running manager.
 */
export function useOperator(
  namespace: () => string,
  overrides: Partial<OperatorOptions> = {},
): () => Manager {
  let manager: Manager | undefined;
  beforeAll(async () => {
    const options = defaultOperatorOptions({
      kubeconfig: hostKubeconfigPath(),
      watchNamespace: namespace(),
      namespace: namespace(),
      leaderElect: false,
      healthPort: 0,
      healthHost: '127.0.0.1',
      logLevel: 'warn',
      // Namespaced controllers only: cluster-scoped kinds (access keys) are shared by every test file.
      controllers: ['sharedsecret', 'secretsync'],
      ...overrides,
    });
    manager = createOperator(options, pino({ level: 'warn' }));
    await manager.start();
  });
  afterAll(async () => {
    await manager?.stop();
  });
  return () => {
    if (!manager) throw new Error('operator not started');
    return manager;
  };
}

const platformBin = fileURLToPath(new URL('../../bin/platform.js', import.meta.url));

/** `platform operator` as a real process (for SIGKILL and failover tests); its log goes to `logPath`. */
export function spawnOperator(args: string[], logPath: string): ChildProcess {
  const log = createWriteStream(logPath, { flags: 'a' });
  // No webhooks: fail-closed configurations would outlive a killed process in the shared cluster;
  // no gateway: two processes would compete for its port; namespaced controllers only, as in
  // useOperator.
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      platformBin,
      'operator',
      '--no-webhooks',
      '--no-gateway',
      '--controllers',
      'sharedsecret,secretsync',
      ...args,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  return child;
}
