import { mkdtempSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { AuditFileBackend, backupName, isBackupOf } from './backend.ts';

const line = (i: number) => `${JSON.stringify({ kind: 'Event', i, pad: 'x'.repeat(80) })}\n`;
const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
const backups = (dir: string) => readdirSync(dir).filter((file) => isBackupOf(join(dir, 'audit.log'), file));

describe('audit file rotation', () => {
  test('backup names follow the log name and are recognised', () => {
    const name = backupName('/var/log/audit.log', new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678)), 1);
    expect(name).toBe('audit-2026-01-02T03-04-05.678.log');
    expect(isBackupOf('/var/log/audit.log', name)).toBe(true);
    expect(isBackupOf('/var/log/audit.log', `${name}.gz`)).toBe(true);
    expect(isBackupOf('/var/log/audit.log', 'audit.log')).toBe(false);
    expect(isBackupOf('/var/log/audit.log', 'other-2026-01-02T03-04-05.678.log')).toBe(false);
  });

  test('rotates by size, never splits a line, keeps at most maxBackups', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'audit-'));
    const path = join(dir, 'audit.log');
    const backend = new AuditFileBackend({ path, maxSizeBytes: 1000, maxBackups: 2 });
    for (let i = 0; i < 60; i++) {
      backend.write(line(i));
      if (i % 5 === 4) await settle();
    }
    await backend.close();
    await settle();
    const rotated = backups(dir);
    expect(rotated.length).toBeGreaterThan(0);
    expect(rotated.length).toBeLessThanOrEqual(2);
    for (const file of [...rotated, 'audit.log']) {
      const text = readFileSync(join(dir, file), 'utf8');
      for (const entry of text.split('\n').filter(Boolean)) expect(() => JSON.parse(entry)).not.toThrow();
    }
    // The newest lines are in the current file.
    expect(readFileSync(path, 'utf8')).toContain('"i":59');
  });

  test('gzips rotated files when compress is set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'audit-'));
    const path = join(dir, 'audit.log');
    const backend = new AuditFileBackend({ path, maxSizeBytes: 500, compress: true });
    for (let i = 0; i < 20; i++) {
      backend.write(line(i));
      if (i % 4 === 3) await settle();
    }
    await backend.close();
    await settle();
    const gz = backups(dir).filter((file) => file.endsWith('.gz'));
    expect(gz.length).toBeGreaterThan(0);
    const text = gunzipSync(readFileSync(join(dir, gz[0]!))).toString('utf8');
    expect(text).toContain('"kind":"Event"');
  });

  test('removes rotated files older than maxAge days', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'audit-'));
    const path = join(dir, 'audit.log');
    const old = join(dir, 'audit-2020-01-01T00-00-00.000.log.gz');
    const recent = join(dir, 'audit-2026-01-01T00-00-00.000.log');
    const unrelated = join(dir, 'notes.txt');
    for (const file of [old, recent, unrelated]) writeFileSync(file, 'x');
    const now = Date.now();
    utimesSync(old, new Date(now - 10 * 86400_000), new Date(now - 10 * 86400_000));
    utimesSync(unrelated, new Date(now - 10 * 86400_000), new Date(now - 10 * 86400_000));
    const backend = new AuditFileBackend({ path, maxSizeBytes: 1000, maxAgeDays: 7 });
    await backend.close();
    const files = readdirSync(dir);
    expect(files).not.toContain('audit-2020-01-01T00-00-00.000.log.gz');
    expect(files).toContain('audit-2026-01-01T00-00-00.000.log');
    expect(files).toContain('notes.txt');
  });
});
