import { parse as parseYaml, YAMLError } from 'yaml';
import { z } from 'zod';
import { prototypeKeyPaths } from '../runtime/json.ts';
import { parseGoDuration } from './duration.ts';
import { ObjectMetaSchema, typeMetaShape } from './meta.ts';

// The platform configuration. The raw YAML lives in the core Secret `platform-config` (key
// `config`); `parseConfig` turns it into `Config.status` with the spec's defaults applied. Unknown
// keys are dropped, as Go's decoder does, so configurations written for newer versions still load.

/** Default lifetime of login access keys: 20 days. */
export const DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS = 20 * 24 * 60 * 60;
const DEFAULT_PROJECT_NAMESPACE_PREFIX = 'p-';
const DEFAULT_AUDIT_MAX_SIZE_MB = 100;
const DEFAULT_SECRET_STORE_SYNC_INTERVAL = '1m';
const DEFAULT_METRICS_RETENTION = '1y';
const DEFAULT_OIDC_SCOPES = ['email', 'profile'];

/** SAML NameID formats, by the last component of their URN (what `nameIDPolicyFormat` may abbreviate). */
export const SAML_NAME_ID_FORMATS: Readonly<Record<string, string>> = {
  unspecified: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
  emailAddress: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
  X509SubjectName: 'urn:oasis:names:tc:SAML:1.1:nameid-format:X509SubjectName',
  WindowsDomainQualifiedName: 'urn:oasis:names:tc:SAML:1.1:nameid-format:WindowsDomainQualifiedName',
  encrypted: 'urn:oasis:names:tc:SAML:2.0:nameid-format:encrypted',
  entity: 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity',
  kerberos: 'urn:oasis:names:tc:SAML:2.0:nameid-format:kerberos',
  persistent: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
  transient: 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
};
export const DEFAULT_SAML_NAME_ID_FORMAT = SAML_NAME_ID_FORMATS.persistent!;

/** Predefined modules `uiSettings.externalURLs.allow` may name instead of a URL. */
const EXTERNAL_URL_MODULES = ['vcluster', 'gtm', 'featurebase'] as const;

/** `HH:MM-HH:MM`, 24-hour clock. */
const TIME_WINDOW_PATTERN = /^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/;

const str = (description: string) => z.string().optional().describe(description);
const bool = (description: string) => z.boolean().optional().describe(description);
const int = (description: string) => z.int().min(0).optional().describe(description);
const strings = (description: string) => z.array(z.string()).optional().describe(description);

/** A list that falls back to `fallback` when absent or empty. */
const stringsOrDefault = (fallback: readonly string[], description: string) =>
  z
    .array(z.string())
    .optional()
    .transform((value) => (value && value.length > 0 ? value : [...fallback]))
    .describe(description);

const clientFields = {
  clientId: str('Client id registered with the provider.'),
  clientSecret: str('Client secret registered with the provider: `<CLIENT_SECRET>`.'),
  redirectURI: str('Platform redirect URI, the callback path on the platform host.'),
};

export const OidcProviderSchema = z
  .object({
    issuerUrl: str(
      'URL the provider signs ID tokens as (the `iss` claim); must implement the service Connect discovery.',
    ),
    clientId: str(
      'Client the token must be issued for. Only a single client is trusted; the authorized-party claim is supported.',
    ),
    clientSecret: str('Secret for issuing tokens: `<CLIENT_SECRET>`.'),
    redirectURI: str('Platform redirect URI, the OIDC callback path on the platform host.'),
    postLogoutRedirectURI: str('Platform URI to redirect to after logout by the provider.'),
    caFile: str('Optional path to a PEM root certificate of the provider.'),
    insecureCa: bool('Communicate without validating certificates.'),
    preferredUsername: str('Key containing the preferred-username claim.'),
    platformUsernameClaim: str('Token field used as the username.'),
    usernameClaim: str('Token field used as the user id.'),
    emailClaim: str('Token field used as the email.'),
    allowedExtraClaims: strings('Extra claims of interest passed on.'),
    usernamePrefix: str('Prefix put on usernames (for example a value ending in a colon).'),
    groupsClaim: str('Token field used to populate groups; value must be a string or list of strings.'),
    groups: strings('When non-empty, access is denied unless the user is in at least one.'),
    scopes: stringsOrDefault(DEFAULT_OIDC_SCOPES, 'Scopes sent; if empty, `email` and `profile`.'),
    getUserInfo: bool('Populate user information from the UserInfo endpoint.'),
    groupsPrefix: str('Prefix put on group names.'),
    type: str('Type shown in the UI; display only.'),
    resource: str("Value of the `resource` URL parameter in requests to the provider's token endpoint."),
  })
  .describe('OIDC authentication.');

