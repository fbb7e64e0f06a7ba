import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidSyncConfig } from '../sync/config.ts';
import { runSyncer } from './syncer.ts';

/**
 * docs/sync-patches.md, "Checked before anything runs": `platform syncer` validates its
 * configuration at start, with the lines `platform sync preview` and admission give, before it
 * reads a kubeconfig or starts anything.
 */
describe('platform syncer: the configuration is checked at start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'syncer-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an invalid configuration is refused with every problem and its field, before any kubeconfig is read', async () => {
    const config = join(dir, 'invalid.yaml');
    writeFileSync(
      config,
      [
        'sync:',
        '  toHost:',
        '    services:',
        '      patches:',
        '        - path: metadata.name',
        `          expression: '"renamed"'`,
        '        - path: spec.ports[0',
        '          expression: value',
        '',
      ].join('\n'),
    );
    const started = runSyncer(
      {
        // Neither exists: reading one would fail with another error.
        virtualKubeconfig: join(dir, 'no-such-virtual.kubeconfig'),
        hostKubeconfig: join(dir, 'no-such-host.kubeconfig'),
        hostNamespace: 'vc-dev',
        name: 'dev',
        config,
        healthPort: 0,
        healthHost: '127.0.0.1',
        maxConcurrentReconciles: 1,
        logLevel: 'silent',
      },
      pino({ level: 'silent' }),
    );
    await expect(started).rejects.toBeInstanceOf(InvalidSyncConfig);
    await expect(started).rejects.toThrow(
      /^invalid virtual cluster configuration:\n {2}sync\.toHost\.services\.patches\[0\]\.path: "metadata\.name" may not patch metadata\.name\n {2}sync\.toHost\.services\.patches\[1\]\.path: /,
    );
  });
});
