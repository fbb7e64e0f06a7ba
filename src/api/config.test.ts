import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ConfigError, parseConfig, safeParseConfig } from './config.ts';
import {
  DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS,
  DEFAULT_SAML_NAME_ID_FORMAT,
  SAML_NAME_ID_FORMATS,
} from './config-auth.ts';
import { parseGoDuration } from './duration.ts';

const COMPLETE_CONFIG = `
auth:
  oidc:
    issuerUrl: https://issuer.example.com
    clientId: platform
    clientSecret: oidc-secret
    redirectURI: https://platform.example.com/auth/oidc/callback
    postLogoutRedirectURI: https://platform.example.com/
    caFile: /etc/ca.pem
    insecureCa: false
    preferredUsername: preferred_username
    platformUsernameClaim: email
    usernameClaim: sub
    emailClaim: email
    allowedExtraClaims: [department]
    usernamePrefix: "oidc:"
    groupsClaim: groups
    groups: [devs]
    getUserInfo: true
    groupsPrefix: "oidc:"
    type: Okta
    resource: https://graph.example.com
  hostedGit:
    clientId: gh
    clientSecret: gh-secret
    redirectURI: https://platform.example.com/auth/github/callback
    orgs: [{ name: Example Org, teams: [platform] }]
    hostName: git.example.com
    rootCA: /etc/git-ca.pem
  hostedGitGroups:
    clientId: gl
    clientSecret: gl-secret
    redirectURI: https://platform.example.com/auth/gitlab/callback
    baseURL: https://gitlab.example.com
    groups: [ops]
  idpA:
    clientId: g
    clientSecret: g-secret
    redirectURI: https://platform.example.com/auth/google/callback
    hostedDomains: [example.com]
    groups: [admins@example.com]
    serviceAccountFilePath: /etc/sa.json
    adminEmail: admin@example.com
  idpB:
    clientId: m
    clientSecret: m-secret
    redirectURI: https://platform.example.com/auth/microsoft/callback
    groups: [platform]
    onlySecurityGroups: true
    useGroupsAsWhitelist: true
  saml:
    redirectURI: https://platform.example.com/auth/saml/callback
    ssoURL: https://idp.example.com/sso
    caData: Y2E=
    usernameAttr: name
    emailAttr: email
    groupsAttr: groups
    entityIssuer: https://platform.example.com
    ssoIssuer: https://idp.example.com
    groupsDelim: ","
    allowedGroups: [platform]
    filterGroups: true
    nameIDPolicyFormat: emailAddress
  clusterManager:
    host: rancher.example.com
    bearerToken: token-abc:secretpart
    insecure: false
  password:
    disabled: true
  connectors:
    - id: corp
      displayName: Corporate SSO
      oidc: { issuerUrl: https://corp.example.com, clientId: corp }
    - id: saml2
      saml: { ssoURL: https://idp2.example.com, insecureSkipSignatureValidation: true }
  disableTeamCreation: true
  disableUserCreation: true
  accessKeyMaxTTLSeconds: 2592000
  loginAccessKeyTTLSeconds: 60
  customHttpHeaders: { X-My-Header: my-value }
  groupsFilters: ["^platform-.*$"]
oidc:
  enabled: true
  wildcardRedirect: false
  clients: [{ name: app, clientId: app, clientSecret: app-secret, redirectURIs: [https://app.example.com/cb] }]
apps:
  noDefault: true
  repositories: [{ name: charts, url: https://charts.example.com, username: u, password: p, insecure: false }]
  predefinedApps:
    - chart: charts/app
      initialVersion: 1.0.0
      initialValues: "replicas: 1"
      clusters: [prod]
      title: App
      iconUrl: https://example.com/icon.png
      readmeUrl: https://example.com/readme
audit:
  enabled: true
  disableAgentSyncBack: true
  policy:
    rules:
      - level: Metadata
        users: [alice]
        userGroups: [devs]
        verbs: [create]
        resources: [{ group: "", resources: [secrets], resourceNames: [db] }]
        namespaces: [default]
        nonResourceURLs: [/healthz]
        omitStages: [RequestReceived]
        requestTargets: [Management]
        clusters: [prod]
    omitStages: [Panic]
  dataStoreEndpoint: mysql://audit
  dataStoreTTL: 720
  path: /var/log/platform/audit.log
  maxAge: 7
  maxBackups: 3
  maxSize: 50
  compress: true
platformHost: platform.example.com
projectNamespacePrefix: proj-
devPodSubDomain: "*.workspaces.example.com"
uiSettings:
  platformVersion: 1.0.0
  logoURL: https://example.com/logo.svg
  smallLogoURL: https://example.com/logo-small.svg
  logoBackgroundColor: "#000000"
  primaryColor: "#111111"
  sidebarColor: "#222222"
  accentColor: "#333333"
  legalTemplate: "<p>Be nice</p>"
  customCss: [https://example.com/a.css]
  customJavaScript: [https://example.com/a.js]
  navBarButtons:
    - { position: TopStart, text: Docs, link: https://docs.example.com, icon: https://example.com/docs.svg }
    - { text: Help, link: https://help.example.com }
  externalURLs: { block: true, allow: [vcluster, gtm, featurebase, https://status.example.com] }
secretStore:
  enabled: true
  address: https://vault.example.com
  skipTLSVerify: false
  namespace: platform
  auth: { tokenSecretRef: { name: vault-token, key: token, optional: false } }
  syncInterval: 1h30m
disableConfigEndpoint: true
authenticateVersionEndpoint: true
cloud:
  releaseChannel: stable
  maintenanceWindow: { dayOfWeek: Sunday, timeWindow: "02:00-04:00" }
costControl:
  enabled: true
  global:
    metrics:
      replicas: 1
      resources: { limits: { cpu: "2" }, requests: { memory: 1Gi }, claims: [{ name: gpu }] }
      storage: { storageClass: fast, size: 10Gi }
  cluster:
    metrics: { replicas: 2, retention: 30d }
    costExporter: { replicas: 1, resources: { requests: { cpu: 100m } } }
`;

