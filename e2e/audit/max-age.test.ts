import { existsSync, mkdtempSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { eventually } from '../support/wait.ts';

/**
 * The audit log's `maxAge` through a real gateway (docs/audit.md: days to keep rotated files, by
 * modification time; spec row 95): configured through the gateway's config endpoint, the gateway
 * opens its log and removes the rotated files of it older than that, and nothing else. Fails
 * (the old file stays) with `maxAge` ignored.
 */
describe('audit: maxAge removes rotated files older than that many days', () => {
  const env = useGatewayEnv({ https: true });

  test('the rotated files older than maxAge go; newer ones, and files that are no rotated log, stay', async () => {
    const admin = await env().user('root', { admin: true });
    const auditDir = mkdtempSync(join(tmpdir(), 'audit-max-age-'));
    const now = Date.now();
    const daysAgo = (days: number) => new Date(now - days * 24 * 3600 * 1000);
    // What an earlier run left: rotated files named as the gateway names them, and a file of someone else's.
    const files = {
      old: 'audit-2026-01-01T00-00-00.000.log.gz',
      recent: 'audit-2026-02-01T00-00-00.000.log',
      unrelated: 'notes.txt',
    };
    for (const [which, name] of Object.entries(files)) {
      const path = join(auditDir, name);
      writeFileSync(path, `${which}\n`);
      const mtime = which === 'recent' ? daysAgo(2) : daysAgo(10);
      utimesSync(path, mtime, mtime);
    }

    const configured = await call(`${env().api}/configs`, {
      method: 'POST',
      token: admin,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        apiVersion: GROUP_VERSION,
        kind: 'Config',
        metadata: { name: 'config' },
        spec: { raw: `audit:\n  enabled: true\n  path: ${auditDir}/audit.log\n  level: 2\n  maxAge: 7\n` },
      }),
    });
    expect(configured.status, configured.text).toBe(201);
    // The gateway writes its log once the configuration is in force.
    await eventually(
      async () => {
        await call(`${env().api}/namespaces/default/sharedsecrets/max-age-marker`, {
          token: admin,
          dispatcher: env().dispatcher,
        });
        const log = join(auditDir, 'audit.log');
        return existsSync(log) && readFileSync(log, 'utf8').includes('max-age-marker');
      },
      30_000,
      'the gateway to write its audit log',
    );
    expect(readdirSync(auditDir).sort()).toEqual(['audit.log', files.recent, files.unrelated].sort());
  });
});
