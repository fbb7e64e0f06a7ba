import type { AuthenticatedIdentity, AuthenticationResult } from '../../identity/authenticate.ts';
import { authenticateToken, bearerToken, type KeyAuthenticator } from '../key-authentication.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';
import type { Throttle } from './throttle.ts';

/**
 * The authenticate stage: the request's bearer access key to an identity, from the informer
 * caches (a read past them for a key they do not know yet). A failure is returned, not answered:
 * whether it becomes 401 or 429 is the throttle stage's decision (as whether the caller is judged
 * on the caches alone), and the audit stage records it.
 */

/** Whether a routed request is authenticated: everything but endpoints served without a key (unknown paths too). */
export function needsKey(routed: Routed): boolean {
  if (routed.kind !== 'endpoint') return true;
  const { authentication } = routed.endpoint;
  return (typeof authentication === 'function' ? authentication() : authentication) !== 'none';
}

export interface AuthenticateDeps {
  readonly authenticator: KeyAuthenticator;
  /** Whether the caller is judged on the caches alone (its source or key id failed recently). */
  readonly throttle: Pick<Throttle, 'cachedOnly'>;
}

/** Why a request's key was not accepted (its public id when it had one), for the throttle and audit stages. */
export type FailedAuthentication = Extract<AuthenticationResult, { ok: false }>;

/**
 * The caller's identity, or the failure (for the throttle stage to count and answer, and the audit
 * stage to record). Synchronous when the caches decided: the common case costs no promise.
 */
export function authenticateExchange(
  deps: AuthenticateDeps,
  exchange: Exchange,
): Authenticated | Promise<Authenticated> {
  const token = bearerToken(exchange.request.headers.authorization);
  const result = authenticateToken(
    deps.authenticator,
    token,
    deps.throttle.cachedOnly(exchange.source, token),
  );
  if (result instanceof Promise) return result.then(conclude);
  return conclude(result);
}

/** What the authenticate stage adds: the caller, or why its key was not accepted. */
export type Authenticated =
  | { readonly identity: AuthenticatedIdentity; readonly failed?: undefined }
  | { readonly identity?: undefined; readonly failed: FailedAuthentication };

function conclude(result: AuthenticationResult): Authenticated {
  return result.ok ? { identity: result.identity } : { failed: result };
}
