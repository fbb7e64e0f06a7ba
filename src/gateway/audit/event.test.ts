import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { recordWithPrototypeKeys } from '../../../test-support/prototype-keys.ts';
import { AUDIT_LEVELS } from '../../api/config-audit.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { generateAccessKey } from '../../identity/keys.ts';
import { Auditor } from './auditor.ts';
import {
  type AuditRequestInfo,
  buildAuditEvent,
  capLevel,
  redactBody,
  serializeAuditEvent,
} from './event.ts';

const attributes = (over: Partial<RequestAttributes>): RequestAttributes => ({
  target: 'Management',
  verb: 'get',
  resourceRequest: true,
  apiGroup: 'management.platform',
  resource: 'sharedsecrets',
  subresource: '',
  name: 'x',
  namespace: 'default',
  path: '/apis/management.platform/v1/namespaces/default/sharedsecrets/x',
  ...over,
});

const info = (over: Partial<RequestAttributes>): AuditRequestInfo => ({
  auditID: 'id',
  requestURI: '/kubernetes/management/apis/management.platform/v1/x',
  attributes: attributes(over),
  user: { username: 'alice', groups: ['platform:authenticated'] },
  sourceIPs: ['127.0.0.1'],
  requestReceivedTimestamp: '2026-01-01T00:00:00.000000Z',
});

const KEY = generateAccessKey((n) => new Uint8Array(n).fill(9)).key;
const SECRET = KEY.slice(21);
const CONNECTOR = 'connector-secret-data';
const DATA = 'c3VwZXItc2VjcmV0';

const keyObject = {
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name: 'k' },
  spec: {
    user: 'alice',
    key: KEY,
    identity: { connector: 'oidc', connectorData: CONNECTOR },
    oidcLogin: { refreshToken: 'rt-secret' },
  },
};
const secretObject = {
  apiVersion: 'management.platform/v1',
  kind: 'SharedSecret',
  metadata: { name: 's' },
  spec: { data: { password: DATA } },
};

