import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  choosePorts,
  type InstanceState,
  instancePaths,
  parseInstanceState,
  readInstanceState,
  writeInstanceState,
} from './instance-state.ts';

const ports = { apiServer: 41001, etcdClient: 41002, etcdPeer: 41003, controllerManager: 41004 };
const state: InstanceState = {
  namespace: 'p-team',
  name: 'dev',
  uid: 'u-1',
  ports,
  running: true,
  controllerManager: true,
};

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('parseInstanceState', () => {
  it('reads back what is written', () => {
    expect(parseInstanceState(JSON.stringify(state))).toEqual(state);
    const { uid: _, ...withoutUid } = state;
    expect(parseInstanceState(JSON.stringify(withoutUid))).toEqual(withoutUid);
  });

  it('takes anything unreadable as no state', () => {
    expect(parseInstanceState(undefined)).toBeUndefined();
    expect(parseInstanceState('{')).toBeUndefined();
    expect(parseInstanceState('null')).toBeUndefined();
    expect(parseInstanceState(JSON.stringify({ ...state, running: 'yes' }))).toBeUndefined();
    expect(
      parseInstanceState(JSON.stringify({ ...state, ports: { ...ports, etcdPeer: 70000 } })),
    ).toBeUndefined();
    expect(
      parseInstanceState(JSON.stringify({ ...state, ports: { ...ports, apiServer: '1' } })),
    ).toBeUndefined();
  });
});

describe('instance directory', () => {
  it('keeps each instance under virtualclusters/<namespace>/<name> and its state in state.json', () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'instance-state-'));
    dirs.push(stateDir);
    const paths = instancePaths(stateDir, state);
    expect(paths.root).toBe(join(stateDir, 'virtualclusters', 'p-team', 'dev'));
    expect(readInstanceState(paths)).toBeUndefined();
    writeInstanceState(paths, state);
    expect(readInstanceState(paths)).toEqual(state);
    expect(JSON.parse(readFileSync(paths.stateFile, 'utf8'))).toEqual(state);
  });
});

describe('choosePorts', () => {
  const picker = (start: number) => {
    let next = start;
    return async () => next++;
  };

  it('keeps every recorded port that is free', async () => {
    expect(await choosePorts(ports, async () => true, picker(50000))).toEqual(ports);
  });

  it('replaces only the ports that are taken', async () => {
    const chosen = await choosePorts(ports, async (p) => p !== ports.apiServer, picker(50000));
    expect(chosen).toEqual({ ...ports, apiServer: 50000 });
  });

  it('picks four distinct ports when none is recorded, even if the picker repeats itself', async () => {
    const answers = [50000, 50000, 50001, 50001, 50002, 50003];
    const chosen = await choosePorts(
      undefined,
      async () => true,
      async () => answers.shift()!,
    );
    expect(new Set(Object.values(chosen)).size).toBe(4);
  });
});
