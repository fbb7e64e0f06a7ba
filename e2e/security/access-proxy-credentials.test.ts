import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../src/api/config.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import {
  auditDirText,
  type ResponseBytes,
  rawRequest,
  untilProxyAudited,
  useAccessProxyEnv,
} from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { CLUSTER, connectCluster, PROJECT_NAMESPACE, VIRTUAL_CLUSTER } from '../support/proxy-targets.ts';

/**
 * Issue 26: the credentials the platform holds for a target (the token in its credentials Secret)
 * never appear in an answer (body or headers), an error, a log line or an audit event. Requests of
 * every outcome go through the proxy: served, refused by the target's RBAC, by the scope, by the
 * path grammar, for impersonation headers, for a bad key, watches, and targets that fail (a
 * credential the target refuses, an unreachable endpoint, a missing Secret). The gateway logs at
 * debug level into memory and writes its audit log at RequestResponse level; both, and every
 * answer, are searched for each credential, as it is, base64-encoded, and for its signature part.
 */
describe('security: the targets’ credentials never leave the platform', () => {
  const lines: string[] = [];
  const env = useAccessProxyEnv({
    gateway: {
      logger: pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) }),
    },
  });
  const auditDir = mkdtempSync(join(tmpdir(), 'access-proxy-audit-'));
  const person = uniqueName('cora');
  const credentials: string[] = [];
  /** A Secret's value on the target, which the person may read: never in an audit event. */
  const secretValue = `db-password-${randomBytes(12).toString('hex')}`;
  const answers: Array<[string, ResponseBytes]> = [];
  let allowed: string;
  let scoped: string;

  beforeAll(async () => {
    const g = env().gateway;
    await g.core.createNamespacedSecret({
      namespace: g.platformNamespace,
      body: {
        metadata: { name: PLATFORM_CONFIG_SECRET },
        stringData: {
          [PLATFORM_CONFIG_KEY]: `audit:\n  enabled: true\n  path: ${auditDir}/audit.log\n  policy:\n    rules: [{level: RequestResponse}]\n`,
        },
      },
    });
    const read = async (namespace: string, name: string) =>
      Buffer.from(
        (await g.core.readNamespacedSecret({ namespace, name })).data?.token ?? '',
        'base64',
      ).toString();
    credentials.push(await read(g.platformNamespace, `${CLUSTER}-credentials`));
    credentials.push(await read(PROJECT_NAMESPACE, `${VIRTUAL_CLUSTER}-credentials`));
    const refusedToken = `refused-${randomBytes(16).toString('hex')}`;
    const unreachableToken = `unreachable-${randomBytes(16).toString('hex')}`;
    credentials.push(refusedToken, unreachableToken);
    await connectCluster(g, {
      name: 'refused',
      endpoint: env().connected.server,
      caPem: env().connected.caPem,
      credentials: { token: refusedToken },
    });
    await connectCluster(g, {
      name: 'unreachable',
      endpoint: `https://127.0.0.1:${await freePort()}`,
      caPem: env().connected.caPem,
      credentials: { token: unreachableToken },
    });
    await connectCluster(g, {
      name: 'nosecret',
      endpoint: env().connected.server,
      caPem: env().connected.caPem,
    });
    await env().grant('cluster', person);
    await env().grant('virtualcluster', person);
    await env()
      .admin('cluster')
      .request({
        method: 'POST',
        path: '/api/v1/namespaces/work/secrets',
        body: { metadata: { name: 'db' }, stringData: { password: secretValue } },
      });
    allowed = await env().keyFor(person);
    scoped = await env().keyFor(person, { clusters: [{ cluster: CLUSTER }] });
    await untilProxyAudited(env(), allowed, auditDir);
  });

  afterAll(() => rmSync(auditDir, { recursive: true, force: true }));

  const auditText = () => auditDirText(auditDir);

  /** Each credential as it is, base64-encoded, and (a JWT) its signature alone. */
  const needles = () =>
    credentials.flatMap((credential) => {
      const signature = credential.split('.')[2];
      return [credential, Buffer.from(credential).toString('base64'), ...(signature ? [signature] : [])];
    });

  const leaks = (text: string) => needles().filter((needle) => text.includes(needle)).length;

  async function ask(what: string, path: string, token: string, init: Parameters<typeof rawRequest>[2] = {}) {
    const answer = await rawRequest(`${env().gateway.server.url}${path}`, env().gateway.dispatcher, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...init.headers },
    });
    answers.push([what, answer]);
    return answer;
  }

  test('no answer of any outcome holds a credential', async () => {
    const edge = `/kubernetes/cluster/${CLUSTER}`;
    const expectations: Array<[string, string, string, number[], Record<string, string>?]> = [
      ['served', `${edge}/api/v1/namespaces/work/configmaps`, allowed, [200]],
      [
        'virtual cluster',
        `/kubernetes/project/web/virtualcluster/${VIRTUAL_CLUSTER}/api/v1/namespaces/work/configmaps`,
        allowed,
        [200],
      ],
      ['target RBAC', `${edge}/api/v1/namespaces/kube-system/secrets`, allowed, [403]],
      ['target RBAC, cluster-wide', `${edge}/api/v1/secrets`, allowed, [403]],
      ['unknown cluster', '/kubernetes/cluster/nowhere/api/v1/namespaces', allowed, [404]],
      ['scope', '/kubernetes/cluster/refused/api/v1/namespaces', scoped, [403]],
      ['grammar', `${edge}/api%2Fv1/namespaces`, allowed, [400]],
      [
        'impersonation header',
        `${edge}/api/v1/namespaces/work/configmaps`,
        allowed,
        [403],
        { 'Impersonate-User': 'admin' },
      ],
      ['bad key', `${edge}/api/v1/namespaces/work/configmaps`, `${allowed}x`, [401]],
      [
        'refused credential',
        '/kubernetes/cluster/refused/api/v1/namespaces/work/configmaps',
        allowed,
        [502, 503],
      ],
      [
        'unreachable',
        '/kubernetes/cluster/unreachable/api/v1/namespaces/work/configmaps',
        allowed,
        [502, 503],
      ],
      [
        'missing Secret',
        '/kubernetes/cluster/nosecret/api/v1/namespaces/work/configmaps',
        allowed,
        [502, 503],
      ],
      ['watch', `${edge}/api/v1/namespaces/work/configmaps?watch=1&timeoutSeconds=1`, allowed, [200]],
      ['discovery', `${edge}/apis`, allowed, [200]],
      ['a Secret read', `${edge}/api/v1/namespaces/work/secrets/db`, allowed, [200]],
      ['Secrets listed', `${edge}/api/v1/namespaces/work/secrets`, allowed, [200]],
    ];
    for (const [what, path, token, statuses, headers] of expectations) {
      const answer = await ask(what, path, token, headers ? { headers } : {});
      expect(statuses, `${what}: ${answer.status} ${answer.body.toString().slice(0, 300)}`).toContain(
        answer.status,
      );
      if (answer.status >= 400) expect(answer.json?.kind, what).toBe('Status');
    }
    // A Secret written through the proxy: its data goes in the request body.
    const created = await ask('a Secret created', `${edge}/api/v1/namespaces/work/secrets`, allowed, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'db-made' }, stringData: { password: secretValue } }),
    });
    expect(created.status, created.body.toString()).toBe(201);
    // The failing targets are named in their Status, with a reason.
    for (const [what, answer] of answers.filter(([, a]) => a.status === 502 || a.status === 503))
      expect(answer.json?.message, what).toMatch(/refused|unreachable|nosecret/);
    // Who the target sees: the person, never the platform's identity.
    const review = await ask(
      'who am I',
      `${edge}/apis/authentication.k8s.io/v1/selfsubjectreviews`,
      allowed,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      },
    );
    expect(review.status).toBe(201);
    expect(review.json.status.userInfo.username).toBe(person);
    for (const [what, answer] of answers) {
      const text = `${answer.body.toString('utf8')}\n${JSON.stringify(Object.fromEntries(answer.headers as unknown as Iterable<[string, string]>))}`;
      expect(leaks(text), `${what}: a credential in the answer`).toBe(0);
    }
  });

  test('no log line and no audit event holds a credential', () => {
    expect(credentials.every((credential) => credential.length > 20)).toBe(true);
    expect(lines.length, 'the gateway logged nothing').toBeGreaterThan(0);
    expect(leaks(lines.join('')), 'a credential in the gateway’s log').toBe(0);
    const audit = auditText();
    expect(audit).toContain('/kubernetes/cluster/refused/');
    expect(leaks(audit), 'a credential in the audit log').toBe(0);
    // Secrets the person read and wrote through the proxy are audited at most at Metadata level.
    expect(audit).toContain('/api/v1/namespaces/work/secrets/db');
    const events = audit
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { verb?: string; requestURI?: string });
    expect(events.some((e) => e.verb === 'create' && e.requestURI?.endsWith('/work/secrets'))).toBe(true);
    for (const value of [secretValue, Buffer.from(secretValue).toString('base64')])
      expect(audit, 'a Secret’s data in the audit log').not.toContain(value);
  });
});
