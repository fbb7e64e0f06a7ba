import { randomUUID } from 'node:crypto';
import type { StatusError } from '../../api/status.ts';
import type { AuthenticationFailure } from '../../identity/authenticate.ts';
import { keyUserInfo } from '../../identity/user-info.ts';
import { formatMicroTime } from '../../runtime/clock.ts';
import type { Auditor } from '../audit/auditor.ts';
import { ANONYMOUS_USER, type AuditRequestInfo } from '../audit/event.ts';
import { nonResourceAttributes } from '../paths.ts';
import type { Exchange } from './exchange.ts';

/**
 * The audit stage: starts the request's audit record (when an audit log is configured and the
 * policy logs it). Bodies of sensitive endpoints (keys, tokens, kubeconfigs, the platform config,
 * logins) never reach it.
 */
export function beginAudit(
  auditor: Pick<Auditor, 'enabled' | 'begin'>,
  exchange: Exchange,
  received: { readonly requestObject?: unknown; readonly sensitive: boolean },
): void {
  if (!auditor.enabled) return;
  const requestObject = received.sensitive ? undefined : received.requestObject;
  exchange.audit = auditor.begin(auditInfo(exchange), requestObject);
}

/**
 * The audit stage for a request whose key was not accepted: a failed-authentication event (every
 * policy records it) with the refusal the caller gets and the failure's name, never the token.
 */
export function auditFailedAuthentication(
  auditor: Pick<Auditor, 'failedAuthentication'>,
  exchange: Exchange,
  refusal: StatusError,
  failure: AuthenticationFailure,
): void {
  auditor.failedAuthentication(auditInfo(exchange), {
    code: refusal.code,
    status: 'Failure',
    message: refusal.message,
    reason: refusal.reason,
    annotations: { 'authentication.platform/failure': failure.name },
  });
}

/** The request side of the request's audit events. */
export function auditInfo(exchange: Exchange): AuditRequestInfo {
  const userAgent = exchange.request.headers['user-agent'];
  return {
    auditID: randomUUID(),
    requestURI: exchange.request.url ?? '',
    attributes: exchange.attributes ?? nonResourceAttributes(exchange.method, exchange.path),
    user: exchange.identity ? keyUserInfo(exchange.identity) : ANONYMOUS_USER,
    sourceIPs: [exchange.source],
    ...(userAgent ? { userAgent } : {}),
    requestReceivedTimestamp: formatMicroTime(exchange.receivedAt),
  };
}