describe('parseConfig', () => {
  it('parses a configuration with every section', () => {
    const config = parseConfig(COMPLETE_CONFIG);
    expect(config.auth.oidc?.issuerUrl).toBe('https://issuer.example.com');
    expect(config.auth.oidc?.scopes).toEqual(['email', 'profile']);
    expect(config.auth.hostedGit?.orgs).toEqual([{ name: 'Example Org', teams: ['platform'] }]);
    expect(config.auth.hostedGitGroups?.baseURL).toBe('https://gitlab.example.com');
    expect(config.auth.idpA?.adminEmail).toBe('admin@example.com');
    expect(config.auth.idpB?.tenant).toBe('common');
    expect(config.auth.saml?.nameIDPolicyFormat).toBe(SAML_NAME_ID_FORMATS.emailAddress);
    expect(config.auth.clusterManager?.host).toBe('rancher.example.com');
    expect(config.auth.password?.disabled).toBe(true);
    expect(config.auth.connectors?.map((c) => c.id)).toEqual(['corp', 'saml2']);
    expect(config.auth.connectors?.[0]?.oidc?.scopes).toEqual(['email', 'profile']);
    expect(config.auth.loginAccessKeyTTLSeconds).toBe(60);
    expect(config.auth.accessKeyMaxTTLSeconds).toBe(2592000);
    expect(config.auth.customHttpHeaders).toEqual({ 'X-My-Header': 'my-value' });
    expect(config.oidc?.clients?.[0]?.redirectURIs).toEqual(['https://app.example.com/cb']);
    expect(config.apps?.predefinedApps?.[0]?.chart).toBe('charts/app');
    expect(config.audit.policy?.rules?.[0]?.resources).toEqual([
      { group: '', resources: ['secrets'], resourceNames: ['db'] },
    ]);
    expect(config.audit.maxSize).toBe(50);
    expect(config.platformHost).toBe('platform.example.com');
    expect(config.projectNamespacePrefix).toBe('proj-');
    expect(config.uiSettings?.navBarButtons).toEqual([
      {
        position: 'TopStart',
        text: 'Docs',
        link: 'https://docs.example.com',
        icon: 'https://example.com/docs.svg',
      },
      { position: 'BottomEnd', text: 'Help', link: 'https://help.example.com' },
    ]);
    expect(config.uiSettings?.externalURLs?.allow).toHaveLength(4);
    expect(config.secretStore?.syncInterval).toBe('1h30m');
    expect(config.cloud?.maintenanceWindow?.timeWindow).toBe('02:00-04:00');
    expect(config.costControl?.global?.metrics?.retention).toBe('1y');
    expect(config.costControl?.cluster?.metrics?.retention).toBe('30d');
    expect(config.costControl?.cluster?.costExporter?.replicas).toBe(1);
    expect(config.disableConfigEndpoint).toBe(true);
    expect(config.authenticateVersionEndpoint).toBe(true);
  });

  it('parses the same configuration written as JSON', async () => {
    const { parse } = await import('yaml');
    const asJson = JSON.stringify(parse(COMPLETE_CONFIG));
    expect(parseConfig(asJson)).toEqual(parseConfig(COMPLETE_CONFIG));
  });

  it('applies the spec defaults to an empty configuration', () => {
    for (const empty of ['', '{}', '# nothing\n']) {
      const config = parseConfig(empty);
      expect(config.projectNamespacePrefix).toBe('p-');
      expect(config.auth.loginAccessKeyTTLSeconds).toBe(DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS);
      expect(config.auth.loginAccessKeyTTLSeconds).toBe(1_728_000);
      expect(config.audit.maxSize).toBe(100);
    }
  });

  it.each([
    ['secret store syncInterval', 'secretStore: { enabled: true }', (c) => c.secretStore?.syncInterval, '1m'],
    [
      'metrics retention',
      'costControl: { global: { metrics: {} } }',
      (c) => c.costControl?.global?.metrics?.retention,
      '1y',
    ],
    [
      'cluster metrics retention',
      'costControl: { cluster: { metrics: {} } }',
      (c) => c.costControl?.cluster?.metrics?.retention,
      '1y',
    ],
    [
      'navBarButtons position',
      'uiSettings: { navBarButtons: [{ text: a }] }',
      (c) => c.uiSettings?.navBarButtons?.[0]?.position,
      'BottomEnd',
    ],
    ['OIDC scopes when absent', 'auth: { oidc: {} }', (c) => c.auth.oidc?.scopes, ['email', 'profile']],
    [
      'OIDC scopes when empty',
      'auth: { oidc: { scopes: [] } }',
      (c) => c.auth.oidc?.scopes,
      ['email', 'profile'],
    ],
    [
      'OIDC scopes when given',
      'auth: { oidc: { scopes: [openid] } }',
      (c) => c.auth.oidc?.scopes,
      ['openid'],
    ],
    ['idpA scopes', 'auth: { idpA: {} }', (c) => c.auth.idpA?.scopes, ['profile', 'email']],
    ['idpB tenant', 'auth: { idpB: {} }', (c) => c.auth.idpB?.tenant, 'common'],
    [
      'idpB tenant given',
      'auth: { idpB: { tenant: organizations } }',
      (c) => c.auth.idpB?.tenant,
      'organizations',
    ],
    [
      'SAML NameID default',
      'auth: { saml: { ca: x } }',
      (c) => c.auth.saml?.nameIDPolicyFormat,
      DEFAULT_SAML_NAME_ID_FORMAT,
    ],
    [
      'SAML NameID persistent URN',
      'auth: { saml: { ca: x } }',
      (c) => c.auth.saml?.nameIDPolicyFormat,
      'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
    ],
    [
      'SAML NameID emailAddress',
      'auth: { saml: { ca: x, nameIDPolicyFormat: emailAddress } }',
      (c) => c.auth.saml?.nameIDPolicyFormat,
      'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
    ],
    [
      'SAML NameID transient',
      'auth: { saml: { ca: x, nameIDPolicyFormat: transient } }',
      (c) => c.auth.saml?.nameIDPolicyFormat,
      'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
    ],
    [
      'SAML NameID full URN kept',
      'auth: { saml: { ca: x, nameIDPolicyFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified" } }',
      (c) => c.auth.saml?.nameIDPolicyFormat,
      'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
    ],
    [
      'connector SAML NameID',
      'auth: { connectors: [{ id: a, saml: { ca: x, nameIDPolicyFormat: kerberos } }] }',
      (c) => c.auth.connectors?.[0]?.saml?.nameIDPolicyFormat,
      'urn:oasis:names:tc:SAML:2.0:nameid-format:kerberos',
    ],
    [
      'loginAccessKeyTTLSeconds zero kept',
      'auth: { loginAccessKeyTTLSeconds: 0 }',
      (c) => c.auth.loginAccessKeyTTLSeconds,
      0,
    ],
  ] as const satisfies readonly [string, string, (c: ReturnType<typeof parseConfig>) => unknown, unknown][])(
    'default: %s',
    (_name, text, read, expected) => {
      expect(read(parseConfig(text))).toEqual(expected);
    },
  );

  const invalid: [string, string, string][] = [
    ['audit level with policy', 'audit: { level: 2, policy: { rules: [] } }', 'audit.level'],
    ['audit enabled without path', 'audit: { enabled: true }', 'audit.path'],
    ['audit enabled with empty path', 'audit: { enabled: true, path: "" }', 'audit.path'],
    ['audit level out of range', 'audit: { level: 5 }', 'audit.level'],
    [
      'audit rule without level',
      'audit: { policy: { rules: [{ users: [a] }] } }',
      'audit.policy.rules[0].level',
    ],
    [
      'audit rule bad level',
      'audit: { policy: { rules: [{ level: Everything }] } }',
      'audit.policy.rules[0].level',
    ],
    ['audit bad stage', 'audit: { policy: { omitStages: [Later] } }', 'audit.policy.omitStages[0]'],
    ['SAML without CA', 'auth: { saml: { ssoURL: https://idp } }', 'auth.saml.caData'],
    [
      'SAML skip validation false',
      'auth: { saml: { insecureSkipSignatureValidation: false } }',
      'auth.saml.caData',
    ],
    [
      'connector SAML without CA',
      'auth: { connectors: [{ id: a }, { id: b, saml: {} }] }',
      'auth.connectors[1].saml.caData',
    ],
    [
      'SAML unknown NameID format',
      'auth: { saml: { ca: x, nameIDPolicyFormat: nickname } }',
      'auth.saml.nameIDPolicyFormat',
    ],
    [
      'idpA service account without admin',
      'auth: { idpA: { serviceAccountFilePath: /sa.json } }',
      'auth.idpA.adminEmail',
    ],
    [
      'connector idpA without admin',
      'auth: { connectors: [{ id: a, idpA: { serviceAccountFilePath: /sa.json } }] }',
      'auth.connectors[0].idpA.adminEmail',
    ],
    ['duplicate connector ids', 'auth: { connectors: [{ id: a }, { id: a }] }', 'auth.connectors[1].id'],
    ['connector without id', 'auth: { connectors: [{ displayName: a }] }', 'auth.connectors[0].id'],
    [
      'maintenance window without dash',
      'cloud: { maintenanceWindow: { timeWindow: "02:00" } }',
      'cloud.maintenanceWindow.timeWindow',
    ],
    [
      'maintenance window hour 24',
      'cloud: { maintenanceWindow: { timeWindow: "22:00-24:00" } }',
      'cloud.maintenanceWindow.timeWindow',
    ],
    [
      'maintenance window single digits',
      'cloud: { maintenanceWindow: { timeWindow: "2:00-4:00" } }',
      'cloud.maintenanceWindow.timeWindow',
    ],
    [
      'maintenance day unknown',
      'cloud: { maintenanceWindow: { dayOfWeek: Someday } }',
      'cloud.maintenanceWindow.dayOfWeek',
    ],
    ['syncInterval without unit', 'secretStore: { syncInterval: "10" }', 'secretStore.syncInterval'],
    ['syncInterval unknown unit', 'secretStore: { syncInterval: 1d }', 'secretStore.syncInterval'],
    [
      'navBarButtons bad position',
      'uiSettings: { navBarButtons: [{ position: Middle }] }',
      'uiSettings.navBarButtons[0].position',
    ],
    [
      'externalURLs unknown module',
      'uiSettings: { externalURLs: { allow: [intercom] } }',
      'uiSettings.externalURLs.allow[0]',
    ],
    ['negative max TTL', 'auth: { accessKeyMaxTTLSeconds: -1 }', 'auth.accessKeyMaxTTLSeconds'],
    ['fractional login TTL', 'auth: { loginAccessKeyTTLSeconds: 1.5 }', 'auth.loginAccessKeyTTLSeconds'],
    ['bad groups filter', 'auth: { groupsFilters: ["("] }', 'auth.groupsFilters[0]'],
    [
      'cluster manager token without name',
      'auth: { clusterManager: { bearerToken: justsecret } }',
      'auth.clusterManager.bearerToken',
    ],
    ['platform host with scheme', 'platformHost: https://platform.example.com', 'platformHost'],
    ['wrong type', 'projectNamespacePrefix: [a]', 'projectNamespacePrefix'],
    // Named like Object.prototype members: no format, not an inherited function (issue 29).
    [
      'SAML NameID constructor',
      'auth: { saml: { nameIDPolicyFormat: constructor } }',
      'auth.saml.nameIDPolicyFormat',
    ],
    [
      'SAML NameID toString',
      'auth: { saml: { nameIDPolicyFormat: toString } }',
      'auth.saml.nameIDPolicyFormat',
    ],
    // Dropped by the schema without a word, were it not refused first.
    [
      'a header named __proto__',
      'auth: { customHttpHeaders: { __proto__: x } }',
      'auth.customHttpHeaders.__proto__',
    ],
  ];
  it.each(invalid)('rejects %s at %s', (_name, text, path) => {
    const result = safeParseConfig(text);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error).toBeInstanceOf(ConfigError);
    expect(result.error.issues.map((i) => i.path)).toContain(path);
    expect(() => parseConfig(text)).toThrow(ConfigError);
  });

  it('lists every issue, not only the first', () => {
    const result = safeParseConfig(
      stringify({ audit: { enabled: true, level: 1, policy: {} }, auth: { saml: {} } }),
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.issues.map((i) => i.path).sort()).toEqual([
      'audit.level',
      'audit.path',
      'auth.saml.caData',
    ]);
    expect(result.error.message).toContain('audit.path: required when audit is enabled');
  });

  it.each([
    ['a sequence', '- a\n- b\n'],
    ['a scalar', 'hello'],
    ['broken YAML', 'auth: { clientSecret: s3cr3t-value'],
    ['duplicate keys', 'auth: {}\nauth: {}\n'],
  ])('rejects %s as a whole', (_name, text) => {
    const result = safeParseConfig(text);
    expect(result.ok).toBe(false);
  });

  it('never quotes configuration values in errors', () => {
    const secret = 's3cr3t-value-x';
    for (const text of [
      `auth: { oidc: { clientSecret: ${secret} `,
      `auth: { clusterManager: { bearerToken: ${secret} } }`,
      `audit: { enabled: ${secret} }`,
      `cloud: { maintenanceWindow: { timeWindow: ${secret} } }`,
      `auth:\n  oidc:\n    clientSecret: ${secret}\n   bad: indentation`,
    ]) {
      const result = safeParseConfig(text);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.message).not.toContain(secret);
    }
  });
});

describe('parseGoDuration', () => {
  it.each([
    ['1m', 60_000],
    ['0', 0],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['300ms', 300],
    ['-2s', -2000],
    ['+2s', 2000],
    ['1us', 0.001],
    ['1µs', 0.001],
    ['.5s', 500],
    ['1.h', 3_600_000],
    ['2h45m10s', 9_910_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms, 9);
  });
  it.each(['', '10', '1d', 'm', '1 m', '1m ', '-', 'abc', '.h', '1e3s'])('refuses %j', (text) => {
    expect(parseGoDuration(text)).toBeUndefined();
  });
});
