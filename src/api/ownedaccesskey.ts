import { z } from 'zod';
import { immutableOnceSet } from './common.ts';
import {
  conditionsSchema,
  ObjectMetaSchema,
  observedGenerationSchema,
  timestampSchema,
  typeMetaShape,
} from './meta.ts';
import { ScopeSchema } from './scope.ts';

/** `spec.type` values: empty (none), then the kinds the established product knows. */
const ACCESS_KEY_TYPES = [
  '',
  'Login',
  'User',
  'Other',
  'Reset',
  'OIDCRefreshToken',
  'NetworkPeer',
  'Workspace',
] as const;
export type AccessKeyType = (typeof ACCESS_KEY_TYPES)[number];

/** Lower-case hex of an HMAC-SHA-256. */
export const KEY_HASH_PATTERN = /^[a-f0-9]{64}$/;
/** The public id part of a key (`<prefix>_<id>_<secret><checksum>`), used to find its object. */
export const KEY_ID_PATTERN = /^[A-Za-z0-9]{1,64}$/;

const SsoIdentitySchema = z
  .object({
    userId: z.string().optional().describe('Subject of the user.'),
    username: z.string().optional().describe('Username.'),
    preferredUsername: z.string().optional().describe('Preferred username / display name.'),
    email: z.string().optional().describe('User email.'),
    emailVerified: z.boolean().optional().describe('Whether the email was verified.'),
    extraClaims: z
      .record(z.string(), z.array(z.string()))
      .optional()
      .describe(
        'Claims from the provider not otherwise present; only claims allowed by the auth config are included.',
      ),
    groups: z.array(z.string()).optional().describe('Groups from the identity provider.'),
    connector: z.string().optional().describe('Name of the connector the key was created from.'),
    connectorData: z
      .string()
      .optional()
      .describe(
        'Data used by the connector for later requests. Never shared with end users, OAuth clients or through the API (omitted from responses).',
      ),
  })
  .describe('If available, data of the single-sign-on login of the key.');

/** `spec.identity.connector` of the keys a password sign-in issues (the platform's own user store). */
export const PASSWORD_CONNECTOR = 'password';

const OwnedAccessKeySpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    description: z.string().optional().describe('Description.'),
    user: z.string().optional().describe('The user the key refers to. Cannot be changed once set.'),
    team: z.string().optional().describe('The team the key refers to. Cannot be changed once set.'),
    subject: z
      .string()
      .optional()
      .describe('Generic subject usable instead of user or team. Cannot be changed once set.'),
    groups: z.array(z.string()).optional().describe('Extra groups applied when the key is used.'),
    key: z
      .string()
      .optional()
      .describe(
        'The actual key, used as a bearer token: `<ACCESS_KEY>`. Input only: the platform stores the key solely as `keyHash` and returns the plaintext once, in the response that created it; the stored object refuses this field.',
      ),
    keyHash: z
      .string()
      .regex(KEY_HASH_PATTERN)
      .optional()
      .describe(
        'HMAC-SHA-256 (hex) of the key under a platform-held secret. Set by the platform instead of storing `key`; cannot be changed once set, so nobody with update rights can swap in a key they know.',
      ),
    keyId: z
      .string()
      .regex(KEY_ID_PATTERN)
      .optional()
      .describe(
        'Public id part of the key, set by the platform to find the key object without scanning; not secret. Cannot be changed once set.',
      ),
    disabled: z
      .boolean()
      .optional()
      .describe('When true the key still exists but does not work for API access.'),
    ttl: z.int().min(0).optional().describe('Time to live in seconds.'),
    ttlAfterLastActivity: z
      .boolean()
      .optional()
      .describe('When set, the time to live starts at the last activity instead of the creation timestamp.'),
    scope: ScopeSchema.optional(),
    type: z
      .enum(ACCESS_KEY_TYPES)
      .optional()
      .describe(
        'Whether the key is user managed or managed by the platform itself: `""`, `Login`, `User`, `Other`, `Reset`, `OIDCRefreshToken`, `NetworkPeer` or `Workspace`. Cannot be changed once set.',
      ),
    identity: SsoIdentitySchema.optional(),
    identityRefresh: timestampSchema()
      .optional()
      .describe('Last time the identity was refreshed (timestamp).'),
    oidcProvider: z
      .object({
        clientId: z.string().optional().describe('Client the token was generated for.'),
        nonce: z.string().optional().describe('Nonce.'),
        redirectUri: z.string().optional().describe('Redirect URI.'),
        scopes: z.string().optional().describe('Scopes.'),
      })
      .optional()
      .describe('For refresh tokens: the OIDC client the token was generated for.'),
    parent: z
      .string()
      .optional()
      .describe(
        'Deprecated. Shares OIDC/external token information among several keys. No effect in this platform; admission warns when it is set.',
      ),
    oidcLogin: z
      .object({
        idToken: z.string().optional().describe('Current ID token from login.'),
        accessToken: z.string().optional().describe('Current access token from login.'),
        refreshToken: z.string().optional().describe('Current refresh token from login.'),
        lastRefresh: timestampSchema().optional().describe('Timestamp of the last id-token refresh.'),
      })
      .optional()
      .describe(
        'Deprecated; use `identity`. No effect in this platform (its tokens are never read, refreshed or returned); admission warns when it is set.',
      ),
  })
  .refine((spec) => !(spec.user && spec.team), {
    message: 'a key refers to a user or a team, not both',
    path: ['team'],
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: "!(has(self.user) && self.user != '' && has(self.team) && self.team != '')",
        message: 'a key refers to a user or a team, not both',
        fieldPath: '.team',
        reason: 'FieldValueForbidden',
      },
      {
        rule: '!has(self.key)',
        message:
          'the plaintext key is never stored; create keys through the management API, which stores only keyHash',
        fieldPath: '.key',
        reason: 'FieldValueForbidden',
      },
      immutableOnceSet('user', 'a key never changes hands'),
      immutableOnceSet('team', 'a key never changes hands'),
      immutableOnceSet('subject', 'a key never changes hands'),
      immutableOnceSet('type', 'the type decides who manages the key'),
      immutableOnceSet('keyHash', 'create a new key instead'),
      immutableOnceSet('keyId', 'create a new key instead'),
    ],
  })
  .describe('Desired state of the access key.');

const OwnedAccessKeyStatusSchema = z
  .object({
    lastActivity: timestampSchema().optional().describe('The last time the key was used to access the API.'),
    expirationTimestamp: timestampSchema()
      .optional()
      .describe(
        'When the key expires, computed by the platform from `ttl`, `ttlAfterLastActivity` (counting from `lastActivity`) and the global `auth.accessKeyMaxTTLSeconds`; unset means never. Kept in status so listings and the gateway need not recompute it.',
      ),
    observedGeneration: observedGenerationSchema(),
    conditions: conditionsSchema().optional(),
  })
  .describe('Observed state of the access key.');

export const OwnedAccessKeySchema = z
  .object({
    ...typeMetaShape('OwnedAccessKey'),
    metadata: ObjectMetaSchema,
    spec: OwnedAccessKeySpecSchema,
    status: OwnedAccessKeyStatusSchema.optional(),
  })
  .describe(
    'Owned Access Key: authenticates against the API and the command line client in non-interactive environments such as CI/CD pipelines.',
  );

export type OwnedAccessKey = z.infer<typeof OwnedAccessKeySchema>;
export type SsoIdentity = z.infer<typeof SsoIdentitySchema>;

/** Where `kubectl apply` keeps the object as applied: a plaintext `spec.key` included. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * A last-applied annotation value without its plaintext key: the same value when it holds none,
 * the value rewritten without `spec.key`, or undefined (remove it) when it cannot be read.
 */
export function lastAppliedWithoutKey(applied: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(applied);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { spec } = parsed as { spec?: unknown };
  if (typeof spec !== 'object' || spec === null || !('key' in spec)) return applied;
  const { key: _key, ...rest } = spec as Record<string, unknown>;
  return JSON.stringify({ ...parsed, spec: rest });
}
export type OwnedAccessKeyStatus = z.infer<typeof OwnedAccessKeyStatusSchema>;
