import { OidcConnector } from '../../../src/login/oidc.ts';
import type { SsoCallback, SsoConnector } from '../../../src/login/sso.ts';
import { ScriptedAgent } from './browse.ts';
import type { LoginEnv } from './login-env.ts';

/** A connector's start, which must be a redirect to the provider. */
export async function startRedirect(connector: SsoConnector): Promise<{ url: URL; transaction: unknown }> {
  const started = await connector.start();
  if (!('redirect' in started)) throw new Error(`connector ${connector.id} does not redirect`);
  return { url: started.redirect, transaction: started.transaction };
}

/** The callback as a redirect back brings it (OAuth/OIDC). */
export const viaUrl = (url: string | URL, source = '127.0.0.1'): SsoCallback => ({
  url: new URL(url),
  form: new URLSearchParams(),
  source,
});

/** The callback as a form post brings it (SAML, the key form). */
export const viaForm = (fields: Record<string, string>, source = '127.0.0.1'): SsoCallback => ({
  url: new URL('http://platform.invalid/'),
  form: new URLSearchParams(fields),
  source,
});

/**
 * `account` signs in at the test OpenID provider through the configured `oidc` connector, the
 * provider's pages answered by a scripted agent: what the connector makes of the callback (the
 * identity a sign-in hands the login service), or its refusal.
 */
export async function oidcSignIn(env: Pick<LoginEnv, 'config' | 'oidc' | 'oidcCallback'>, account: string) {
  const connector = new OidcConnector('oidc', env.config().auth.oidc as never);
  const { url, transaction } = await startRedirect(connector);
  const callback = await new ScriptedAgent([env.oidc.caPem]).followUntil(url.toString(), env.oidcCallback, {
    path: /^\/interaction\//,
    fields: { username: account },
  });
  return connector.finish(viaUrl(callback), transaction);
}
