import { parse as parseYaml } from 'yaml';
import { isJsonObject } from '../runtime/json.ts';

/** The provider sections of `auth` and of each connector; a connector uses the first it names. */
export const PROVIDER_SECTIONS = ['oidc', 'saml', 'hostedGit', 'hostedGitGroups', 'idpA', 'idpB'] as const;
/** Connector ids are URL path segments: letters, digits, `-`, `_`, `.`. */
export const CONNECTOR_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/**
 * Configuration fields this platform accepts (they are part of the API) but does not act on.
 * Admission of the `platform-config` Secret answers each one that is set with a Kubernetes warning
 * naming it; `docs/login.md` lists them with the reason.
 * Paths use `[*]` for every element of a list.
 */
export const INERT_CONFIG_FIELDS: ReadonlyArray<{ readonly path: string; readonly reason: string }> = [
  {
    path: 'auth.connectors[*].clusterManager',
    reason:
      'the cluster manager is a top-level section of auth only, as the spec lists the connector sections',
  },
  {
    path: 'auth.saml.insecureSkipSignatureValidation',
    reason: 'SAML signatures are always validated; set caData or ca',
  },
  {
    path: 'auth.connectors[*].saml.insecureSkipSignatureValidation',
    reason: 'SAML signatures are always validated; set caData or ca',
  },
  { path: 'apps', reason: 'there is no app catalog' },
  { path: 'audit.disableAgentSyncBack', reason: 'there are no agents sending audit events back' },
  { path: 'audit.dataStoreEndpoint', reason: 'audit events go to files (audit.path) only' },
  { path: 'audit.dataStoreTTL', reason: 'audit events go to files (audit.path) only' },
  { path: 'platformHost', reason: 'the gateway takes its URL from its flags and the request' },
  { path: 'devPodSubDomain', reason: 'deprecated; there are no workspaces' },
  ...[
    'platformVersion',
    'logoURL',
    'smallLogoURL',
    'logoBackgroundColor',
    'primaryColor',
    'sidebarColor',
    'accentColor',
    'customCss',
    'customJavaScript',
    'navBarButtons',
    'externalURLs',
  ].map((field) => ({
    path: `uiSettings.${field}`,
    reason: 'there is no web UI besides the login page (which shows uiSettings.legalTemplate)',
  })),
  { path: 'secretStore', reason: 'there is no secret-store integration' },
  { path: 'cloud', reason: 'settings for hosted cloud deployments' },
  { path: 'costControl', reason: 'there is no cost dashboard or metrics deployment' },
];

/** `idpB` tenants that sign in accounts of any tenant (or personal accounts), not one directory. */
export const IDP_B_SHARED_TENANTS = ['common', 'organizations', 'consumers'] as const;

/**
 * The group field of an `idpB` section that is set although its tenant is a shared one (`common`,
 * the default, `organizations`, `consumers`), or undefined. Groups are only trusted from one
 * specific tenant (its id or a verified domain): anyone can create a tenant and a group in it
 * named or shaped like another's. The connector refuses such a configuration (`idp-b.ts`), and
 * admission says so naming the field.
 */
export function idpBGroupsWithoutTenant(section: unknown): string | undefined {
  if (!isJsonObject(section)) return undefined;
  const tenant = typeof section.tenant === 'string' && section.tenant !== '' ? section.tenant : 'common';
  if (!(IDP_B_SHARED_TENANTS as readonly string[]).includes(tenant.toLowerCase())) return undefined;
  if (Array.isArray(section.groups) && section.groups.length > 0) return 'groups';
  if (section.useGroupsAsWhitelist === true) return 'useGroupsAsWhitelist';
  return undefined;
}

/**
 * Whether a SAML section asks for transient NameIDs: a new one at every sign-in, so the NameID
 * (the subject a User is bound to) names no one across sign-ins and each sign-in after the first
 * would be refused as another account. The connector refuses it (`saml.ts`), admission warns.
 */
export function samlTransientNameId(section: unknown): boolean {
  if (!isJsonObject(section) || typeof section.nameIDPolicyFormat !== 'string') return false;
  const format = section.nameIDPolicyFormat;
  return format === 'transient' || format.endsWith(':nameid-format:transient');
}

