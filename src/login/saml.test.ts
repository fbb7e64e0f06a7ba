import { describe, expect, it } from 'vitest';
import { SamlProviderSchema } from '../api/config-auth.ts';
import { createCertificateAuthority } from '../pki/certificates.ts';
import { ConnectorMisconfigured } from './code-flow.ts';
import { SamlConnector } from './saml.ts';

describe('the SAML connector', () => {
  it('refuses transient NameIDs, which name no one across sign-ins (a User is bound to its NameID)', async () => {
    const ca = await createCertificateAuthority('saml test idp', 3600);
    const connector = (nameIDPolicyFormat?: string) =>
      new SamlConnector(
        'saml',
        SamlProviderSchema.parse({
          redirectURI: 'https://platform.example/auth/saml/callback',
          ssoURL: 'https://idp.example/sso',
          ca: ca.certPem,
          ...(nameIDPolicyFormat ? { nameIDPolicyFormat } : {}),
        }),
      );
    await expect(connector('transient').start()).rejects.toBeInstanceOf(ConnectorMisconfigured);
    await expect(connector('transient').start()).rejects.toThrow(/transient NameID/);
    expect('redirect' in (await connector().start())).toBe(true);
    expect('redirect' in (await connector('emailAddress').start())).toBe(true);
  });
});