const HostedGitProviderSchema = z
  .object({
    ...clientFields,
    orgs: z
      .array(
        z.object({
          name: z.string().describe('Organization name (full name, not slug).'),
          teams: strings(
            'A user may authenticate if in at least one of these teams; any member when omitted.',
          ),
        }),
      )
      .optional()
      .describe('When set, the user must be a member of at least one organization.'),
    hostName: str('Only for the enterprise edition; must be routable.'),
    rootCA: str('Enterprise edition only; optional, for self-signed CAs.'),
  })
  .describe(
    'Code-hosting provider auth (organization/team based). Group claims are formatted `<org>:<team>`.',
  );

const HostedGitGroupsProviderSchema = z
  .object({
    ...clientFields,
    baseURL: str('Optional; default is the public hosted address of the provider.'),
    groups: strings(
      'Optional whitelist via the `groups` scope: when omitted all groups are returned; when given only listed groups enter the claim and a user in none is not authenticated.',
    ),
  })
  .describe('Code-hosting provider auth (group based).');

const IdpAProviderSchema = z
  .object({
    ...clientFields,
    scopes: stringsOrDefault(['profile', 'email'], 'Scopes sent; default `profile` and `email`.'),
    hostedDomains: strings('Non-empty means only users of a listed domain may log in.'),
    groups: strings('Non-empty means only users of a listed group may log in.'),
    serviceAccountFilePath: str(
      'Optional path to service-account JSON used to check groups via the directory API.',
    ),
    adminEmail: str(
      'Required if `serviceAccountFilePath` is set: a super user the service account impersonates when listing groups.',
    ),
  })
  .describe('Web-identity provider auth.');

export const IdpBProviderSchema = z
  .object({
    ...clientFields,
    tenant: z
      .string()
      .min(1)
      .default('common')
      .describe(
        '`common` (default, personal and organizational accounts), `consumers`, `organizations`, or a tenant UUID or tenant name. Groups only with a tenant UUID or name: the shared ones sign people in without groups, and refuse `groups` and `useGroupsAsWhitelist`.',
      ),
    groups: strings('Required group membership, by group object id (a specific `tenant` only).'),
    onlySecurityGroups: bool('By default all group kinds are included.'),
    useGroupsAsWhitelist: bool('Restrict group claims to the configured groups (a specific `tenant` only).'),
  })
  .describe('Enterprise-identity provider auth.');

export const SamlProviderSchema = z
  .object({
    redirectURI: str('Must exactly match the Destination of the response assertion, if present.'),
    ssoURL: str('SSO URL used for the POST value.'),
    caData: str(
      'Base64 CA certificate for validating the response signature. One of `caData`, `ca` or `insecureSkipSignatureValidation` must be defined.',
    ),
    ca: str('CA used to validate the response signature.'),
    insecureSkipSignatureValidation: bool('Ignore the CA certificate.'),
    usernameAttr: str('Assertion attribute mapped to username.'),
    emailAttr: str('Assertion attribute mapped to email.'),
    groupsAttr: str('Assertion attribute mapped to groups.'),
    entityIssuer: str(
      'When provided, used as the Issuer in the authentication request and overrides the redirect URI as the required audience.',
    ),
    ssoIssuer: str('Optional issuer expected in the response.'),
    groupsDelim: str('When set, groups arrive as one string split by this delimiter.'),
    allowedGroups: strings('Groups used to filter access by membership.'),
    filterGroups: bool('With `allowedGroups`, forward only the allowed groups.'),
    nameIDPolicyFormat: z
      .string()
      .optional()
      .transform((value, ctx) => {
        if (value === undefined || value === '') return DEFAULT_SAML_NAME_ID_FORMAT;
        if (Object.values(SAML_NAME_ID_FORMATS).includes(value)) return value;
        // Own keys only: `constructor` or `toString` is no format (an inherited function is no URN).
        const expanded = Object.hasOwn(SAML_NAME_ID_FORMATS, value) ? SAML_NAME_ID_FORMATS[value] : undefined;
        if (expanded) return expanded;
        ctx.addIssue({
          code: 'custom',
          message: `unknown NameID format; use a full URN or one of ${Object.keys(SAML_NAME_ID_FORMATS).join(', ')}`,
        });
        return z.NEVER;
      })
      .describe(
        'Requested NameID format, mapped to the `sub` claim. May be the last component of the full URN (for example `emailAddress` resolves to the SAML 1.1 emailAddress NameID URN). Default is the SAML 2.0 persistent NameID URN.',
      ),
  })
  .superRefine((saml, ctx) => {
    if (!saml.caData && !saml.ca && saml.insecureSkipSignatureValidation !== true) {
      ctx.addIssue({
        code: 'custom',
        path: ['caData'],
        message: 'one of `caData`, `ca` or `insecureSkipSignatureValidation` must be defined',
      });
    }
  })
  .describe('SAML auth.');

