import { describe, expect, it } from 'vitest';
import { configWarnings } from './config-warnings.ts';

describe('warnings for configuration without effect', () => {
  it('names every inert field that is set, and nothing for working ones', () => {
    const warnings = configWarnings(`
oidc: { enabled: true }
auth:
  oidc: { issuerUrl: https://idp }
  password: { disabled: false }
  hostedGit: { clientId: x, clientSecret: very-secret-value }
  saml: { caData: eA==, insecureSkipSignatureValidation: true }
  connectors:
    - { id: gl, hostedGitGroups: { clientId: y } }
    - { id: saml, oidc: { issuerUrl: https://x } }
    - { id: both, oidc: { issuerUrl: https://x }, idpB: { tenant: t } }
audit: { enabled: false, dataStoreEndpoint: https://store, level: 1 }
uiSettings: { legalTemplate: "<b>hi</b>", primaryColor: "#fff" }
secretStore: { enabled: true }
costControl: { enabled: true }
cloud: { releaseChannel: stable }
apps: { noDefault: true }
platformHost: platform.example.com
projectNamespacePrefix: team-
`);
    const fields = warnings.map((w) => w.slice(0, w.indexOf(':')));
    expect(fields.sort()).toEqual(
      [
        'auth.saml.insecureSkipSignatureValidation',
        'auth.connectors[1].id',
        'auth.connectors[2].idpB',
        'audit.dataStoreEndpoint',
        'uiSettings.primaryColor',
        'secretStore',
        'costControl',
        'cloud',
        'apps',
        'platformHost',
      ].sort(),
    );
    for (const warning of warnings)
      expect(warning).toMatch(/accepted; (this connector )?has no effect in this platform/);
    expect(warnings.join('\n')).not.toContain('very-secret-value');
  });

  it('has nothing to say about the sign-in providers, which all work; the cluster manager works at the top level only', () => {
    const warnings = configWarnings(`
auth:
  hostedGit: { clientId: a }
  hostedGitGroups: { clientId: a }
  idpA: { clientId: a }
  idpB: { clientId: a }
  clusterManager: { host: cm.example }
  connectors:
    - { id: a, hostedGit: { clientId: a } }
    - { id: b, hostedGitGroups: { clientId: a } }
    - { id: c, idpA: { clientId: a } }
    - { id: d, idpB: { clientId: a } }
    - { id: e, clusterManager: { host: cm.example } }
`);
    expect(warnings).toEqual([
      'auth.connectors[4].clusterManager: accepted; has no effect in this platform (the cluster manager is a top-level section of auth only, as the spec lists the connector sections)',
    ]);
  });

  it('names the enterprise-identity group fields set without a specific tenant (issue 32)', () => {
    const warnings = configWarnings(`
auth:
  idpB: { clientId: a, groups: [g1] }
  connectors:
    - { id: a, idpB: { clientId: a, tenant: organizations, useGroupsAsWhitelist: true } }
    - { id: b, idpB: { clientId: a, tenant: Common, groups: [g1], useGroupsAsWhitelist: true } }
    - { id: c, idpB: { clientId: a, tenant: 5e1f0c2a-8b7d-4c1e-9f3a-2d6b8e4a1c00, groups: [g1] } }
    - { id: d, idpB: { clientId: a, tenant: contoso.example, groups: [g1], useGroupsAsWhitelist: true } }
    - { id: e, idpB: { clientId: a, tenant: consumers } }
`);
    expect(warnings.map((w) => w.slice(0, w.indexOf(':')))).toEqual([
      'auth.idpB.groups',
      'auth.connectors[0].idpB.useGroupsAsWhitelist',
      'auth.connectors[1].idpB.groups',
    ]);
    expect(warnings[1]).toContain('auth.connectors[0].idpB.tenant must be a tenant id or verified domain');
    for (const warning of warnings) expect(warning).toMatch(/accepted; this connector has no effect/);
  });

  it('names a SAML connector asking for transient NameIDs, which name no one across sign-ins', () => {
    const warnings = configWarnings(`
auth:
  saml: { caData: eA==, nameIDPolicyFormat: transient }
  connectors:
    - { id: a, saml: { caData: eA==, nameIDPolicyFormat: "urn:oasis:names:tc:SAML:2.0:nameid-format:transient" } }
    - { id: b, saml: { caData: eA==, nameIDPolicyFormat: persistent } }
    - { id: c, saml: { caData: eA==, nameIDPolicyFormat: emailAddress } }
    - { id: d, saml: { caData: eA== } }
`);
    expect(warnings.map((w) => w.slice(0, w.indexOf(':')))).toEqual([
      'auth.saml.nameIDPolicyFormat',
      'auth.connectors[0].saml.nameIDPolicyFormat',
    ]);
    for (const warning of warnings) expect(warning).toMatch(/accepted; this connector has no effect/);
  });

  it('says nothing for an empty or unparsable configuration', () => {
    expect(configWarnings('')).toEqual([]);
    expect(configWarnings('a: [')).toEqual([]);
  });
});
