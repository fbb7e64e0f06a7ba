import { describe, expect, it } from 'vitest';
import { parseConfig } from '../api/config.ts';
import { configuredMethods, loginMethods, passwordLoginEnabled } from './connectors.ts';

describe('sign-in methods of a configuration', () => {
  const config = parseConfig(`
auth:
  oidc: { issuerUrl: https://idp.example, clientId: c, type: Corporate SSO }
  hostedGit: { clientId: g }
  clusterManager: { host: cm.example, bearerToken: 'token-x:secret' }
  password: { disabled: true }
  connectors:
    - { id: partner, displayName: Partner login, saml: { caData: eA==, ssoURL: https://p } }
    - { id: oidc, oidc: { issuerUrl: https://shadow } }
    - { id: bad/id, oidc: { issuerUrl: https://x } }
    - { id: two, oidc: { issuerUrl: https://two }, saml: { caData: eA== } }
`);

  it('lists top-level sections by name and connectors by id, skipping unusable ids', () => {
    expect(configuredMethods(config.auth).map((m) => [m.id, m.kind, m.displayName])).toEqual([
      ['oidc', 'oidc', 'Corporate SSO'],
      ['hostedGit', 'hostedGit', 'code hosting'],
      ['clusterManager', 'clusterManager', 'the cluster manager'],
      ['partner', 'saml', 'Partner login'],
      ['two', 'oidc', 'OpenID Connect'],
    ]);
  });

  it('offers every configured method', () => {
    expect(loginMethods(config.auth).map((m) => m.id)).toEqual([
      'oidc',
      'hostedGit',
      'clusterManager',
      'partner',
      'two',
    ]);
  });

  it('knows when password sign-in is off', () => {
    expect(passwordLoginEnabled(config.auth)).toBe(false);
    expect(passwordLoginEnabled(parseConfig('').auth)).toBe(true);
  });
});