const ClusterManagerProviderSchema = z
  .object({
    host: str('Host name.'),
    bearerToken: z
      .string()
      .regex(/^[^:]+:.+$/, 'must have the form `<token-name>:<token-secret>`')
      .optional()
      .describe('Key in token username and password form, `<token-name>:<token-secret>`.'),
    insecure: bool('Endpoint is insecure.'),
  })
  .describe('Cluster manager auth.');

const providerSections = {
  oidc: OidcProviderSchema.optional(),
  hostedGit: HostedGitProviderSchema.optional(),
  hostedGitGroups: HostedGitGroupsProviderSchema.optional(),
  idpA: IdpAProviderSchema.optional(),
  idpB: IdpBProviderSchema.optional(),
  saml: SamlProviderSchema.optional(),
};

/** idpA needs `adminEmail` whenever `serviceAccountFilePath` is set (used on auth and every connector). */
const requireIdpAAdminEmail = (
  sections: { idpA?: { serviceAccountFilePath?: string | undefined; adminEmail?: string | undefined } },
  ctx: z.RefinementCtx,
) => {
  if (sections.idpA?.serviceAccountFilePath && !sections.idpA.adminEmail) {
    ctx.addIssue({
      code: 'custom',
      path: ['idpA', 'adminEmail'],
      message: 'required when `serviceAccountFilePath` is set',
    });
  }
};

const ConnectorSchema = z
  .object({
    id: z.string().min(1).describe('The id shown in the URL.'),
    displayName: str('Shown in the UI.'),
    ...providerSections,
  })
  .superRefine(requireIdpAAdminEmail)
  .describe('An additional connector with any of the provider sections.');

export const AuthSchema = z
  .object({
    ...providerSections,
    clusterManager: ClusterManagerProviderSchema.optional(),
    password: z
      .object({ disabled: bool('When true, login by password is disabled.') })
      .optional()
      .describe('Password login.'),
    connectors: z
      .array(ConnectorSchema)
      .optional()
      .superRefine((connectors, ctx) => {
        const seen = new Set<string>();
        connectors?.forEach((connector, index) => {
          if (seen.has(connector.id))
            ctx.addIssue({ code: 'custom', path: [index, 'id'], message: 'duplicate connector id' });
          seen.add(connector.id);
        });
      })
      .describe(
        'Additional connectors. Each has `id` (string, the id shown in the URL), `displayName` (string, shown in the UI), and any of the provider sections above (oidc, hostedGit, hostedGitGroups, idpA, idpB, saml) with the same fields.',
      ),
    disableTeamCreation: bool(
      'When true, no teams are created for new groups of a user at single-sign-on login. Default false (teams are created).',
    ),
    disableUserCreation: bool(
      'When true, single-sign-on connectors do not create a user object on first sign-in. Default false.',
    ),
    accessKeyMaxTTLSeconds: int(
      'Global maximum lifespan of an access key in seconds. 0 or unspecified disables the maximum.',
    ),
    loginAccessKeyTTLSeconds: z
      .int()
      .min(0)
      .default(DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS)
      .describe(
        'Seconds an access key is kept until deleted. Unspecified defaults to 20 days. Zero disables the ttl.',
      ),
    customHttpHeaders: z
      .record(z.string(), z.string())
      .optional()
      .describe('Extra headers set on the authentication endpoints.'),
    groupsFilters: z
      .array(
        z.string().refine((pattern) => {
          try {
            new RegExp(pattern);
            return true;
          } catch {
            return false;
          }
        }, 'not a valid regular expression'),
      )
      .optional()
      .describe('Regular expression; only matching single-sign-on groups are saved into the user resource.'),
  })
  .superRefine(requireIdpAAdminEmail)
  .describe('Authentication providers and access key lifetimes.');

