// biome-ignore-all lint/suspicious/noExplicitAny: the tests read audit events as JSON
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { call, GROUP_VERSION, reviewToken, useGatewayEnv } from '../gateway/support.ts';
import { eventually } from '../support/wait.ts';

/**
 * docs/audit.md, "`level`: built-in policies": before the level's rules, built-in rules never log
 * direct cluster endpoint tokens and kubeconfig retrievals, and log only metadata for the creation
 * of access keys, shared secrets and clusters and for TokenReviews, even at level 4 (every request
 * with its bodies); a request that fails authentication is logged all the same, at Metadata. Against a
 * kube-apiserver of its own with the platform's admission and a gateway writing its audit log.
 */
describe('audit: the built-in rules before the level', () => {
  const env = useGatewayEnv({ https: true });
  const auditPath = join(mkdtempSync(join(tmpdir(), 'audit-built-in-')), 'audit.log');
  let admin: string;

  const lines = (): any[] =>
    existsSync(auditPath)
      ? readFileSync(auditPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line))
      : [];
  const post = (path: string, body: unknown) =>
    call(`${env().api}${path}`, {
      method: 'POST',
      token: admin,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  const completed = (resource: string) =>
    lines().filter((line) => line.stage === 'ResponseComplete' && line.objectRef?.resource === resource);

  beforeAll(async () => {
    admin = await env().user('root', { admin: true });
    const configured = await post('/configs', {
      apiVersion: GROUP_VERSION,
      kind: 'Config',
      metadata: { name: 'config' },
      spec: { raw: `audit:\n  enabled: true\n  path: ${auditPath}\n  level: 4\n` },
    });
    expect(configured.status, configured.text).toBe(201);
    // The gateway applies the configuration from its informer: reads are logged once it has.
    await eventually(
      async () => {
        await call(`${env().api}/namespaces/default/sharedsecrets`, {
          token: admin,
          dispatcher: env().dispatcher,
        });
        return completed('sharedsecrets').length > 0;
      },
      30_000,
      'the gateway to write its audit log',
    );
  });

  test('level 4 logs a read with its response body (the level is in effect)', () => {
    const [read] = completed('sharedsecrets');
    expect(read).toMatchObject({ level: 'RequestResponse', verb: 'list' });
    expect(read.responseObject).toMatchObject({ kind: 'SharedSecretList' });
  });

  test('a watch is logged when its stream starts and when it ends', async () => {
    const watch = await call(`${env().api}/namespaces/default/sharedsecrets?watch=true&timeoutSeconds=1`, {
      token: admin,
      dispatcher: env().dispatcher,
    });
    expect(watch.status, watch.text).toBe(200);
    const stages = () =>
      lines()
        .filter((line) => line.verb === 'watch' && line.objectRef?.resource === 'sharedsecrets')
        .map((line) => line.stage);
    await eventually(() => stages().includes('ResponseComplete'), 30_000, 'the watch to be logged');
    expect(stages()).toEqual(['RequestReceived', 'ResponseStarted', 'ResponseComplete']);
  });

  test('direct cluster endpoint tokens are never logged', async () => {
    const minted = await post('/directclusterendpointtokens', {
      apiVersion: GROUP_VERSION,
      kind: 'DirectClusterEndpointToken',
      spec: { ttl: 600 },
    });
    expect(minted.status, minted.text).toBe(201);
    // A request after it is logged, so the token's would be there by now.
    await call(`${env().api}/namespaces/default/sharedsecrets/after-token`, {
      token: admin,
      dispatcher: env().dispatcher,
    });
    await eventually(
      () => lines().some((line) => line.objectRef?.name === 'after-token'),
      30_000,
      'the later request in the log',
    );
    expect(lines().filter((line) => line.objectRef?.resource === 'directclusterendpointtokens')).toEqual([]);
    expect(readFileSync(auditPath, 'utf8')).not.toContain(minted.json.status.token);
  });

  test('creating a shared secret or a cluster, and a TokenReview, are Metadata only', async () => {
    const secret = await post('/namespaces/default/sharedsecrets', {
      apiVersion: GROUP_VERSION,
      kind: 'SharedSecret',
      metadata: { name: 'audited' },
      spec: { description: 'logged only as metadata' },
    });
    expect(secret.status, secret.text).toBe(201);
    const cluster = await post('/clusters', {
      apiVersion: GROUP_VERSION,
      kind: 'Cluster',
      metadata: { name: 'edge' },
      spec: { displayName: 'logged only as metadata' },
    });
    expect(cluster.status, cluster.text).toBe(201);
    const reviewer = await env().reviewer({ cluster: 'edge' });
    const review = await reviewToken(env(), admin, reviewer);
    expect(review.status, review.text).toBe(200);

    await eventually(
      () =>
        ['sharedsecrets', 'clusters', 'tokenreviews'].every((r) =>
          completed(r).some((l) => l.verb === 'create'),
        ),
      30_000,
      'the three creates in the log',
    );
    for (const resource of ['sharedsecrets', 'clusters', 'tokenreviews']) {
      const create = completed(resource).find((line) => line.verb === 'create');
      expect(create.level, resource).toBe('Metadata');
      expect(create.requestObject, resource).toBeUndefined();
      expect(create.responseObject, resource).toBeUndefined();
    }
    expect(readFileSync(auditPath, 'utf8')).not.toContain('logged only as metadata');
  });

  test('creating an access key is Metadata only; a kubeconfig retrieval is never logged', async () => {
    const key = await post('/ownedaccesskeys', {
      apiVersion: GROUP_VERSION,
      kind: 'OwnedAccessKey',
      metadata: { name: 'audited-key' },
      spec: { displayName: 'a key logged only as metadata', ttl: 600 },
    });
    expect(key.status, key.text).toBe(201);
    // Asked of an instance that does not exist: a kubeconfig retrieval all the same.
    const kubeconfig = await post('/namespaces/default/virtualclusterinstances/absent/kubeconfig', {});
    expect(kubeconfig.status, kubeconfig.text).toBe(404);
    await call(`${env().api}/namespaces/default/sharedsecrets/after-kubeconfig`, {
      token: admin,
      dispatcher: env().dispatcher,
    });
    await eventually(
      () =>
        completed('ownedaccesskeys').some((line) => line.verb === 'create') &&
        lines().some((line) => line.objectRef?.name === 'after-kubeconfig'),
      30_000,
      'the key create and the later request in the log',
    );
    const create = completed('ownedaccesskeys').find((line) => line.verb === 'create');
    expect(create.level).toBe('Metadata');
    expect(create.requestObject).toBeUndefined();
    expect(create.responseObject).toBeUndefined();
    const log = readFileSync(auditPath, 'utf8');
    expect(log).not.toContain('a key logged only as metadata');
    expect(log).not.toContain(key.json.spec.key);
    expect(lines().filter((line) => String(line.requestURI).includes('/kubeconfig'))).toEqual([]);
  });

  test('a request that fails authentication is logged, at Metadata, even where the rule says None', async () => {
    const refused = await call(`${env().api}/directclusterendpointtokens`, {
      method: 'POST',
      token: 'pak_aaaaaaaaaaaaaaaa_not-a-real-key',
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ apiVersion: GROUP_VERSION, kind: 'DirectClusterEndpointToken', spec: {} }),
    });
    expect(refused.status, refused.text).toBe(401);
    const logged = () =>
      lines().filter(
        (line) =>
          line.stage === 'ResponseComplete' &&
          String(line.requestURI).endsWith('/directclusterendpointtokens') &&
          line.user?.username === 'system:anonymous',
      );
    await eventually(() => logged().length > 0, 30_000, 'the refused request in the log');
    expect(logged()).toEqual([
      expect.objectContaining({ level: 'Metadata', responseStatus: expect.objectContaining({ code: 401 }) }),
    ]);
    expect(logged()[0].requestObject).toBeUndefined();
  });
});
