import type { AuthenticationResult } from '../../identity/authenticate.ts';
import type { Auditor } from '../audit/auditor.ts';
import { authenticateToken, bearerToken, type KeyAuthenticator } from '../key-authentication.ts';
import { auditInfo } from './audit.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';
import type { Throttle } from './throttle.ts';

/**
 * The authenticate stage: the request's bearer access key to an identity, from the informer
 * caches (a read past them for a key they do not know yet). Whether a failure becomes 401 or 429
 * is the throttle stage's decision; whether the caller is judged on the caches alone (recent
 * failures) too.
 */

/** Whether a routed request is authenticated: everything but endpoints served without a key (unknown paths too). */
export function needsKey(routed: Routed): boolean {
  if (routed.kind !== 'endpoint') return true;
  const { authentication } = routed.endpoint;
  return (typeof authentication === 'function' ? authentication() : authentication) !== 'none';
}

export interface AuthenticateDeps {
  readonly authenticator: KeyAuthenticator;
  readonly throttle: Pick<Throttle, 'cachedOnly' | 'refusal'>;
  readonly auditor: Pick<Auditor, 'failedAuthentication'>;
}

/**
 * authenticate → throttle for one request: the caller's identity into the exchange, or the
 * refusal thrown (401, or 429 once the source or the key id failed too often; counted by the
 * throttle) after a failed-authentication audit event. Synchronous (undefined) when the caches
 * decided and the key is valid: the common case costs no promise.
 */
export function authenticateExchange(deps: AuthenticateDeps, exchange: Exchange): Promise<void> | undefined {
  const token = bearerToken(exchange.request.headers.authorization);
  const result = authenticateToken(
    deps.authenticator,
    token,
    deps.throttle.cachedOnly(exchange.source, token),
  );
  if (result instanceof Promise) return result.then((settled) => conclude(deps, exchange, settled));
  return conclude(deps, exchange, result);
}

function conclude(
  deps: AuthenticateDeps,
  exchange: Exchange,
  result: AuthenticationResult,
): Promise<void> | undefined {
  if (result.ok) {
    exchange.identity = result.identity;
    return undefined;
  }
  return deps.throttle.refusal(exchange.source, result.failure, result.keyId).then((refusal) => {
    deps.auditor.failedAuthentication(auditInfo(exchange), {
      code: refusal.code,
      status: 'Failure',
      message: refusal.message,
      reason: refusal.reason,
      annotations: { 'authentication.platform/failure': result.failure.name },
    });
    throw refusal;
  });
}