const PlatformOidcProviderSchema = z
  .object({
    enabled: bool('Whether the platform acts as an OIDC provider.'),
    wildcardRedirect: bool('Allow `*` in client redirect URIs.'),
    clients: z
      .array(
        z.object({
          name: str('Name of the client.'),
          clientId: str('Client id.'),
          clientSecret: str('Client secret.'),
          redirectURIs: strings('A redirect must match one unless the client is public.'),
        }),
      )
      .optional()
      .describe('OIDC clients of the platform.'),
  })
  .describe(
    'Deprecated. Platform acting as an OIDC provider (enabled by default but non-functional without clients).',
  );

const AppsSchema = z
  .object({
    noDefault: bool('Do not parse the default apps.'),
    repositories: z
      .array(
        z.object({
          name: str('Repository name.'),
          url: str('Repository URL.'),
          username: str('Username for the repository.'),
          password: str('Password for the repository.'),
          insecure: bool('No TLS verification.'),
        }),
      )
      .optional()
      .describe('Chart repositories.'),
    predefinedApps: z
      .array(
        z.object({
          chart: str('Repo/chart name.'),
          initialVersion: str('Initial version.'),
          initialValues: str('Prefilled values with placeholders replaced by the UI.'),
          clusters: strings('Cluster names where shown.'),
          title: str('Default chart name.'),
          iconUrl: str('Default from chart metadata.'),
          readmeUrl: str('Default is a catalog page.'),
        }),
      )
      .optional()
      .describe('Apps offered in the UI.'),
  })
  .describe('Apps.');

export const AUDIT_LEVELS = ['None', 'Metadata', 'Request', 'RequestResponse'] as const;
export const AUDIT_STAGES = ['RequestReceived', 'ResponseStarted', 'ResponseComplete', 'Panic'] as const;
export const AUDIT_REQUEST_TARGETS = [
  'Management',
  'Cluster',
  'VCluster',
  'ProjectSpace',
  'ProjectVCluster',
] as const;

const AuditPolicyRuleSchema = z
  .object({
    level: z.enum(AUDIT_LEVELS).describe('`None`, `Metadata`, `Request` or `RequestResponse`.'),
    users: strings('By authenticated name; empty means all.'),
    userGroups: strings('Empty means all.'),
    verbs: strings('Empty means all.'),
    resources: z
      .array(
        z.object({
          group: str('API group; the empty string is the core group.'),
          resources: strings('Resources as in access rules.'),
          resourceNames: strings('Resource names as in access rules.'),
        }),
      )
      .optional()
      .describe('Resources as in access rules (`group`, `resources`, `resourceNames`).'),
    namespaces: strings('Matching namespaces.'),
    nonResourceURLs: strings('Matching non-resource URLs.'),
    omitStages: z.array(z.enum(AUDIT_STAGES)).optional().describe('Stages without events.'),
    requestTargets: z.array(z.enum(AUDIT_REQUEST_TARGETS)).optional().describe('Empty means every request.'),
    clusters: strings('When set, no events for non-cluster requests; empty means no restriction.'),
  })
  .describe('One audit policy rule; the first matching rule applies.');

const AuditPolicySchema = z
  .object({
    rules: z
      .array(AuditPolicyRuleSchema)
      .optional()
      .describe(
        'Strictly ordered, first matching rule applies, default level None, may be overridden by a final catch-all.',
      ),
    omitStages: z
      .array(z.enum(AUDIT_STAGES))
      .optional()
      .describe('Stages without events; union with per-rule lists.'),
  })
  .describe('Default: nothing is logged.');

