import { randomUUID } from 'node:crypto';
import type { StatusError } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import type { AuthenticatedIdentity, AuthenticationFailure } from '../../identity/authenticate.ts';
import { keyUserInfo } from '../../identity/user-info.ts';
import { formatMicroTime } from '../../runtime/clock.ts';
import type { Auditor, AuditRecord } from '../audit/auditor.ts';
import { ANONYMOUS_USER, type AuditRequestInfo } from '../audit/event.ts';
import { nonResourceAttributes } from '../paths.ts';
import type { Exchange } from './exchange.ts';

/**
 * The audit stage: starts the request's audit record (when an audit log is configured and the
 * policy logs it) and returns it, for encode to complete. Bodies of sensitive endpoints (keys, tokens, kubeconfigs, the platform config,
 * logins) never reach it.
 */
export function beginAudit(
  auditor: Pick<Auditor, 'enabled' | 'begin'>,
  exchange: Exchange,
  received: AuditedRequest & { readonly requestObject?: unknown; readonly sensitive: boolean },
): AuditRecord | undefined {
  if (!auditor.enabled) return undefined;
  const requestObject = received.sensitive ? undefined : received.requestObject;
  return auditor.begin(auditInfo(exchange, received), requestObject);
}

/** What the stages before audit established about a request: its attributes, its caller. */
export interface AuditedRequest {
  readonly attributes: RequestAttributes | undefined;
  readonly identity: AuthenticatedIdentity | undefined;
}

/**
 * The audit stage for a request whose key was not accepted: a failed-authentication event (every
 * policy records it) with the refusal the caller gets and the failure's name, never the token.
 */
export function auditFailedAuthentication(
  auditor: Pick<Auditor, 'failedAuthentication'>,
  exchange: Exchange,
  attributes: RequestAttributes | undefined,
  refusal: StatusError,
  failure: AuthenticationFailure,
): void {
  auditor.failedAuthentication(auditInfo(exchange, { attributes, identity: undefined }), {
    code: refusal.code,
    status: 'Failure',
    message: refusal.message,
    reason: refusal.reason,
    annotations: { 'authentication.platform/failure': failure.name },
  });
}

/** The request side of the request's audit events. */
export function auditInfo(exchange: Exchange, { attributes, identity }: AuditedRequest): AuditRequestInfo {
  const userAgent = exchange.request.headers['user-agent'];
  return {
    auditID: randomUUID(),
    requestURI: exchange.request.url ?? '',
    attributes: attributes ?? nonResourceAttributes(exchange.method, exchange.path),
    user: identity ? keyUserInfo(identity) : ANONYMOUS_USER,
    sourceIPs: [exchange.source],
    ...(userAgent ? { userAgent } : {}),
    requestReceivedTimestamp: formatMicroTime(exchange.receivedAt),
  };
}
