import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { parseStoredPorts, persistentPort, portIsFree } from './ports.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const portsFile = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ports-test-'));
  dirs.push(dir);
  return join(dir, 'ports.json');
};

describe('parseStoredPorts', () => {
  test('reads the recorded ports and ignores anything else', () => {
    expect(parseStoredPorts(undefined)).toEqual({});
    expect(parseStoredPorts('not json')).toEqual({});
    expect(parseStoredPorts('[1, 2]')).toEqual({});
    expect(parseStoredPorts('{"apiserver": 6443, "gateway": 8443, "other": 1}')).toEqual({
      apiserver: 6443,
      gateway: 8443,
    });
    expect(parseStoredPorts('{"apiserver": 0, "gateway": 70000}')).toEqual({});
    expect(parseStoredPorts('{"apiserver": "6443", "gateway": 84.5}')).toEqual({});
  });
});

describe('persistentPort', () => {
  const picks = (...ports: number[]) => {
    const queue = [...ports];
    return async () => queue.shift() ?? 1;
  };
  const free = async () => true;
  const taken = async () => false;

  test('picks a port the first time and records it; reuses it while it is free', async () => {
    const file = portsFile();
    expect(await persistentPort(file, 'gateway', free, picks(40001))).toEqual({ port: 40001, reused: false });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ gateway: 40001 });
    expect(await persistentPort(file, 'gateway', free, picks(40002))).toEqual({ port: 40001, reused: true });
    expect(await persistentPort(file, 'apiserver', free, picks(40003))).toEqual({
      port: 40003,
      reused: false,
    });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ gateway: 40001, apiserver: 40003 });
  });

  test('replaces a port that is taken, and records the new one', async () => {
    const file = portsFile();
    writeFileSync(file, JSON.stringify({ gateway: 40001, apiserver: 40002 }));
    expect(await persistentPort(file, 'gateway', taken, picks(40005))).toEqual({
      port: 40005,
      reused: false,
      replaced: 40001,
    });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ gateway: 40005, apiserver: 40002 });
  });

  test('portIsFree tells a listening port from a free one', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    expect(await portIsFree(port)).toBe(false);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect(await portIsFree(port)).toBe(true);
  });
});
