import { z } from 'zod';
import { bool, int, str, strings, stringsOrDefault } from './config-fields.ts';

// The `auth` section of the platform configuration: the sign-in providers, their connectors and
// the lifetimes of the access keys signing in issues.

/** Default lifetime of login access keys: 20 days. */
export const DEFAULT_LOGIN_ACCESS_KEY_TTL_SECONDS = 20 * 24 * 60 * 60;
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

export type AuthConfig = z.output<typeof AuthSchema>;
export type Connector = z.output<typeof ConnectorSchema>;
