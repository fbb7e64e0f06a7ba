import { describe, expect, test } from 'vitest';
import { testExchange, testIdentity } from '../../../test-support/gateway-exchange.ts';
import { unauthorized } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { InvalidAccessKey } from '../../identity/authenticate.ts';
import { ACCESS_KEY_EXTRA } from '../../identity/groups.ts';
import type { AuditRecord } from '../audit/auditor.ts';
import type { AuditOutcome, AuditRequestInfo } from '../audit/event.ts';
import { auditFailedAuthentication, auditInfo, beginAudit } from './audit.ts';

const created: RequestAttributes = {
  ...nonResourceRequest('create', ''),
  resourceRequest: true,
  apiGroup: 'management.platform',
  resource: 'sharedsecrets',
  namespace: 'p-web',
  path: '/apis/management.platform/v1/namespaces/p-web/sharedsecrets',
};

/** An auditor that records what the stage began. */
function auditor(enabled = true) {
  const begun: { request: AuditRequestInfo; requestObject: unknown }[] = [];
  const record: AuditRecord = { level: 'Request', responseStarted: () => {}, complete: () => {} };
  return {
    begun,
    record,
    enabled,
    begin: (request: AuditRequestInfo, requestObject?: unknown) => {
      begun.push({ request, requestObject });
      return record;
    },
  };
}

describe('the audit stage', () => {
  test('begins the record with the request object', () => {
    const audit = auditor();
    const exchange = testExchange({ method: 'POST' });
    const alice = { attributes: created, identity: testIdentity('alice') };
    const record = beginAudit(audit, exchange, {
      ...alice,
      requestObject: { spec: { data: { a: 'YQ==' } } },
      sensitive: false,
    });
    expect(record).toBe(audit.record);
    expect(audit.begun).toHaveLength(1);
    expect(audit.begun[0]?.requestObject).toEqual({ spec: { data: { a: 'YQ==' } } });
    expect(audit.begun[0]?.request.attributes).toBe(created);
  });

  test('bodies of sensitive endpoints (keys, tokens, kubeconfigs, logins) never reach it', () => {
    const audit = auditor();
    const exchange = testExchange({ method: 'POST' });
    const alice = { attributes: created, identity: testIdentity('alice') };
    beginAudit(audit, exchange, { ...alice, requestObject: { password: 'hunter2' }, sensitive: true });
    expect(audit.begun[0]?.requestObject).toBeUndefined();
    expect(JSON.stringify(audit.begun)).not.toContain('hunter2');
  });

  test('nothing when no audit log is configured', () => {
    const audit = auditor(false);
    const exchange = testExchange();
    const alice = { attributes: undefined, identity: testIdentity('alice') };
    expect(beginAudit(audit, exchange, { ...alice, sensitive: false })).toBeUndefined();
    expect(audit.begun).toEqual([]);
  });
});

describe('the audit stage for a key not accepted', () => {
  test('a failed-authentication event: the refusal, the failure, the source, anonymous; never the token', () => {
    const audited: { request: AuditRequestInfo; outcome: AuditOutcome }[] = [];
    const auditor = {
      failedAuthentication: (request: AuditRequestInfo, outcome: AuditOutcome) =>
        audited.push({ request, outcome }),
    };
    const token = 'pak_secret-that-must-not-be-audited';
    const exchange = testExchange({ headers: { authorization: `Bearer ${token}` } });
    auditFailedAuthentication(auditor, exchange, undefined, unauthorized(), new InvalidAccessKey());
    expect(audited).toHaveLength(1);
    expect(audited[0]?.request.sourceIPs).toEqual(['192.0.2.1']);
    expect(audited[0]?.request.user.username).toBe('system:anonymous');
    expect(audited[0]?.outcome).toMatchObject({
      code: 401,
      status: 'Failure',
      reason: 'Unauthorized',
      annotations: { 'authentication.platform/failure': 'InvalidAccessKey' },
    });
    expect(JSON.stringify(audited)).not.toContain(token);
  });
});

describe('the request side of audit events', () => {
  test('who, from where, with what, when', () => {
    const exchange = testExchange({
      method: 'POST',
      url: '/kubernetes/management/apis/management.platform/v1/namespaces/p-web/sharedsecrets?dryRun=All',
      headers: { 'user-agent': 'kubectl/v1.36.3' },
      source: '203.0.113.9',
    });
    const alice = { attributes: created, identity: testIdentity('alice') };
    const info = auditInfo(exchange, alice);
    expect(info).toMatchObject({
      requestURI:
        '/kubernetes/management/apis/management.platform/v1/namespaces/p-web/sharedsecrets?dryRun=All',
      attributes: created,
      sourceIPs: ['203.0.113.9'],
      userAgent: 'kubectl/v1.36.3',
      requestReceivedTimestamp: '2026-01-02T03:04:05.678000Z',
      user: {
        username: 'alice',
        uid: 'uid-alice',
        groups: ['platform:authenticated', 'platform:user:alice'],
        extra: { [ACCESS_KEY_EXTRA]: ['key-alice'] },
      },
    });
    expect(info.auditID).toMatch(/^[0-9a-f-]{36}$/);
    expect(auditInfo(exchange, alice).auditID).not.toBe(info.auditID);
  });

  test('before routing and authentication: the path as a non-resource request, anonymous', () => {
    const exchange = testExchange({ method: 'GET', url: '/kubernetes/management/version' });
    const info = auditInfo(exchange, { attributes: undefined, identity: undefined });
    expect(info.attributes).toEqual(nonResourceRequest('get', '/kubernetes/management/version'));
    expect(info.user).toEqual({ username: 'system:anonymous', groups: ['system:unauthenticated'] });
    expect(info).not.toHaveProperty('userAgent');
  });

  test('the user as the apiserver sees it: the key named in the extra, no uid when there is none', () => {
    const subject = { ...testIdentity('robot'), kind: 'Subject' as const, uid: undefined };
    const exchange = testExchange({ method: 'GET', url: '/kubernetes/management/version' });
    expect(auditInfo(exchange, { attributes: undefined, identity: subject }).user).toEqual({
      username: 'robot',
      groups: ['platform:authenticated', 'platform:user:robot'],
      extra: { [ACCESS_KEY_EXTRA]: ['key-robot'] },
    });
  });
});
