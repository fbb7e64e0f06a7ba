import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { LAST_APPLIED_ANNOTATION } from '../../src/api/ownedaccesskey.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { uniqueName } from '../support/cluster.ts';
import { type Answer, call, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * Fuzzing the gateway with fast-check against a real kube-apiserver (the run's host cluster, in
 * a namespace of its own): generated paths, methods, headers, bodies and JSON patches; arbitrary
 * query parameters (`watch` with any value, `timeoutSeconds`, `dryRun`, label and field
 * selectors, `resourceVersion`, `limit`/`continue`, raw query strings) on reads, watches and
 * writes; concurrent writes, by a platform admin (the impersonating proxy) and by a key's owner
 * (the gateway's checked write). Whatever comes in, the answer is never a 5xx, every error is a
 * `Status`, the process keeps serving, a write lands whole or not at all (the object is unchanged
 * or equal to exactly one valid full write), and no answer (objects, lists, tables, YAML, watch
 * streams) ever carries a key's secret: a plaintext key, one in the last-applied annotation,
 * `spec.identity.connectorData` or `spec.oidcLogin` tokens. Watches end after a second (the
 * gateway's cap), so that each can be read whole.
 */
interface Stored {
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
}

describe('gateway: fuzzing', () => {
  const env = useGatewayEnv({
    onHost: true,
    gateway: { watchLimits: { perIdentity: 200, maxTimeoutSeconds: 1 } },
  });
  const namespace = uniqueName('fuzz');
  let admin: string;
  let adminKeyId: string;
  /** A non-admin whose own key carries every secret the API must never show. */
  let owner: string;
  let ownerKey: string;
  let ownerName: string;
  const run = randomBytes(4).toString('hex');
  const SECRETS = {
    connectorData: `connector-data-${run}`,
    idToken: `id-token-${run}`,
    accessToken: `access-token-${run}`,
    refreshToken: `refresh-token-${run}`,
    applied: generateAccessKey((size) => randomBytes(size)).key,
  };
  /** Never in any answer: the secrets above and the secret parts of the callers' keys. */
  let forbidden: string[] = [];
  const raw = () => new KubeClient(env().kc);
  const b64 = (text: string) => Buffer.from(text).toString('base64');

  const storedSecret = (name: string) =>
    raw().request<Stored>({
      method: 'GET',
      path: `/apis/${GROUP_VERSION}/namespaces/${namespace}/sharedsecrets/${name}`,
    });
  /** The stored access key of the owner, read past the gateway. */
  const storedOwnerKey = () =>
    raw().request<Stored>({ method: 'GET', path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${ownerKey}` });

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    admin = await env().user(uniqueName('fuzzer'), { admin: true });
    ownerName = uniqueName('owner');
    owner = await env().user(ownerName);
    const adminIdentity = await env().gateway.authenticator.authenticate(admin);
    const ownerIdentity = await env().gateway.authenticator.authenticate(owner);
    if (!adminIdentity.ok || !ownerIdentity.ok) throw new Error('the fuzzers are not authenticated');
    adminKeyId = adminIdentity.identity.accessKey.id;
    ownerKey = ownerIdentity.identity.accessKey.name;
    // What a login leaves in a key: kept by the platform, never shown through the API.
    await raw().request({
      method: 'PATCH',
      path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${ownerKey}`,
      contentType: 'application/merge-patch+json',
      body: {
        metadata: {
          annotations: {
            [LAST_APPLIED_ANNOTATION]: JSON.stringify({
              apiVersion: GROUP_VERSION,
              kind: 'OwnedAccessKey',
              metadata: { name: ownerKey },
              spec: { user: ownerName, key: SECRETS.applied },
            }),
          },
        },
        spec: {
          displayName: 'initial',
          description: 'initial',
          identity: { connector: 'oidc', connectorData: SECRETS.connectorData, groups: ['developers'] },
          oidcLogin: {
            idToken: SECRETS.idToken,
            accessToken: SECRETS.accessToken,
            refreshToken: SECRETS.refreshToken,
          },
        },
      },
    });
    forbidden = [...Object.values(SECRETS), admin.slice(21), owner.slice(21)];
    const created = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'target' }, spec: { data: { a: 'YQ==' }, description: 'd' } }),
    });
    expect(created.status).toBe(201);
  });

  /** The answer's text, and for YAML its values as JSON too (a long string may be folded). */
  const readable = (answer: Answer) => {
    if (answer.json !== undefined) return answer.text;
    try {
      return `${answer.text}\n${JSON.stringify(parseYaml(answer.text))}`;
    } catch {
      return answer.text;
    }
  };

  /** No 5xx, no secret; an error in JSON is a Status. */
  const expectClean = (answer: Answer, what: string) => {
    expect(answer.status, `${what}: ${answer.text.slice(0, 500)}`).toBeLessThan(500);
    const text = readable(answer);
    for (const secret of forbidden) expect(text.includes(secret), `${what} shows a secret`).toBe(false);
    if (answer.status >= 400 && answer.json !== undefined)
      expect((answer.json as { kind?: string }).kind, `${what}: ${answer.text.slice(0, 500)}`).toBe('Status');
  };

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
          expectClean(answer, `${method} ${suffix}`);
          if (accept !== 'application/yaml') expectStatusShape(answer);
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

  // Query parameters: each with values that mean something to kube-apiserver, and anything else.
  const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ maxLength: 8, unit: 'binary' }));
  const number = (max: number) => fc.integer({ min: -2, max }).map(String);
  const param = (name: string, value: fc.Arbitrary<string>) => value.map((v) => [name, v] as const);
  const queryParam = fc.oneof(
    {
      weight: 3,
      arbitrary: param(
        'watch',
        fc.oneof(fc.constantFrom('true', '1', 'yes', 'TRUE', 'false', 'False', '0', ''), text),
      ),
    },
    {
      weight: 2,
      arbitrary: param(
        'timeoutSeconds',
        fc.oneof(fc.constantFrom('0', '1', '3600', '-1', '1.5', 'x', ''), number(100_000)),
      ),
    },
    param('dryRun', fc.oneof(fc.constantFrom('All', 'all', 'None', ''), text)),
    param(
      'labelSelector',
      fc.oneof(
        fc.constantFrom('a=b', 'a!=b', 'a in (x,y)', '!a', 'a', 'a==', '=b', 'a in (', 'a,b=c', 'x/y=z'),
        text,
      ),
    ),
    param(
      'fieldSelector',
      fc.oneof(
        fc.constantFrom(
          'metadata.name=target',
          'metadata.name!=x',
          'spec.user=x',
          'spec.team=x',
          'metadata.namespace=default',
          'x=y',
          '=',
          'metadata.name',
          'spec.user=a,spec.user!=b',
        ),
        text,
      ),
    ),
    // Resource versions of the past or none (one ahead of the store makes kube-apiserver itself
    // wait and answer 504 "Too large resource version": not the gateway's to change).
    param(
      'resourceVersion',
      fc.oneof(
        fc.constantFrom('', '0', '1', 'x', '-1', '0x10', '1e3'),
        text.filter((t) => !/^\d+$/.test(t)),
      ),
    ),
    param('resourceVersionMatch', fc.oneof(fc.constantFrom('NotOlderThan', 'Exact', ''), text)),
    param('limit', fc.oneof(fc.constantFrom('0', '1', '2', '-1', 'x', ''), number(50))),
    param(
      'continue',
      fc.oneof(
        fc.constantFrom('', 'x', 'eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0'),
        fc.base64String({ maxLength: 40 }),
        text,
      ),
    ),
    param('pretty', fc.constantFrom('true', '1', 'false', 'x')),
    param('allowWatchBookmarks', fc.constantFrom('true', 'false', 'x')),
    param('sendInitialEvents', fc.constantFrom('true', 'false', 'x')),
    param('includeObject', fc.constantFrom('Object', 'Metadata', 'None', 'x')),
    param('fieldManager', fc.oneof(fc.constantFrom('fuzz', ''), text)),
    param('fieldValidation', fc.constantFrom('Strict', 'Warn', 'Ignore', 'x', '')),
    fc.tuple(text, text),
  );
  /** A query string of encoded parameters (read alike by the gateway and by kube-apiserver). */
  const encodedQuery = fc.array(queryParam, { maxLength: 6 }).map((params) => {
    const search = new URLSearchParams(params.map(([name, value]) => [name, value]));
    return search.size > 0 ? `?${search.toString()}` : '';
  });
  /**
   * A query string: encoded parameters, or raw bytes that parse differently (`;`, bad escapes).
   * No raw `resourceVersion`: its digits could name a version ahead of the store.
   */
  const query = fc.oneof(
    { weight: 4, arbitrary: encodedQuery },
    fc
      .array(
        fc.constantFrom(
          'watch',
          'timeoutSeconds',
          'dryRun',
          '=',
          '&',
          ';',
          '%',
          '%zz',
          '%3D',
          '%26',
          '+',
          '0',
          '1',
          'false',
          'true',
          'All',
          'pretty',
        ),
        { maxLength: 10 },
      )
      .map((parts) => `?${parts.join('')}`),
  );
  const accept = fc.constantFrom(
    'application/json',
    'application/yaml',
    '*/*',
    'application/json;as=Table;v=v1;g=meta.k8s.io',
    'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
    'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io',
    'application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io',
    'text/html;q=0.9, application/json;q=0.5',
  );

  test('reads and watches with arbitrary query parameters: no 5xx, no secret in any answer', async () => {
    const readPaths = () => [
      `${env().api}/ownedaccesskeys`,
      `${env().api}/ownedaccesskeys/${ownerKey}`,
      `${env().api}/ownedaccesskeys/${ownerKey}/status`,
      `${env().api}/users/${ownerName}/accesskeys`,
      `${env().api}/namespaces/${namespace}/sharedsecrets`,
      `${env().api}/namespaces/${namespace}/sharedsecrets/target`,
      `${env().api}/sharedsecrets`,
    ];
    const read = fc.record({
      path: fc.nat({ max: 6 }),
      query,
      accept,
      caller: fc.constantFrom('admin', 'owner'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(read, { minLength: 1, maxLength: 6 }), async (reads) => {
        // At once: each watch lasts until the gateway's cap.
        const answers = await Promise.all(
          reads.map(async ({ path, query, accept, caller }) => {
            const url = `${readPaths()[path]}${query}`;
            const answer = await call(url, {
              token: caller === 'admin' ? admin : owner,
              headers: { Accept: accept },
            });
            return { answer, what: `${caller} GET ${url} (${accept})`, caller };
          }),
        );
        for (const { answer, what, caller } of answers) {
          expectClean(answer, what);
          // An owner sees its own keys only: never another's, whatever the selectors say.
          if (caller === 'owner')
            expect(answer.text.includes(adminKeyId), `${what} shows another's key`).toBe(false);
        }
      }),
      { numRuns: 40 },
    );
    // Every shape was seen: the owner's key (with its secrets) is in the answers.
    const listed = await call(`${env().api}/ownedaccesskeys?watch=yes&timeoutSeconds=1`, { token: owner });
    expect(listed.text).toContain(ownerKey);
    expectClean(listed, 'the owner watching its keys');
  });

  test('writes with arbitrary query parameters: dry runs change nothing, refusals change nothing', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets/dry`;
    const created = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'dry' }, spec: { data: { a: 'YQ==' }, description: 'd' } }),
    });
    expect(created.status).toBe(201);
    // Encoded queries only: a raw one may mean a dry run to one reader and not to another
    // (kube-apiserver drops pairs with `;`), and the oracle below needs to know.
    const write = fc.record({
      caller: fc.constantFrom('admin', 'owner'),
      target: fc.constantFrom('secret', 'key'),
      method: fc.constantFrom('PATCH', 'PATCH', 'PUT', 'DELETE'),
      query: encodedQuery,
      description: fc.string({ maxLength: 10 }),
    });
    /** The target as stored (read past the gateway), undefined once deleted. */
    const stored = (target: 'secret' | 'key') =>
      target === 'key'
        ? storedOwnerKey()
        : raw()
            .request<Stored>({
              method: 'GET',
              path: `/apis/${GROUP_VERSION}/namespaces/${namespace}/sharedsecrets/dry`,
            })
            .catch(() => undefined);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(write, async ({ caller, target: chosen, method, query, description }) => {
        const token = caller === 'admin' ? admin : owner;
        // The owner writes its key. A key is never deleted here (its owner would be locked out of
        // the rest), nor replaced by an admin with what the admin read (the redacted object
        // would drop the secrets the other tests look for).
        const target = caller === 'owner' ? 'key' : chosen;
        const verb =
          target === 'key' && (method === 'DELETE' || (caller === 'admin' && method === 'PUT'))
            ? 'PATCH'
            : method;
        const path = target === 'secret' ? url : `${env().api}/ownedaccesskeys/${ownerKey}`;
        const before = await stored(target);
        const value = `${description}-${n++}`;
        // A PUT sends back what the caller read through the gateway, with a new description.
        const seen = verb === 'PUT' ? (await call(path, { token })).json : undefined;
        const body =
          verb === 'PATCH'
            ? JSON.stringify({ spec: { description: value } })
            : verb === 'PUT'
              ? JSON.stringify({ ...seen, spec: { ...seen?.spec, description: value } })
              : undefined;
        const answer = await call(`${path}${query}`, {
          method: verb,
          token,
          headers: { 'Content-Type': verb === 'PATCH' ? 'application/merge-patch+json' : 'application/json' },
          ...(body !== undefined ? { body } : {}),
        });
        const what = `${caller} ${verb} ${path}${query}`;
        expectClean(answer, what);
        const after = await stored(target);
        const dryRun = new URLSearchParams(query.slice(1)).has('dryRun');
        if (answer.status >= 400 || dryRun) {
          // Refused, or only tried: the object is as it was (the gateway may record a key's use
          // in its status meanwhile, so a key is compared by what a write could change).
          const state = (object: Stored | undefined) =>
            target === 'secret'
              ? object?.metadata.resourceVersion
              : { spec: object?.spec, annotations: object?.metadata.annotations };
          expect(state(after), what).toEqual(state(before));
        } else if (verb === 'DELETE') {
          expect(after, what).toBeUndefined();
        } else {
          expect(after?.spec.description, what).toBe(value);
        }
        if (after === undefined) {
          const again = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
            method: 'POST',
            token: admin,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
              metadata: { name: 'dry' },
              spec: { data: { a: 'YQ==' }, description: 'd' },
            }),
          });
          expect(again.status).toBe(201);
        }
      }),
      { numRuns: 60 },
    );
    // The owner's secrets are all still there: no write through the gateway dropped them.
    const kept = JSON.stringify(await storedOwnerKey());
    expect(kept).toContain(SECRETS.connectorData);
    expect(kept).toContain(SECRETS.refreshToken);
  });

  /** A full write of candidate `i`: every field it sets carries `i`, so a mix of two is visible. */
  const secretWrite = fc.record({
    kind: fc.constantFrom(
      'put',
      'merge',
      'json',
      'apply',
      'stale-put',
      'failing-json',
      'invalid',
      'strategic',
    ),
    dryRun: fc.boolean(),
    fieldValidation: fc.constantFrom(undefined, 'Strict', 'Warn', 'Ignore'),
  });

  test('concurrent writes by an admin: the object is as it was or exactly one full write', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets/raced`;
    const initial = { data: { a: b64('initial'), b: b64('initial') }, description: 'initial' };
    const created = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'raced' }, spec: initial }),
    });
    expect(created.status).toBe(201);
    const written = (spec: { data?: unknown; description?: unknown }) => ({
      data: spec.data,
      description: spec.description,
    });
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(secretWrite, { minLength: 2, maxLength: 6 }), async (writes) => {
        round++;
        const current = await storedSecret('raced');
        const before = written(current.spec);
        const full = (i: number) => {
          const value = `r${round}-${i}`;
          return { data: { a: b64(value), b: b64(value) }, description: value };
        };
        const answers = await Promise.all(
          writes.map(async ({ kind, dryRun, fieldValidation }, i) => {
            const spec = full(i);
            const query = new URLSearchParams();
            if (dryRun) query.set('dryRun', 'All');
            if (fieldValidation) query.set('fieldValidation', fieldValidation);
            const send = (
              method: string,
              contentType: string,
              body: unknown,
              extra: Record<string, string> = {},
            ) => {
              for (const [name, value] of Object.entries(extra)) query.set(name, value);
              return call(`${url}${query.size > 0 ? `?${query.toString()}` : ''}`, {
                method,
                token: admin,
                headers: { 'Content-Type': contentType },
                body: typeof body === 'string' ? body : JSON.stringify(body),
              });
            };
            const object = {
              apiVersion: GROUP_VERSION,
              kind: 'SharedSecret',
              metadata: { name: 'raced', namespace },
            };
            switch (kind) {
              case 'put':
                // As read at the start: only the first write to land can be this one.
                return send('PUT', 'application/json', {
                  ...object,
                  metadata: { ...object.metadata, resourceVersion: current.metadata.resourceVersion },
                  spec,
                });
              case 'stale-put':
                return send('PUT', 'application/json', {
                  ...object,
                  metadata: { ...object.metadata, resourceVersion: '1' },
                  spec,
                });
              case 'merge':
                return send('PATCH', 'application/merge-patch+json', { spec });
              case 'json':
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'replace', path: '/spec/data', value: spec.data },
                  { op: 'replace', path: '/spec/description', value: spec.description },
                ]);
              case 'apply':
                return send(
                  'PATCH',
                  'application/apply-patch+yaml',
                  { ...object, spec },
                  { fieldManager: 'fuzz', force: 'true' },
                );
              case 'failing-json':
                // The first operations alone would be a full write; the last one fails them all.
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'replace', path: '/spec/data', value: spec.data },
                  { op: 'replace', path: '/spec/description', value: spec.description },
                  { op: 'test', path: '/spec/description', value: 'never' },
                ]);
              case 'invalid':
                // A valid description with data that is not base64: refused whole.
                return send('PATCH', 'application/merge-patch+json', {
                  spec: { description: spec.description, data: { a: '%%%' } },
                });
              default:
                return send('PATCH', 'application/strategic-merge-patch+json', { spec });
            }
          }),
        );
        const landed = new Set<string>();
        answers.forEach((answer, i) => {
          const { kind, dryRun } = writes[i]!;
          expectClean(answer, `${kind} write ${i}`);
          if (answer.status < 300) {
            // What the answer shows is the write whole, never part of it.
            expect(written(answer.json.spec), `${kind} write ${i}`).toEqual(full(i));
            if (!dryRun) landed.add(JSON.stringify(full(i)));
          }
          if (kind === 'stale-put' || kind === 'failing-json' || kind === 'invalid' || kind === 'strategic')
            expect(answer.status, `${kind} write ${i}: ${answer.text}`).toBeGreaterThanOrEqual(400);
        });
        const after = written((await storedSecret('raced')).spec);
        if (landed.size === 0) expect(after).toEqual(before);
        else expect(landed, `the stored spec ${JSON.stringify(after)}`).toContain(JSON.stringify(after));
      }),
      { numRuns: 20 },
    );
  });

  /** A write of its own key by its owner: full writes, writes that fail, and hostile ones. */
  const ownWrite = fc.record({
    kind: fc.constantFrom(
      'merge',
      'json',
      'put',
      'failing-json',
      'copy-groups',
      'add-groups',
      'identity',
      'drop-identity',
      'type',
    ),
    dryRun: fc.boolean(),
  });

  test("concurrent writes of an owner's key: one full write or none; identity, groups and secrets never change", async () => {
    const url = `${env().api}/ownedaccesskeys/${ownerKey}`;
    const fixed = (spec: Record<string, unknown>) => ({
      identity: spec.identity,
      groups: spec.groups,
      oidcLogin: spec.oidcLogin,
      scope: spec.scope,
      type: spec.type,
      user: spec.user,
      keyHash: spec.keyHash,
    });
    const named = (spec: Record<string, unknown>) => ({
      displayName: spec.displayName,
      description: spec.description,
    });
    const initial = await storedOwnerKey();
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(ownWrite, { minLength: 2, maxLength: 6 }), async (writes) => {
        round++;
        const before = await storedOwnerKey();
        // What the owner reads (redacted), for its PUTs.
        const seen = (await call(url, { token: owner })).json;
        const full = (i: number) => ({ displayName: `r${round}-${i}`, description: `r${round}-${i}` });
        const answers = await Promise.all(
          writes.map(({ kind, dryRun }, i) => {
            const send = (method: string, contentType: string, body: unknown) =>
              call(`${url}${dryRun ? '?dryRun=All' : ''}`, {
                method,
                token: owner,
                headers: { 'Content-Type': contentType },
                body: JSON.stringify(body),
              });
            const names = full(i);
            switch (kind) {
              case 'merge':
                return send('PATCH', 'application/merge-patch+json', { spec: names });
              case 'json':
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'replace', path: '/spec/displayName', value: names.displayName },
                  { op: 'replace', path: '/spec/description', value: names.description },
                ]);
              case 'put':
                // What the owner read lacks connectorData: storing it would change the identity.
                return send('PUT', 'application/json', { ...seen, spec: { ...seen.spec, ...names } });
              case 'failing-json':
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'replace', path: '/spec/displayName', value: names.displayName },
                  { op: 'replace', path: '/spec/description', value: names.description },
                  { op: 'test', path: '/spec/displayName', value: 'never' },
                ]);
              case 'copy-groups':
                // Hole 1 of issue 16: the identity's groups copied into the key's own.
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'copy', from: '/spec/identity/groups', path: '/spec/groups' },
                  { op: 'replace', path: '/spec/displayName', value: names.displayName },
                  { op: 'replace', path: '/spec/description', value: names.description },
                ]);
              case 'add-groups':
                return send('PATCH', 'application/merge-patch+json', { spec: { ...names, groups: ['ops'] } });
              case 'identity':
                return send('PATCH', 'application/merge-patch+json', {
                  spec: { ...names, identity: { groups: ['ops'] } },
                });
              case 'drop-identity':
                return send('PATCH', 'application/json-patch+json', [
                  { op: 'remove', path: '/spec/identity' },
                  { op: 'replace', path: '/spec/displayName', value: names.displayName },
                  { op: 'replace', path: '/spec/description', value: names.description },
                ]);
              default:
                return send('PATCH', 'application/merge-patch+json', { spec: { ...names, type: 'Login' } });
            }
          }),
        );
        const landed = new Set<string>();
        answers.forEach((answer, i) => {
          const { kind, dryRun } = writes[i]!;
          expectClean(answer, `${kind} write ${i}`);
          const allowed = kind === 'merge' || kind === 'json';
          if (!allowed)
            expect(answer.status, `${kind} write ${i}: ${answer.text}`).toBeGreaterThanOrEqual(400);
          if (answer.status < 300) {
            expect(named(answer.json.spec), `${kind} write ${i}`).toEqual(full(i));
            if (!dryRun) landed.add(JSON.stringify(full(i)));
          }
        });
        const after = await storedOwnerKey();
        expect(fixed(after.spec)).toEqual(fixed(initial.spec));
        expect(after.metadata.annotations?.[LAST_APPLIED_ANNOTATION]).toContain(SECRETS.applied);
        if (landed.size === 0) expect(named(after.spec)).toEqual(named(before.spec));
        else expect(landed).toContain(JSON.stringify(named(after.spec)));
      }),
      { numRuns: 20 },
    );
  });
});
