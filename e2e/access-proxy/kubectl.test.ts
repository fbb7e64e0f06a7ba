import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { isNotFound } from '../../src/runtime/errors.ts';
import { PROXY_PATHS, type ProxyPath, useAccessProxyEnv } from '../support/access-proxy.ts';
import { eventually } from '../support/wait.ts';

/**
 * kubectl through each path of the access proxy (issue 26, "Every protocol kubectl speaks"), as
 * the person `kim`, whose rights on each target are a RoleBinding there: the proxy forwards, the
 * target decides. Every outcome is read back directly from the target's apiserver.
 */
describe('access proxy: kubectl through each path', () => {
  const env = useAccessProxyEnv();
  const USER = 'kim';
  let token: string;
  beforeAll(async () => {
    token = await env().keyFor(USER);
    for (const path of PROXY_PATHS) await env().grant(path, USER);
  });

  describe.each(PROXY_PATHS)('the %s path', (path: ProxyPath) => {
    const ns = () => env().target(path).namespace;
    const kubectl = (args: string[], stdin?: string) =>
      env().kubectl(path, token, ['-n', ns(), ...args], stdin);
    /** A ConfigMap read directly from the target, or undefined when there is none. */
    const readDirect = async (name: string) =>
      env()
        .admin(path)
        .request<ConfigMap>({ method: 'GET', path: `/api/v1/namespaces/${ns()}/configmaps/${name}` })
        .catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
    const createDirect = (name: string, data: Record<string, string>, labels: Record<string, string> = {}) =>
      env()
        .admin(path)
        .request({
          method: 'POST',
          path: `/api/v1/namespaces/${ns()}/configmaps`,
          body: { metadata: { name, labels }, data },
        });
    const manifest = (name: string, data: Record<string, string>) =>
      JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns() }, data });

    test('get: the object the target holds', async () => {
      await createDirect('got', { answer: '42' });
      const result = await kubectl(['get', 'configmap', 'got', '-o', 'json']);
      expect(result.stderr).toBe('');
      expect(JSON.parse(result.stdout)).toMatchObject({ metadata: { name: 'got' }, data: { answer: '42' } });
    });

    test('apply (client-side, then server-side): created, updated, field manager kubectl', async () => {
      const created = await kubectl(['apply', '-f', '-'], manifest('applied', { v: '1' }));
      expect(created).toMatchObject({ code: 0, stdout: expect.stringContaining('created') });
      const first = await readDirect('applied');
      expect(first?.data).toEqual({ v: '1' });
      expect(first?.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration']).toContain(
        '"v":"1"',
      );
      expect((await kubectl(['apply', '-f', '-'], manifest('applied', { v: '2' }))).code).toBe(0);
      expect((await readDirect('applied'))?.data).toEqual({ v: '2' });

      const ssa = await kubectl(
        ['apply', '--server-side', '-f', '-'],
        manifest('server-applied', { v: '1' }),
      );
      expect(ssa).toMatchObject({ code: 0, stdout: expect.stringContaining('serverside-applied') });
      const applied = await readDirect('server-applied');
      expect(applied?.data).toEqual({ v: '1' });
      expect(applied?.metadata.managedFields).toContainEqual(
        expect.objectContaining({ manager: 'kubectl', operation: 'Apply' }),
      );
    });

    test('patch: json, merge and strategic patches reach the target', async () => {
      await createDirect('patched', { a: '1' });
      const patches: [string, string][] = [
        ['json', '[{"op":"add","path":"/data/b","value":"2"}]'],
        ['merge', '{"data":{"c":"3"}}'],
        ['strategic', '{"data":{"d":"4"}}'],
      ];
      for (const [type, patch] of patches) {
        const result = await kubectl(['patch', 'configmap', 'patched', '--type', type, '-p', patch]);
        expect(result, type).toMatchObject({ code: 0 });
      }
      expect((await readDirect('patched'))?.data).toEqual({ a: '1', b: '2', c: '3', d: '4' });
    });

    test('create --dry-run=server stores nothing; delete removes', async () => {
      const dry = await kubectl(['create', 'configmap', 'dry', '--from-literal=k=v', '--dry-run=server']);
      expect(dry).toMatchObject({ code: 0, stdout: expect.stringContaining('server dry run') });
      expect(await readDirect('dry')).toBeUndefined();

      await createDirect('doomed', { k: 'v' });
      expect((await kubectl(['delete', 'configmap', 'doomed', '--wait=false'])).code).toBe(0);
      expect(await readDirect('doomed')).toBeUndefined();
    });

    test('a watch with bookmarks: the initial events and the BOOKMARK that ends them arrive through the proxy', async () => {
      await createDirect('bookmarked', {});
      const watch = `/api/v1/namespaces/${ns()}/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2`;
      const answer = await env().viaProxy(path, token, watch);
      expect(answer.status, answer.body.toString('utf8')).toBe(200);
      const events = answer.body
        .toString('utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { type: string; object: ConfigMap });
      expect(events.some((e) => e.type === 'ADDED' && e.object.metadata.name === 'bookmarked')).toBe(true);
      const bookmark = events.find((e) => e.type === 'BOOKMARK');
      expect(bookmark?.object.metadata.annotations?.['k8s.io/initial-events-end']).toBe('true');
    });

    test('get -w: events for objects created and deleted after the watch opened arrive', async () => {
      await createDirect('watch-marker', {});
      const watch = spawnKubectl(env().kubeconfig(path, token), [
        '-n',
        ns(),
        'get',
        'configmaps',
        '-w',
        '-o',
        'name',
      ]);
      // `-o name` prints one line per object listed, then one per event.
      const lines = (name: string) =>
        watch
          .stdout()
          .split('\n')
          .filter((line) => line === `configmap/${name}`).length;
      try {
        await eventually(() => lines('watch-marker') === 1, 60_000, 'the initial list');
        await createDirect('watched', {});
        await eventually(() => lines('watched') === 1, 60_000, 'the ADDED event');
        await env()
          .admin(path)
          .request({ method: 'DELETE', path: `/api/v1/namespaces/${ns()}/configmaps/watched` });
        await eventually(() => lines('watched') === 2, 60_000, 'the DELETED event');
      } finally {
        watch.stop();
      }
    });

    test('pagination: --chunk-size lists every object in pages; limit/continue as the target answers', async () => {
      const names = ['page-a', 'page-b', 'page-c', 'page-d', 'page-e'];
      for (const name of names) await createDirect(name, {}, { page: path });
      const listed = await kubectl([
        'get',
        'configmaps',
        '-l',
        `page=${path}`,
        '--chunk-size=2',
        '-o',
        'name',
        '-v=6',
      ]);
      expect(listed.code).toBe(0);
      expect(listed.stdout.trim().split('\n')).toEqual(names.map((name) => `configmap/${name}`));
      // kubectl asked for pages of two (its request log at -v=6 names the URLs).
      expect(listed.stderr).toMatch(/limit=2/);
      expect(listed.stderr).toMatch(/continue=/);

      const seen: string[] = [];
      let next = '';
      for (let page = 0; page < 10; page++) {
        const query = `labelSelector=page%3D${path}&limit=2${next ? `&continue=${encodeURIComponent(next)}` : ''}`;
        const answer = await env().viaProxy(path, token, `/api/v1/namespaces/${ns()}/configmaps?${query}`);
        expect(answer.status).toBe(200);
        expect(answer.json.items.length).toBeLessThanOrEqual(2);
        seen.push(...answer.json.items.map((item: ConfigMap) => item.metadata.name));
        next = answer.json.metadata.continue ?? '';
        if (!next) break;
      }
      expect(seen).toEqual(names);

      // deletecollection through the proxy.
      const deleted = await env().viaProxy(
        path,
        token,
        `/api/v1/namespaces/${ns()}/configmaps?labelSelector=page%3D${path}`,
        {
          method: 'DELETE',
        },
      );
      expect(deleted.status).toBe(200);
      for (const name of names) expect(await readDirect(name)).toBeUndefined();
    });

    test.each([
      'application/json',
      'application/yaml',
      'application/vnd.kubernetes.protobuf',
      'application/cbor',
    ])('answers in %s are the target’s bytes, unchanged', async (accept) => {
      await createDirect(`encoded-${accept.replace(/\W/g, '-')}`, { text: 'ü ✓ end' });
      const upstream = `/api/v1/namespaces/${ns()}/configmaps/encoded-${accept.replace(/\W/g, '-')}`;
      const [proxied, direct] = [
        await env().viaProxy(path, token, upstream, { headers: { accept } }),
        await env().direct(path, upstream, { as: USER, headers: { accept } }),
      ];
      // CBOR is served by the virtual cluster's apiserver only (an alpha feature gate; the others answer 406).
      const served = accept !== 'application/cbor' || path === 'virtualcluster';
      expect(direct.status).toBe(served ? 200 : 406);
      expect(proxied.status).toBe(direct.status);
      expect(proxied.headers.get('content-type')).toBe(direct.headers.get('content-type'));
      if (accept === 'application/cbor' && served) {
        // The target's own CBOR answers order map keys differently from one answer to the next
        // (Go map iteration): the same bytes, in another order. JSON, YAML and protobuf are stable.
        expect(proxied.body.subarray(0, 3).toString('hex')).toBe('d9d9f7');
        expect(Buffer.from(proxied.body).sort().equals(Buffer.from(direct.body).sort())).toBe(true);
      } else {
        expect(proxied.body.equals(direct.body)).toBe(true);
      }
    });

    test('request bodies in YAML and protobuf are passed to the target', async () => {
      const yaml = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n`;
      const created = await env().viaProxy(path, token, `/api/v1/namespaces/${ns()}/configmaps`, {
        method: 'POST',
        headers: { 'content-type': 'application/yaml' },
        body: yaml,
      });
      expect(created.status).toBe(201);
      // The protobuf encoding of that object, as the target itself gives it, sent back as an update.
      const encoded = await env().direct(path, `/api/v1/namespaces/${ns()}/configmaps/from-yaml`, {
        headers: { accept: 'application/vnd.kubernetes.protobuf' },
      });
      const updated = await env().viaProxy(path, token, `/api/v1/namespaces/${ns()}/configmaps/from-yaml`, {
        method: 'PUT',
        headers: {
          'content-type': 'application/vnd.kubernetes.protobuf',
          accept: 'application/json',
        },
        body: encoded.body,
      });
      expect(updated.status).toBe(200);
      expect(updated.json).toMatchObject({ metadata: { name: 'from-yaml' }, data: { k: 'v' } });
    });
  });
});

interface ConfigMap {
  metadata: {
    name: string;
    annotations?: Record<string, string>;
    managedFields?: { manager: string; operation: string }[];
  };
  data?: Record<string, string>;
}

/** A long-running kubectl (a watch): its output so far, and a way to stop it. */
function spawnKubectl(kubeconfig: string, args: string[]) {
  const child = spawn(inject('kubectl'), ['--kubeconfig', kubeconfig, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    stop: () => child.kill(),
  };
}
