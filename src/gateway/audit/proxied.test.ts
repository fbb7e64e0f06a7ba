import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { AuditPolicyRule } from '../../api/config-audit.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { Auditor } from './auditor.ts';
import { type AuditRequestInfo, capLevel, TARGET_ANNOTATIONS, targetAnnotations } from './event.ts';

/**
 * Audit of requests through the access proxy (issue 26): their events say where they went (the
 * request target as policies spell it, the cluster), so policy rules naming `requestTargets` and
 * `clusters` match them; they never carry a body (the proxy passes bodies undecoded), and a core
 * Secret is Metadata at most wherever it goes.
 */

const podsOf = (over: Partial<RequestAttributes>): RequestAttributes => ({
  target: 'Cluster',
  cluster: 'prod',
  verb: 'get',
  resourceRequest: true,
  apiGroup: '',
  resource: 'pods',
  subresource: '',
  name: 'web',
  namespace: 'shop',
  path: '/api/v1/namespaces/shop/pods/web',
  ...over,
});

const requestOf = (attributes: RequestAttributes): AuditRequestInfo => ({
  auditID: 'id',
  requestURI: '/kubernetes/cluster/prod/api/v1/namespaces/shop/pods/web',
  attributes,
  user: { username: 'alice', groups: ['platform:authenticated'] },
  sourceIPs: ['192.0.2.1'],
  requestReceivedTimestamp: '2026-01-01T00:00:00.000000Z',
});

const CREDENTIAL = 'target-credential-token-0123456789';
const secret = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'platform-credentials', namespace: 'shop' },
  data: { token: Buffer.from(CREDENTIAL).toString('base64') },
};

/** Audits each request with `rules` and returns the events written, one per line. */
async function audited(
  rules: AuditPolicyRule[],
  requests: readonly { attributes: RequestAttributes; body?: unknown; response?: unknown }[],
): Promise<{ lines: Record<string, unknown>[]; text: string }> {
  const path = join(mkdtempSync(join(tmpdir(), 'audit-proxied-')), 'audit.log');
  const auditor = new Auditor();
  auditor.configure({ enabled: true, path, maxSize: 100, policy: { rules } });
  for (const { attributes, body, response } of requests) {
    auditor
      .begin(requestOf(attributes), body)
      ?.complete({ code: 200, ...(response !== undefined ? { responseObject: response } : {}) });
  }
  await auditor.close();
  const text = readFileSync(path, 'utf8');
  return {
    text,
    lines: text
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line)),
  };
}

describe('audit of requests through the access proxy', () => {
  test('each target is named as policies spell it, with its cluster, project, space or virtual cluster', () => {
    expect(targetAnnotations(podsOf({}))).toEqual({
      [TARGET_ANNOTATIONS.requestTarget]: 'Cluster',
      [TARGET_ANNOTATIONS.cluster]: 'prod',
    });
    const { cluster: _cluster, ...unclustered } = podsOf({});
    expect(
      targetAnnotations({
        ...unclustered,
        target: 'ProjectVirtualCluster',
        project: 'shop',
        virtualCluster: { name: 'dev', namespace: 'p-shop' },
      }),
    ).toEqual({
      [TARGET_ANNOTATIONS.requestTarget]: 'ProjectVCluster',
      [TARGET_ANNOTATIONS.project]: 'shop',
      [TARGET_ANNOTATIONS.virtualCluster]: 'dev',
    });
    expect(
      targetAnnotations({ ...unclustered, target: 'ProjectSpace', project: 'shop', space: 'p-shop' }),
    ).toEqual({
      [TARGET_ANNOTATIONS.requestTarget]: 'ProjectSpace',
      [TARGET_ANNOTATIONS.project]: 'shop',
      [TARGET_ANNOTATIONS.space]: 'p-shop',
    });
    // The management API's own requests, a cluster object's included, are as before.
    expect(targetAnnotations({ ...podsOf({}), target: 'Management' })).toEqual({});
  });

  test('rules naming clusters and request targets match proxied requests, and their events show it', async () => {
    const { lines } = await audited(
      [
        { level: 'Metadata', clusters: ['prod'], omitStages: ['RequestReceived'] },
        { level: 'Metadata', requestTargets: ['ProjectSpace'], omitStages: ['RequestReceived'] },
      ],
      [
        { attributes: podsOf({}) },
        { attributes: podsOf({ cluster: 'staging' }) },
        {
          attributes: {
            ...podsOf({}),
            cluster: undefined,
            target: 'ProjectSpace',
            project: 'shop',
            space: 'p-shop',
          },
        },
        { attributes: { ...podsOf({}), target: 'Management', cluster: undefined } },
      ],
    );
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      stage: 'ResponseComplete',
      verb: 'get',
      objectRef: { resource: 'pods', namespace: 'shop', name: 'web' },
      annotations: { [TARGET_ANNOTATIONS.requestTarget]: 'Cluster', [TARGET_ANNOTATIONS.cluster]: 'prod' },
    });
    expect(lines[1]).toMatchObject({
      annotations: {
        [TARGET_ANNOTATIONS.requestTarget]: 'ProjectSpace',
        [TARGET_ANNOTATIONS.space]: 'p-shop',
      },
    });
  });

  test('no proxied event carries a body, whatever the policy: Metadata at most', async () => {
    expect(capLevel(podsOf({}), 'RequestResponse')).toBe('Metadata');
    const { lines, text } = await audited(
      [{ level: 'RequestResponse' }],
      [{ attributes: podsOf({ verb: 'update' }), body: { kind: 'Pod' }, response: { kind: 'Pod' } }],
    );
    expect(lines.map((line) => line.level)).toEqual(['Metadata', 'Metadata']);
    expect(text).not.toContain('requestObject');
    expect(text).not.toContain('responseObject');
  });

  test('a core Secret is Metadata at most wherever it goes, and its data (a target credential) never appears', async () => {
    const secretRequest = podsOf({ resource: 'secrets', name: 'platform-credentials' });
    expect(capLevel({ ...secretRequest, target: 'Management' }, 'RequestResponse')).toBe('Metadata');
    const { lines, text } = await audited(
      [{ level: 'RequestResponse', resources: [{ group: '', resources: ['secrets'] }] }],
      [
        { attributes: secretRequest, body: secret, response: secret },
        {
          attributes: { ...secretRequest, target: 'Management', cluster: undefined },
          body: secret,
          response: secret,
        },
      ],
    );
    expect(lines).toHaveLength(4);
    expect(lines.every((line) => line.level === 'Metadata')).toBe(true);
    expect(text).not.toContain(CREDENTIAL);
    expect(text).not.toContain(secret.data.token);
  });
});