export const SAML_TRANSIENT_NAME_ID_REASON =
  'a transient NameID is new at every sign-in and names no one: a User is bound to its NameID; use persistent (the default) or another stable format';

export const idpBGroupsWithoutTenantReason = (path: string) =>
  `groups need a specific tenant: ${path}.tenant must be a tenant id or verified domain, not common, organizations or consumers, whose accounts come from tenants anyone can create`;

/** The values set where `pattern` names them, with their concrete paths (`auth.connectors[1].idpA`). */
function presentValues(document: unknown, pattern: string): Array<{ value: unknown; path: string }> {
  const steps = pattern.split('.');
  let found: Array<{ value: unknown; path: string }> = [{ value: document, path: '' }];
  for (const step of steps) {
    const each = step.endsWith('[*]');
    const key = each ? step.slice(0, -3) : step;
    const next: Array<{ value: unknown; path: string }> = [];
    for (const { value, path } of found) {
      if (!isJsonObject(value) || !Object.hasOwn(value, key)) continue;
      const child = value[key];
      if (child === undefined || child === null) continue;
      const childPath = path === '' ? key : `${path}.${key}`;
      if (!each) next.push({ value: child, path: childPath });
      else if (Array.isArray(child))
        for (const [i, item] of child.entries()) next.push({ value: item, path: `${childPath}[${i}]` });
    }
    found = next;
  }
  return found;
}

const presentPaths = (document: unknown, pattern: string) =>
  presentValues(document, pattern).map(({ path }) => path);

/**
 * One warning per field set in the configuration text that has no effect here (an unparsable
 * text has none: admission refuses it with its own causes). Never quotes values.
 */
export function configWarnings(raw: string): string[] {
  let document: unknown;
  try {
    document = parseYaml(raw, { prettyErrors: false, maxAliasCount: 100 });
  } catch {
    return [];
  }
  const warnings = INERT_CONFIG_FIELDS.flatMap(({ path, reason }) =>
    presentPaths(document, path).map(
      (where) => `${where}: accepted; has no effect in this platform (${reason})`,
    ),
  );
  for (const { value, path } of [
    ...presentValues(document, 'auth.idpB'),
    ...presentValues(document, 'auth.connectors[*].idpB'),
  ]) {
    const field = idpBGroupsWithoutTenant(value);
    if (field)
      warnings.push(
        `${path}.${field}: accepted; this connector has no effect in this platform (${idpBGroupsWithoutTenantReason(path)})`,
      );
  }
  for (const { value, path } of [
    ...presentValues(document, 'auth.saml'),
    ...presentValues(document, 'auth.connectors[*].saml'),
  ]) {
    if (samlTransientNameId(value))
      warnings.push(
        `${path}.nameIDPolicyFormat: accepted; this connector has no effect in this platform (${SAML_TRANSIENT_NAME_ID_REASON})`,
      );
  }
  const connectors =
    isJsonObject(document) && isJsonObject(document.auth) ? document.auth.connectors : undefined;
  const topLevel = new Set<string>(
    PROVIDER_SECTIONS.filter(
      (kind) => isJsonObject(document) && isJsonObject(document.auth) && document.auth[kind] != null,
    ),
  );
  if (Array.isArray(connectors)) {
    connectors.forEach((connector, i) => {
      if (!isJsonObject(connector)) return;
      const sections = PROVIDER_SECTIONS.filter((kind) => connector[kind] != null);
      for (const extra of sections.slice(1))
        warnings.push(
          `auth.connectors[${i}].${extra}: accepted; has no effect in this platform (a connector uses one provider section, here ${sections[0]})`,
        );
      const id = connector.id;
      if (typeof id === 'string' && !CONNECTOR_ID_PATTERN.test(id))
        warnings.push(
          `auth.connectors[${i}].id: accepted; this connector has no effect in this platform (the id must be a URL path segment: letters, digits, '.', '_', '-')`,
        );
      else if (typeof id === 'string' && topLevel.has(id))
        warnings.push(
          `auth.connectors[${i}].id: accepted; this connector has no effect in this platform (the id "${id}" is taken by auth.${id})`,
        );
    });
  }
  return warnings;
}
