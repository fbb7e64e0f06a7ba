import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// Runs `platform sync preview` as a subprocess on real files, exactly as a user would.
const run = promisify(execFile);
const entry = `import('${join(import.meta.dirname, '../cli/sync-preview.ts')}').then((m) => m.syncPreviewCommand().parseAsync(process.argv.slice(1), { from: 'user' }))`;
async function preview(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(
      process.execPath,
      ['--no-node-snapshot', '--import', 'tsx', '-e', entry, '--', ...args],
      {
        cwd: join(import.meta.dirname, '../..'),
      },
    );
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let dir = '';
const file = (name: string) => join(dir, name);
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sync-preview-'));
  await writeFile(
    file('config.yaml'),
    `sync:
  toHost:
    endpoints:
      patches:
        - path: metadata.annotations["example.com/dns"]
          expression: virtualToHostDNS(value)
          reverseExpression: '"back:" + value'
`,
  );
  await writeFile(
    file('bad-expr.yaml'),
    'sync: {toHost: {endpoints: {patches: [{path: "subsets", expression: "value.a.b"}]}}}\n',
  );
  await writeFile(
    file('bad-path.yaml'),
    'sync: {toHost: {endpoints: {patches: [{path: "a[0", expression: "1"}]}}}\n',
  );
  await writeFile(
    file('ep.yaml'),
    `apiVersion: v1
kind: Endpoints
metadata: {name: db, namespace: default, annotations: {example.com/dns: db.default.svc}}
subsets: [{addresses: [{ip: 10.0.0.1, targetRef: {kind: Pod, name: db-0, namespace: default, uid: x}}]}]
`,
  );
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const base = () => [
  '--config',
  file('config.yaml'),
  '--vcluster-name',
  'vc',
  '--vcluster-namespace',
  'vc-ns',
];

describe('platform sync preview', () => {
  it('prints the host object for a virtual object', async () => {
    const r = await preview([...base(), '-f', file('ep.yaml')]);
    expect(r.code).toBe(0);
    const obj = parse(r.stdout);
    expect(obj.metadata.name).toBe('db-x-default-x-vc');
    expect(obj.metadata.namespace).toBe('vc-ns');
    expect(obj.metadata.annotations['example.com/dns']).toBe('db-x-default-x-vc.vc-ns.svc.cluster.local');
    expect(obj.subsets[0].addresses[0].targetRef).toEqual({
      kind: 'Pod',
      name: 'db-0-x-default-x-vc',
      namespace: 'vc-ns',
    });
  });

  it('--to-virtual prints the virtual object for a host object, with reverse patches', async () => {
    const host = await preview([...base(), '-f', file('ep.yaml')]);
    await writeFile(file('host.yaml'), host.stdout);
    const r = await preview([
      ...base(),
      '--to-virtual',
      '--virtual',
      file('ep.yaml'),
      '-f',
      file('host.yaml'),
    ]);
    expect(r.code).toBe(0);
    const obj = parse(r.stdout);
    expect(obj.metadata.name).toBe('db');
    expect(obj.metadata.annotations['example.com/dns']).toBe(
      'back:db-x-default-x-vc.vc-ns.svc.cluster.local',
    );
  });

  it.each([
    ['bad-expr.yaml', 'sync.toHost.endpoints.patches[0].expression: TypeError'],
    ['bad-path.yaml', 'sync.toHost.endpoints.patches[0].path: invalid path'],
  ])('%s exits 1 naming the patch', async (config, message) => {
    const r = await preview([
      '--config',
      file(config),
      '--vcluster-name',
      'vc',
      '--vcluster-namespace',
      'vc-ns',
      '-f',
      file('ep.yaml'),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe('');
  });
});