const AuditSchema = z
  .object({
    enabled: bool('When true, incoming API requests are logged per the policy.'),
    disableAgentSyncBack: bool('When true the agent sends no audit logs back.'),
    level: z
      .int()
      .min(1)
      .max(4)
      .optional()
      .describe('Optional log level (1-4); cannot be used together with `policy`.'),
    policy: AuditPolicySchema.optional(),
    dataStoreEndpoint: str('Endpoint where events are stored.'),
    dataStoreTTL: int('Maximum hours to retain events in the datastore.'),
    path: str(
      'Directory/path for audit log files; required when audit is enabled. Backups stay in the same directory.',
    ),
    maxAge: int('Maximum days to retain old log files (24-hour days); default is no age-based removal.'),
    maxBackups: int('Maximum old log files retained; default retains all.'),
    maxSize: z
      .int()
      .min(1)
      .default(DEFAULT_AUDIT_MAX_SIZE_MB)
      .describe('Megabytes before rotation; default 100.'),
    compress: bool('Gzip rotated files; default false.'),
  })
  .superRefine((audit, ctx) => {
    if (audit.level !== undefined && audit.policy !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['level'], message: 'cannot be used together with `policy`' });
    }
    if (audit.enabled === true && !audit.path) {
      ctx.addIssue({ code: 'custom', path: ['path'], message: 'required when audit is enabled' });
    }
  })
  .describe('Audit logging.');

const UiSettingsSchema = z
  .object({
    platformVersion: str('Current platform version.'),
    logoURL: str('URL of the logo; must be reachable by UI clients.'),
    smallLogoURL: str('URL of the small logo; must be reachable by UI clients.'),
    logoBackgroundColor: str('Color value.'),
    primaryColor: str('Color value.'),
    sidebarColor: str('Color value.'),
    accentColor: str('Color value.'),
    legalTemplate: str('HTML text shown to users when authenticating.'),
    customCss: strings('URLs of files to include when loading the UI.'),
    customJavaScript: strings('URLs of files to include when loading the UI.'),
    navBarButtons: z
      .array(
        z.object({
          position: z
            .enum(['TopStart', 'TopEnd', 'BottomStart', 'BottomEnd'])
            .default('BottomEnd')
            .describe('`TopStart`, `TopEnd`, `BottomStart` or `BottomEnd`; default `BottomEnd`.'),
          text: str('Button text.'),
          link: str('Where the button leads.'),
          icon: str('Icon URL.'),
        }),
      )
      .optional()
      .describe('Extra buttons.'),
    externalURLs: z
      .object({
        block: bool('Block UI requests to external URLs.'),
        allow: z
          .array(
            z
              .string()
              .refine(
                (entry) => (EXTERNAL_URL_MODULES as readonly string[]).includes(entry) || URL.canParse(entry),
                `must be a URL or one of ${EXTERNAL_URL_MODULES.join(', ')}`,
              ),
          )
          .optional()
          .describe(
            'URLs that may be called; effective only when `block` is true; any URL may be listed, plus the predefined module names `vcluster`, `gtm` and `featurebase`.',
          ),
      })
      .optional()
      .describe('External URLs the UI may call.'),
  })
  .describe('UI settings.');

const SecretStoreSchema = z
  .object({
    enabled: bool(
      'Enables syncing secrets to or from the store; does not set up authentication methods or secrets engines for virtual clusters.',
    ),
    address: str('Address of the store; defaults to the address environment variable of the store client.'),
    skipTLSVerify: bool('Skip TLS verification.'),
    namespace: str('Namespace used when storing secrets.'),
    auth: z
      .object({
        token: str('Token for authentication.'),
        tokenSecretRef: z
          .object({
            name: str('Name of the Secret.'),
            key: str('Key of the Secret data holding the token.'),
            optional: bool('Whether the Secret or its key must exist.'),
          })
          .optional()
          .describe('Used when `token` is absent; the secret data contains the token key.'),
      })
      .optional()
      .describe('Authentication against the store.'),
    syncInterval: z
      .string()
      .default(DEFAULT_SECRET_STORE_SYNC_INTERVAL)
      .refine(
        (value) => parseGoDuration(value) !== undefined,
        'must be a Go duration such as `30s`, `1m` or `1h30m`',
      )
      .describe(
        'Interval of syncing from the store; duration format of the Go duration parser; default `1m`.',
      ),
  })
  .describe('Secret store integration.');