describe('audit events', () => {
  test('the shape of an audit.k8s.io/v1 Event', () => {
    const event = buildAuditEvent(info({}), 'Metadata', 'ResponseComplete', '2026-01-01T00:00:01.000000Z', {
      code: 200,
    });
    expect(event).toEqual({
      kind: 'Event',
      apiVersion: 'audit.k8s.io/v1',
      level: 'Metadata',
      auditID: 'id',
      stage: 'ResponseComplete',
      requestURI: '/kubernetes/management/apis/management.platform/v1/x',
      verb: 'get',
      user: { username: 'alice', groups: ['platform:authenticated'] },
      sourceIPs: ['127.0.0.1'],
      objectRef: {
        resource: 'sharedsecrets',
        namespace: 'default',
        name: 'x',
        apiGroup: 'management.platform',
        apiVersion: 'v1',
      },
      responseStatus: { metadata: {}, code: 200 },
      requestReceivedTimestamp: '2026-01-01T00:00:00.000000Z',
      stageTimestamp: '2026-01-01T00:00:01.000000Z',
    });
  });

  test('creates of access keys and shared secrets, kubeconfigs, tokens and configs are Metadata at most', () => {
    for (const over of [
      { verb: 'create', resource: 'ownedaccesskeys', name: '' },
      { verb: 'create', resource: 'sharedsecrets', name: '' },
      { verb: 'create', resource: 'virtualclusterinstances', subresource: 'kubeconfig' },
      { verb: 'create', resource: 'directclusterendpointtokens', name: '' },
      { verb: 'get', resource: 'configs' },
    ]) {
      expect(capLevel(attributes(over), 'RequestResponse')).toBe('Metadata');
      expect(capLevel(attributes(over), 'None')).toBe('None');
    }
    expect(capLevel(attributes({ verb: 'update' }), 'RequestResponse')).toBe('RequestResponse');
  });

  test('no secret in a line whatever the keys are named (`__proto__`, `constructor`, ... in data and spec)', () => {
    // A request body is logged before the apiserver validates it: its keys are anything.
    const data = recordWithPrototypeKeys(fc.constant(DATA));
    // Besides the prototype names, keys that no redaction takes out (a random one could be `key`).
    const spec = recordWithPrototypeKeys(fc.constant('other'), { otherKeys: fc.constantFrom('note', 'x-y') });
    fc.assert(
      fc.property(data, spec, fc.constantFrom('create', 'update', 'patch'), (secretData, extraSpec, verb) => {
        for (const [resource, body] of [
          ['sharedsecrets', { ...secretObject, spec: { ...extraSpec, data: secretData } }],
          ['ownedaccesskeys', { ...keyObject, spec: { ...extraSpec, ...keyObject.spec } }],
        ] as const) {
          const request = info({ verb, resource });
          const line = serializeAuditEvent(
            buildAuditEvent(JSON.parse(JSON.stringify(request)), 'RequestResponse', 'ResponseComplete', 't', {
              code: 200,
              requestObject: JSON.parse(JSON.stringify(body)),
            }),
          );
          for (const secret of [DATA, SECRET, CONNECTOR, 'rt-secret']) expect(line).not.toContain(secret);
          const logged = JSON.parse(line).requestObject.spec;
          // Every key is still there, named as it was: only values are taken out.
          const keys = resource === 'sharedsecrets' ? Object.keys(logged.data) : Object.keys(logged);
          const sent = resource === 'sharedsecrets' ? Object.keys(secretData) : Object.keys(extraSpec);
          expect(keys).toEqual(expect.arrayContaining(sent));
        }
      }),
    );
  });

  test('JSON patch operations on shared secrets and access keys keep op and path, not the value (docs/audit.md)', () => {
    const patch = [
      { op: 'add', path: '/spec/data/x', value: DATA },
      { op: 'remove', path: '/spec/data/y' },
      { op: 'replace', path: '/spec/key', value: KEY },
    ];
    for (const resource of ['sharedsecrets', 'ownedaccesskeys'])
      expect(redactBody(info({ verb: 'patch', resource }).attributes, patch), resource).toEqual([
        { op: 'add', path: '/spec/data/x', value: '[redacted]' },
        { op: 'remove', path: '/spec/data/y' },
        { op: 'replace', path: '/spec/key', value: '[redacted]' },
      ]);
  });

  test('no secret in any line at any level', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...AUDIT_LEVELS),
        fc.constantFrom('create', 'update', 'patch', 'get', 'list', 'watch'),
        fc.constantFrom('ownedaccesskeys', 'sharedsecrets', 'users'),
        fc.constantFrom<unknown>(
          keyObject,
          secretObject,
          { kind: 'OwnedAccessKeyList', items: [keyObject] },
          { kind: 'SharedSecretList', items: [secretObject] },
          { type: 'MODIFIED', object: keyObject },
          { kind: 'UserAccessKeys', accessKeys: [keyObject] },
          [{ op: 'add', path: '/spec/data/x', value: DATA }],
          { note: `a key pasted somewhere: ${KEY}` },
        ),
        (level, verb, resource, body) => {
          const request = info({ verb, resource });
          const line = serializeAuditEvent(
            buildAuditEvent(request, capLevel(request.attributes, level), 'ResponseComplete', 't', {
              code: 200,
              requestObject: body,
              responseObject: body,
            }),
          );
          expect(line).not.toContain(SECRET);
          expect(line).not.toContain(CONNECTOR);
          expect(line).not.toContain('rt-secret');
          // Shared secret data: in any SharedSecret, and in any body of a sharedsecrets request.
          if (resource === 'sharedsecrets' || JSON.stringify(body).includes('"SharedSecret')) {
            expect(line).not.toContain(DATA);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  test('the auditor writes one line per stage, follows the policy, and logs failed authentications', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auditor-'));
    const path = join(dir, 'audit.log');
    const auditor = new Auditor();
    auditor.configure({
      enabled: true,
      path,
      maxSize: 100,
      policy: {
        rules: [
          { level: 'None', users: ['bob'] },
          { level: 'RequestResponse', omitStages: ['RequestReceived'] },
        ],
      },
    });
    auditor
      .begin(info({ verb: 'update' }), secretObject)
      ?.complete({ code: 200, responseObject: secretObject });
    auditor.begin({ ...info({}), user: { username: 'bob', groups: [] } })?.complete({ code: 200 });
    auditor.failedAuthentication(
      { ...info({}), user: { username: 'system:anonymous', groups: ['system:unauthenticated'] } },
      {
        code: 401,
        status: 'Failure',
        reason: 'Unauthorized',
      },
    );
    await auditor.close();
    const lines = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((entry) => JSON.parse(entry));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ level: 'RequestResponse', stage: 'ResponseComplete', verb: 'update' });
    expect(lines[0].requestObject.spec.data.password).toBe('[redacted]');
    expect(lines[1]).toMatchObject({
      stage: 'ResponseComplete',
      responseStatus: { code: 401 },
      user: { username: 'system:anonymous' },
    });
  });
});
