import { serviceUnavailable } from '../api/status.ts';
import type { AuthenticationResult } from '../identity/authenticate.ts';
import { AuthenticatorNotReady } from '../identity/authenticator.ts';
import { MalformedAccessKey, parseAccessKey } from '../identity/keys.ts';

/**
 * A bearer access key to an identity, as the gateway reads one: from the request's
 * `Authorization` header (the authenticate stage) or from a TokenReview (the webhook endpoint).
 */

/** What the gateway needs of the authenticator (the cache-backed `AccessKeyAuthenticator`). */
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

const notReady = () => serviceUnavailable('the gateway is starting: its caches are not synced yet');

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