const quantity = z.union([z.string(), z.number()]);
const ResourceRequirementsSchema = z
  .object({
    limits: z.record(z.string(), quantity).optional().describe('Resource limits.'),
    requests: z.record(z.string(), quantity).optional().describe('Resource requests.'),
    claims: z
      .array(z.object({ name: z.string().describe('Claim name.'), request: str('Request name.') }))
      .optional()
      .describe('Dynamic resource claims.'),
  })
  .describe('Compute resources.');

const MetricsSchema = z
  .object({
    replicas: int('Replicas.'),
    resources: ResourceRequirementsSchema.optional(),
    retention: z.string().default(DEFAULT_METRICS_RETENTION).describe('Retention; default `1y`.'),
    storage: z
      .object({
        storageClass: str(
          'Storage class; `-` or empty disables dynamic provisioning and undefined/null uses the default class.',
        ),
        size: str('Volume size.'),
      })
      .optional()
      .describe('Storage of the metrics.'),
  })
  .describe('Metrics infrastructure.');

const price = z
  .object({
    price: z.number().optional().describe('Price.'),
    timePeriod: str('Period the price applies to.'),
  })
  .optional();

const CostControlSchema = z
  .object({
    enabled: bool('Whether the ROI dashboard is available and the metrics infrastructure is deployed.'),
    global: z
      .object({
        metrics: MetricsSchema.optional().describe(
          'Metrics infrastructure aggregating across all connected clusters.',
        ),
      })
      .optional()
      .describe('Global settings.'),
    cluster: z
      .object({
        metrics: MetricsSchema.optional().describe(
          "Same shape as `global.metrics`, applied in each connected cluster; overridable per cluster in the cluster's spec.",
        ),
        costExporter: z
          .object({ replicas: int('Replicas.'), resources: ResourceRequirementsSchema.optional() })
          .optional()
          .describe('Cost exporter deployments in each connected cluster.'),
      })
      .optional()
      .describe('Per connected cluster settings.'),
    settings: z
      .object({
        priceCurrency: str('Currency of prices.'),
        averageCPUPricePerNode: price.describe('Average CPU price per node.'),
        averageRAMPricePerNode: price.describe('Average RAM price per node.'),
        gpuSettings: z
          .object({
            enabled: bool('GPU costs enabled.'),
            averageGPUPrice: price.describe('Average GPU price.'),
          })
          .optional()
          .describe('GPU settings.'),
        controlPlanePricePerCluster: price.describe('Control plane price per cluster.'),
      })
      .optional()
      .describe('Prices used by the dashboard (from the established product; not in the spec).'),
  })
  .describe('Cost control.');

const CloudSchema = z
  .object({
    releaseChannel: str('Release channel.'),
    maintenanceWindow: z
      .object({
        dayOfWeek: z
          .string()
          .regex(/^(sunday|monday|tuesday|wednesday|thursday|friday|saturday)$/i, 'must be a day name')
          .optional()
          .describe('Day name.'),
        timeWindow: z
          .string()
          .regex(TIME_WINDOW_PATTERN, 'must be a 24-hour range `HH:MM-HH:MM`')
          .optional()
          .describe('24-hour range in UTC formatted `HH:MM-HH:MM`.'),
      })
      .optional()
      .describe('Maintenance window.'),
  })
  .describe('Settings only for hosted cloud deployments.');

const ConfigStatusSchema = z
  .object({
    auth: AuthSchema.prefault({}),
    oidc: PlatformOidcProviderSchema.optional(),
    apps: AppsSchema.optional(),
    audit: AuditSchema.prefault({}),
    platformHost: z
      .string()
      .regex(/^[^/:]+(:\d+)?$/, 'must be a host name without scheme or path')
      .optional()
      .describe('Domain hosting the platform, without scheme.'),
    projectNamespacePrefix: z
      .string()
      .default(DEFAULT_PROJECT_NAMESPACE_PREFIX)
      .describe('Prefix of project namespaces. Default `p-`.'),
    devPodSubDomain: str('Deprecated. A wildcard subdomain for workspaces.'),
    uiSettings: UiSettingsSchema.optional(),
    secretStore: SecretStoreSchema.optional(),
    disableConfigEndpoint: bool('Disables setting the config via the UI and the config endpoint.'),
    authenticateVersionEndpoint: bool(
      'Forces authentication for the `/version` endpoint; only works with virtual cluster version 0.27 and later.',
    ),
    cloud: CloudSchema.optional(),
    costControl: CostControlSchema.optional(),
  })
  .describe('The parsed platform configuration, with defaults applied.');

