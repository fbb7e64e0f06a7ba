import { cliPublicKey } from './cli-handoff.ts';
import { INTERACTION_UID as OIDC_INTERACTION_UID } from './oidc-provider/clients.ts';
import { loopbackReturn } from './pages.ts';

/**
 * What a sign-in carries from page to page in the query: the `platform login` it is for (`cli`,
 * `return`) and the OpenID provider's interaction (`oidc`), each only when well formed.
 */

/** A sign-in for `platform login`: its public key, and its loopback listener when the browser is local. */
export interface CliRequest {
  readonly key: string;
  readonly returnTo?: string | undefined;
}

/** The `platform login` a URL's query names (`cli`, `return`), when its key is well formed. */
export function cliRequestOf(query: URLSearchParams): CliRequest | undefined {
  const key = cliPublicKey(query.get('cli'));
  if (!key) return undefined;
  const returnTo = loopbackReturn(query.get('return'))?.toString();
  return { key, ...(returnTo ? { returnTo } : {}) };
}

/** The OpenID provider's interaction a URL's query names (`oidc`), when it is well formed. */
export function oidcInteractionOf(query: URLSearchParams): string | undefined {
  const uid = query.get('oidc');
  return uid && OIDC_INTERACTION_UID.test(uid) ? uid : undefined;
}

/** The query carrying a `platform login` or an OpenID provider's interaction on to the next page. */
export function cliQuery(cli: CliRequest | undefined, oidc?: string): URLSearchParams {
  const query = new URLSearchParams();
  if (cli) query.set('cli', cli.key);
  if (cli?.returnTo) query.set('return', cli.returnTo);
  if (oidc) query.set('oidc', oidc);
  return query;
}
