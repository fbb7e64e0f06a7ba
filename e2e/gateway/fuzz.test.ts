import fc from 'fast-check';
import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/cluster.ts';
import { call, useGatewayEnv } from './support.ts';

/**
 * Fuzzing the gateway with fast-check against a real kube-apiserver (the run's host cluster, in
 * a namespace of its own): generated paths, methods, headers, bodies and JSON patches. Whatever
 * comes in, the answer is never a 5xx, every error is a `Status`, the process keeps serving, and a
 * refused patch leaves the object exactly as it was.
 */
describe('gateway: fuzzing', () => {
  const env = useGatewayEnv({ onHost: true });
  const namespace = uniqueName('fuzz');
  let admin: string;

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    admin = await env().user(uniqueName('fuzzer'), { admin: true });
    const created = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'target' }, spec: { data: { a: 'YQ==' }, description: 'd' } }),
    });
    expect(created.status).toBe(201);
  });

  const segment = fc.oneof(
    fc.constantFrom(
      'apis',
      'management.platform',
      'v1',
      'namespaces',
      namespace,
      'sharedsecrets',
      'ownedaccesskeys',
      'projects',
      'members',
      'configs',
      'status',
      'target',
      'users',
      'accesskeys',
      '..',
      '%2F',
      '%zz',
      '',
    ),
    fc.string({ maxLength: 12 }).map(encodeURIComponent),
  );
  const path = fc.array(segment, { minLength: 0, maxLength: 8 }).map((parts) => `/${parts.join('/')}`);
  const contentType = fc.constantFrom(
    'application/json',
    'application/yaml',
    'application/json-patch+json',
    'application/merge-patch+json',
    'application/apply-patch+yaml',
    'application/strategic-merge-patch+json',
    'text/plain',
    'application/json; charset=latin1',
  );
  const body = fc.oneof(
    fc.jsonValue().map((value) => JSON.stringify(value)),
    fc.string({ maxLength: 200 }),
    fc.constantFrom(
      'metadata: {name: x}\nspec: {data: {a: YQ==}}\n',
      '{"metadata":{"name":"Bad Name"}}',
      '[{"op":"add","path":"/spec/x","value":1}]',
      'a: &a [*a]',
      '{"a":',
    ),
  );

  const expectStatusShape = (answer: { status: number; json: unknown; text: string }) => {
    expect(answer.status, answer.text).toBeLessThan(500);
    if (answer.status >= 400)
      expect((answer.json as { kind?: string } | undefined)?.kind, answer.text).toBe('Status');
  };

  test('paths, methods, headers and bodies never give a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'),
        path,
        contentType,
        fc.option(body, { nil: undefined }),
        fc.constantFrom(
          'application/json',
          'application/yaml',
          '*/*',
          'text/html',
          'application/json;as=Table;v=v1;g=meta.k8s.io',
        ),
        async (method, suffix, type, payload, accept) => {
          const url = `${env().base}${suffix.startsWith('/apis') ? suffix : `/apis/management.platform/v1/namespaces/${namespace}${suffix}`}`;
          const answer = await call(url, {
            method,
            token: admin,
            headers: { 'Content-Type': type, Accept: accept },
            ...(payload !== undefined && method !== 'GET' ? { body: payload } : {}),
          });
          if (accept !== 'application/yaml') expectStatusShape(answer);
          else expect(answer.status).toBeLessThan(500);
        },
      ),
      { numRuns: 150 },
    );
  });

  test('JSON patches: applied whole or not at all', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets/target`;
    const op = fc.record({
      op: fc.constantFrom('add', 'remove', 'replace', 'move', 'copy', 'test'),
      path: fc.constantFrom(
        '/spec/description',
        '/spec/data/a',
        '/spec/data/b',
        '/spec/nothing/x',
        '/metadata/labels',
        '/spec/access',
        '/spec/data',
      ),
      from: fc.constantFrom('/spec/description', '/spec/data/a', '/spec/missing'),
      value: fc.oneof(
        fc.string({ maxLength: 8 }),
        fc.constant({}),
        fc.constant('YQ=='),
        fc.integer(),
        fc.constant([{ verbs: ['get'] }]),
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 4 }), async (operations) => {
        const before = await call(url, { token: admin });
        const answer = await call(url, {
          method: 'PATCH',
          token: admin,
          headers: { 'Content-Type': 'application/json-patch+json' },
          body: JSON.stringify(operations),
        });
        expectStatusShape(answer);
        const after = await call(url, { token: admin });
        if (answer.status >= 400) {
          expect(after.json.metadata.resourceVersion).toBe(before.json.metadata.resourceVersion);
          expect(after.json.spec).toEqual(before.json.spec);
        } else {
          expect(after.json.spec).toEqual(answer.json.spec);
        }
      }),
      { numRuns: 60 },
    );
  });

  test('headers: any Authorization and Accept, still never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 90 }), fc.string({ maxLength: 40 }), async (token, accept) => {
        const clean = (text: string) => text.replace(/[^\x20-\x7e]/g, '');
        const answer = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
          headers: { Authorization: clean(`Bearer ${token}`), Accept: clean(accept) || '*/*' },
        });
        expect(answer.status).toBeLessThan(500);
        expect(answer.json?.kind).toBe('Status');
      }),
      { numRuns: 60 },
    );
    expect((await call(`${env().server.url}/healthz`)).status).toBe(200);
  });
});
