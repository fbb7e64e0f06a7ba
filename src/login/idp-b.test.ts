import { describe, expect, it } from 'vitest';
import { IdpBProviderSchema } from '../api/config-auth.ts';
import { ConnectorMisconfigured } from './code-flow.ts';
import { IdpBConnector, isConfiguredTenant } from './idp-b.ts';
import { PUBLIC_PROVIDER_ADDRESSES } from './providers.ts';

const connector = (fields: Record<string, unknown>) =>
  new IdpBConnector(
    'idpB',
    IdpBProviderSchema.parse({ clientId: 'c', clientSecret: 's', redirectURI: 'https://p/cb', ...fields }),
    PUBLIC_PROVIDER_ADDRESSES,
  );

describe('the enterprise-identity tenant', () => {
  it('refuses groups from a shared tenant, where anyone can make a tenant and its groups', () => {
    for (const tenant of [undefined, 'common', 'Organizations', 'consumers'])
      for (const fields of [{ groups: ['0b6a'] }, { useGroupsAsWhitelist: true }])
        expect(() => connector({ ...(tenant ? { tenant } : {}), ...fields }), `${tenant}`).toThrow(
          ConnectorMisconfigured,
        );
    expect(() => connector({ tenant: 'common' })).not.toThrow();
    expect(() => connector({ tenant: 'contoso.example', groups: ['0b6a'] })).not.toThrow();
  });

  it('is the configured one by id or verified domain, nothing else', () => {
    const org = { id: 'AB12-cd', verifiedDomains: [{ name: 'Contoso.example' }] };
    expect(isConfiguredTenant('ab12-CD', org)).toBe(true);
    expect(isConfiguredTenant('contoso.example', org)).toBe(true);
    expect(isConfiguredTenant('fabrikam.example', org)).toBe(false);
    expect(isConfiguredTenant('ab12', org)).toBe(false);
    expect(isConfiguredTenant('ab12-cd', undefined)).toBe(false);
    expect(isConfiguredTenant('ab12-cd', {})).toBe(false);
  });
});
