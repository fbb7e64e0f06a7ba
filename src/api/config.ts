import { parse as parseYaml, YAMLError } from 'yaml';
import { z } from 'zod';
import { prototypeKeyPaths } from '../runtime/json.ts';
import { AuditSchema } from './config-audit.ts';
import { AuthSchema } from './config-auth.ts';
import { bool, int, str, strings } from './config-fields.ts';
import { parseGoDuration } from './duration.ts';
import { ObjectMetaSchema, typeMetaShape } from './meta.ts';

// The platform configuration. The raw YAML lives in the core Secret `platform-config` (key
// `config`); `parseConfig` turns it into `Config.status` with the spec's defaults applied. Unknown
// keys are dropped, as Go's decoder does, so configurations written for newer versions still load.

/** A project's namespace is this prefix and its name unless the platform config says otherwise. */
export const DEFAULT_PROJECT_NAMESPACE_PREFIX = 'p-';
const DEFAULT_SECRET_STORE_SYNC_INTERVAL = '1m';
const DEFAULT_METRICS_RETENTION = '1y';

/** Predefined modules `uiSettings.externalURLs.allow` may name instead of a URL. */
const EXTERNAL_URL_MODULES = ['vcluster', 'gtm', 'featurebase'] as const;

/** `HH:MM-HH:MM`, 24-hour clock. */
const TIME_WINDOW_PATTERN = /^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/;

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
