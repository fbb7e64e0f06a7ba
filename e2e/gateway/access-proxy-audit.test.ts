import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../src/api/config.ts';
import { TARGET_ANNOTATIONS } from '../../src/gateway/audit/event.ts';
import { auditDirText, rawRequest, untilProxyAudited, useAccessProxyEnv } from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { CLUSTER, PROJECT, VIRTUAL_CLUSTER } from '../support/proxy-targets.ts';
import { eventually } from '../support/wait.ts';

/**
 * Issue 26, audit: requests through the access proxy are audited with their request target and
 * cluster, so a policy's rules naming `clusters` and `requestTargets` match them, and their events
 * say where they went. The policy here logs the connected cluster at RequestResponse, the project's
 * virtual cluster at Request, and nothing else (spaces and the management API included): the
 * events written show the rules matched exactly those requests. Proxied events are Metadata at
 * most whatever the rule says (bodies pass through undecoded), so a Secret read and a body written
 * through the proxy never reach the log.
 */
describe('access proxy: audit events name the target and cluster, and hold no body', () => {
  const env = useAccessProxyEnv();
  const auditDir = mkdtempSync(join(tmpdir(), 'access-proxy-audit-'));
  const person = uniqueName('auditee');
  const secretValue = `s3cret-${randomBytes(12).toString('hex')}`;
  const bodyMarker = `marker-${randomBytes(12).toString('hex')}`;
  let token: string;

  beforeAll(async () => {
    const g = env().gateway;
    const policy = [
      'audit:',
      '  enabled: true',
      `  path: ${auditDir}/audit.log`,
      '  policy:',
      '    omitStages: [RequestReceived]',
      '    rules:',
      `      - {level: RequestResponse, clusters: [${CLUSTER}]}`,
      '      - {level: Request, requestTargets: [ProjectVCluster]}',
      '      - {level: None}',
    ].join('\n');
    await g.core.createNamespacedSecret({
      namespace: g.platformNamespace,
      body: {
        metadata: { name: PLATFORM_CONFIG_SECRET },
        stringData: { [PLATFORM_CONFIG_KEY]: `${policy}\n` },
      },
    });
    for (const path of ['cluster', 'virtualcluster', 'space'] as const) await env().grant(path, person);
    token = await env().keyFor(person);
    await env()
      .admin('cluster')
      .request({
        method: 'POST',
        path: '/api/v1/namespaces/work/secrets',
        body: { metadata: { name: 'db' }, stringData: { password: secretValue } },
      });
    await untilProxyAudited(env(), token, auditDir);
  });

  afterAll(() => rmSync(auditDir, { recursive: true, force: true }));

  const auditText = () => auditDirText(auditDir);

  // biome-ignore lint/suspicious/noExplicitAny: audit events as written
  function eventsAbout(uriPart: string): any[] {
    return auditText()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
      .filter((event) => String(event.requestURI).includes(uriPart));
  }

  test('a cluster request is logged by the rule naming its cluster, with its target and cluster', async () => {
    const answer = await env().viaProxy('cluster', token, '/api/v1/namespaces/work/configmaps?limit=7');
    expect(answer.status).toBe(200);
    const uri = '/api/v1/namespaces/work/configmaps?limit=7';
    await eventually(() => eventsAbout(uri).length > 0, 30_000, 'the cluster request’s event');
    const [event] = eventsAbout(uri);
    expect(event).toMatchObject({
      level: 'Metadata',
      stage: 'ResponseComplete',
      verb: 'list',
      objectRef: { resource: 'configmaps', namespace: 'work' },
      responseStatus: { code: 200 },
      annotations: { [TARGET_ANNOTATIONS.requestTarget]: 'Cluster', [TARGET_ANNOTATIONS.cluster]: CLUSTER },
    });
    expect(event.user.username).toBe(person);
    expect(event.responseObject).toBeUndefined();
  });

  test('a Secret read and a body written through the proxy are Metadata, without their content', async () => {
    const read = await env().viaProxy('cluster', token, '/api/v1/namespaces/work/secrets/db');
    expect(read.status).toBe(200);
    expect(read.body.toString()).toContain(Buffer.from(secretValue).toString('base64'));
    const written = await env().viaProxy('cluster', token, '/api/v1/namespaces/work/configmaps', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name: uniqueName('audited') }, data: { note: bodyMarker } }),
    });
    expect(written.status).toBe(201);
    const secretRead = () => eventsAbout('/secrets/db');
    const created = () =>
      eventsAbout('/api/v1/namespaces/work/configmaps').filter((e) => e.verb === 'create');
    await eventually(
      () => secretRead().length > 0 && created().length > 0,
      30_000,
      'the events of the Secret read and the create',
    );
    const events = [...secretRead(), ...created()];
    for (const event of events) {
      expect(event.level).toBe('Metadata');
      expect(event.requestObject).toBeUndefined();
      expect(event.responseObject).toBeUndefined();
    }
    const text = auditText();
    expect(text).not.toContain(secretValue);
    expect(text).not.toContain(Buffer.from(secretValue).toString('base64'));
    expect(text).not.toContain(bodyMarker);
  });

  test('a virtual cluster request matches its request target; spaces and the management API match no rule', async () => {
    const marker = randomBytes(4).toString('hex');
    const configMaps = (path: 'virtualcluster' | 'space' | 'cluster') =>
      `/api/v1/namespaces/${env().target(path).namespace}/configmaps?limit=1&marker=${marker}`;
    expect((await env().viaProxy('virtualcluster', token, configMaps('virtualcluster'))).status).toBe(200);
    expect((await env().viaProxy('space', token, configMaps('space'))).status).toBe(200);
    const management = await rawRequest(
      `${env().gateway.api}/users?marker=${marker}`,
      env().gateway.dispatcher,
      {
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect(management.status).not.toBe(401);
    // Events are written in order: once this last request's is there, the others were judged.
    expect((await env().viaProxy('cluster', token, configMaps('cluster'))).status).toBe(200);
    const last = (event: { requestURI: string }) =>
      event.requestURI.startsWith(`/kubernetes/cluster/${CLUSTER}/`);
    await eventually(() => eventsAbout(marker).some(last), 30_000, 'the last request’s event');
    const events = eventsAbout(marker);
    expect(events.map((e) => e.annotations[TARGET_ANNOTATIONS.requestTarget])).toEqual([
      'ProjectVCluster',
      'Cluster',
    ]);
    expect(events[0]).toMatchObject({
      level: 'Metadata',
      annotations: {
        [TARGET_ANNOTATIONS.project]: PROJECT,
        [TARGET_ANNOTATIONS.virtualCluster]: VIRTUAL_CLUSTER,
      },
    });
  });
});