export const ConfigSchema = z
  .object({
    ...typeMetaShape('Config'),
    metadata: ObjectMetaSchema.optional(),
    spec: z
      .object({ raw: str('The raw config: the configuration YAML text.') })
      .optional()
      .describe('The configuration to set.'),
    status: ConfigStatusSchema.optional(),
  })
  .describe(
    'The platform configuration (authentication providers, audit, UI, secret store, cost control and others).',
  );

export type ConfigStatus = z.output<typeof ConfigStatusSchema>;
export type Config = z.infer<typeof ConfigSchema>;
export type AuditConfig = z.output<typeof AuditSchema>;
export type AuditPolicy = z.output<typeof AuditPolicySchema>;
export type AuditPolicyRule = z.output<typeof AuditPolicyRuleSchema>;
export type AuthConfig = z.output<typeof AuthSchema>;
export type Connector = z.output<typeof ConnectorSchema>;

/** One problem in a configuration, at a field path such as `audit.path` or `auth.connectors[0].id`. */
interface ConfigIssue {
  path: string;
  message: string;
}

/**
 * A configuration that cannot be used. The message lists every issue with its path; it never
 * quotes configuration values, which may be secrets.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly issues: readonly ConfigIssue[]) {
    super(
      `invalid platform configuration: ${issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')}`,
    );
  }
}

/** Formats a zod issue path as `a.b[0].c`. */
function formatFieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((segment, index) =>
      typeof segment === 'number' ? `[${segment}]` : `${index === 0 ? '' : '.'}${String(segment)}`,
    )
    .join('');
}

type ConfigParseResult = { ok: true; config: ConfigStatus } | { ok: false; error: ConfigError };

/** The platform configuration lives in this core Secret (in the platform namespace), under {@link PLATFORM_CONFIG_KEY}. */
export const PLATFORM_CONFIG_SECRET = 'platform-config';
export const PLATFORM_CONFIG_KEY = 'config';

/**
 * Parses configuration text (YAML, or JSON, which is YAML) into `Config.status` with the spec's
 * defaults applied. Empty text is the empty configuration. Never throws.
 */
export function safeParseConfig(raw: string): ConfigParseResult {
  let document: unknown;
  try {
    // prettyErrors off: the pretty form quotes the offending source line, which may hold a secret.
    document = parseYaml(raw, { prettyErrors: false, uniqueKeys: true, maxAliasCount: 100 });
  } catch (err) {
    const where =
      err instanceof YAMLError && err.linePos
        ? ` at line ${err.linePos[0].line}, column ${err.linePos[0].col}`
        : '';
    const code = err instanceof YAMLError ? ` (${err.code})` : '';
    return { ok: false, error: new ConfigError([{ path: '', message: `not valid YAML${where}${code}` }]) };
  }
  if (document === null || document === undefined) document = {};
  if (typeof document !== 'object' || Array.isArray(document)) {
    return { ok: false, error: new ConfigError([{ path: '', message: 'must be a mapping of sections' }]) };
  }
  // No field or name of the configuration is `__proto__`, and the schema would drop it without a
  // word (custom header names, for one): refused rather than ignored.
  const prototypeKeys = prototypeKeyPaths(document);
  if (prototypeKeys.length > 0) {
    return {
      ok: false,
      error: new ConfigError(
        prototypeKeys.map((path) => ({
          path: formatFieldPath(path),
          message: 'the key "__proto__" is not supported',
        })),
      ),
    };
  }
  const result = ConfigStatusSchema.safeParse(document, { reportInput: false });
  if (result.success) return { ok: true, config: result.data };
  return {
    ok: false,
    error: new ConfigError(
      result.error.issues.map((i) => ({ path: formatFieldPath(i.path), message: i.message })),
    ),
  };
}

/** {@link safeParseConfig}, throwing {@link ConfigError} when the configuration is invalid. */
export function parseConfig(raw: string): ConfigStatus {
  const result = safeParseConfig(raw);
  if (!result.ok) throw result.error;
  return result.config;
}
