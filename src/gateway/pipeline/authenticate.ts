import { serviceUnavailable } from '../../api/status.ts';
import type { AuthenticationResult } from '../../identity/authenticate.ts';
import { AuthenticatorNotReady } from '../../identity/authenticator.ts';
import { MalformedAccessKey, parseAccessKey } from '../../identity/keys.ts';
import type { Auditor } from '../audit/auditor.ts';
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

/** What the stage needs of the authenticator (the cache-backed `AccessKeyAuthenticator`). */
export interface KeyAuthenticator {
  /** From the caches, or a read past them for a key they do not know yet. */
  authenticate(token: string): AuthenticationResult | Promise<AuthenticationResult>;
  /** From the caches alone: for callers whose recent failures keep them off the apiserver. */
  authenticateCached(token: string): AuthenticationResult;
  ready(): boolean;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The token of an `Authorization: Bearer` header; empty when there is none. */
export function bearerToken(header: string | string[] | undefined): string {
  const match = typeof header === 'string' ? BEARER.exec(header) : null;
  return match?.[1] ?? '';
}

/** The public id of a well-formed access key, for throttling and logs; never the secret. */
export function keyIdOf(token: string): string | undefined {
  const parsed = token === '' ? undefined : parseAccessKey(token);
  return parsed && !(parsed instanceof MalformedAccessKey) ? parsed.id : undefined;
}

export const notReady = () => serviceUnavailable('the gateway is starting: its caches are not synced yet');

/**
 * Who the token is. Synchronous in the common case (the caches know the key); a promise when a
 * read past the caches is needed. `cachedOnly` keeps the caller on the caches. Throws 503 while
 * the authenticator cannot decide yet.
 */
export function authenticateToken(
  authenticator: KeyAuthenticator,
  token: string,
  cachedOnly: boolean,
): AuthenticationResult | Promise<AuthenticationResult> {
  if (!authenticator.ready()) throw notReady();
  try {
    return cachedOnly ? authenticator.authenticateCached(token) : authenticator.authenticate(token);
  } catch (error) {
    if (error instanceof AuthenticatorNotReady) throw notReady();
    throw error;
  }
}

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
