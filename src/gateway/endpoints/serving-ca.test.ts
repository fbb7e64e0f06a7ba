import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { ServingCa } from './serving-ca.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
/** A certificate directory of the test's own, removed after it. */
const certDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-'));
  dirs.push(dir);
  return dir;
};

describe('ServingCa', () => {
  test("ca.crt of the gateway's certificate directory, read once and again when it changes (a renewed CA is the one handed out)", async () => {
    const dir = certDir();
    const reads: string[] = [];
    const ca = new ServingCa(dir, (path) => {
      reads.push(path);
      return readFileSync(path, 'utf8');
    });
    try {
      // Written before the first request: the watch starts with it, no event is pending.
      writeFileSync(join(dir, 'ca.crt'), 'first CA');
      for (let request = 0; request < 5; request += 1) expect(ca.pem()).toBe('first CA');
      expect(reads).toHaveLength(1);
      writeFileSync(join(dir, 'ca.crt'), 'renewed CA');
      await expect.poll(() => ca.pem()).toBe('renewed CA');
      // A mounted Secret's update: the file is replaced by a rename in the directory.
      writeFileSync(join(dir, 'ca.crt.new'), 'swapped CA');
      renameSync(join(dir, 'ca.crt.new'), join(dir, 'ca.crt'));
      await expect.poll(() => ca.pem()).toBe('swapped CA');
    } finally {
      ca.close();
    }
  });

  test('none while the directory has no ca.crt, the CA once it has', async () => {
    const dir = certDir();
    writeFileSync(join(dir, 'tls.crt'), 'serving');
    const ca = new ServingCa(dir);
    try {
      expect(ca.pem()).toBeUndefined();
      writeFileSync(join(dir, 'ca.crt'), 'first CA');
      await expect.poll(() => ca.pem()).toBe('first CA');
    } finally {
      ca.close();
    }
  });

  test('no CA for a gateway without TLS', () => {
    expect(new ServingCa(undefined).pem()).toBeUndefined();
  });
});
