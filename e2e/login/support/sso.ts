import type { SsoCallback, SsoConnector } from '../../../src/login/sso.ts';

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
