import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { eventually } from '../support/wait.ts';

/**
 * The audit log's rotation through a real gateway (spec row 95; docs/audit.md shows `maxSize` and
 * `compress`): with `maxSize: 1` and `maxBackups: 1`, after several rotations one rotated file is
 * left beside `audit.log`, and the earliest lines are gone with the older files.
 */
describe('audit: maxBackups keeps that many rotated files', () => {
  const env = useGatewayEnv({ https: true });
  const auditDir = mkdtempSync(join(tmpdir(), 'audit-rotation-'));
  let admin: string;

  const request = (path: string, init: { method?: string; body?: unknown } = {}) =>
    call(`${env().api}${path}`, {
      token: admin,
      dispatcher: env().dispatcher,
      ...(init.method ? { method: init.method } : {}),
      ...(init.body !== undefined
        ? { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(init.body) }
        : {}),
    });
  /** The log files (the rotation keeps its bookkeeping in a hidden file beside them). */
  const logFiles = () => readdirSync(auditDir).filter((name) => !name.startsWith('.'));
  const rotatedFiles = () => logFiles().filter((name) => name !== 'audit.log');
  const everything = () =>
    logFiles()
      .map((name) => readFileSync(join(auditDir, name), 'utf8'))
      .join('\n');

  beforeAll(async () => {
    admin = await env().user('root', { admin: true });
    const configured = await request('/configs', {
      method: 'POST',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Config',
        metadata: { name: 'config' },
        spec: {
          raw: `audit:\n  enabled: true\n  path: ${auditDir}/audit.log\n  level: 4\n  maxSize: 1\n  maxBackups: 1\n`,
        },
      },
    });
    expect(configured.status, configured.text).toBe(201);
    await eventually(
      async () => {
        await request('/namespaces/default/sharedsecrets/first-marker');
        return existsSync(join(auditDir, 'audit.log')) && everything().includes('first-marker');
      },
      30_000,
      'the gateway to write its audit log',
    );
  });

  test('after several rotations one rotated file is left, and the first lines are gone', async () => {
    // Each read logs the 300 kB description in its response: a megabyte every few reads.
    const created = await request('/namespaces/default/sharedsecrets', {
      method: 'POST',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'SharedSecret',
        metadata: { name: 'large' },
        spec: { description: 'x'.repeat(300_000) },
      },
    });
    expect(created.status, created.text).toBe(201);
    let reads = 0;
    await eventually(
      async () => {
        if (reads < 40) {
          expect((await request('/namespaces/default/sharedsecrets/large')).status).toBe(200);
          reads++;
        }
        return reads >= 12 && rotatedFiles().length === 1 && !everything().includes('first-marker');
      },
      60_000,
      'one rotated file left, without the first lines',
    );
    expect(rotatedFiles()).toEqual([expect.stringMatching(/^audit-.+\.log$/)]);
    expect(existsSync(join(auditDir, 'audit.log'))).toBe(true);
  });
});
