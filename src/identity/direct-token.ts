import { createLocalJWKSet, importJWK, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { type Scope, ScopeSchema } from '../api/scope.ts';
import { nonResourceRequest, type RequestAttributes } from '../authz/attributes.ts';
import { checkScope, scopeNarrows } from '../authz/scope.ts';
import { DEFAULT_ROTATION_POLICY, publicJwks, SIGNING_ALGORITHM, type SigningKey } from './signing-keys.ts';

/**
 * DirectClusterEndpointTokens: JWTs a cluster verifies on its own (OIDC discovery and JWKS from the
 * gateway, no call to the platform per request).
 *
 * Claims: `iss` the platform's issuer URL; `sub` the caller's Kubernetes username; `aud` the
 * clusters the scope allows (connected cluster names, `<project>/<virtual cluster>` for virtual
 * clusters) or {@link PLATFORM_AUDIENCE} when the scope does not name particular clusters;
 * `groups` the caller's platform groups; `iat`, `nbf`, `exp`; and under `management.platform` the
 * caller's `uid`, `name`, `kind`, `gen` (a User's `spec.tokenGeneration` when the token was minted,
 * 0 for teams and subjects), `accessKey` (the `name` and `uid` of the OwnedAccessKey that minted
 * it) and the token's `scope`.
 *
 * Revocation ({@link directTokenRevocation}): where the platform itself checks a token (the
 * TokenReview webhook), it is refused once its access key is gone (deleted, or replaced by another
 * object of that name), disabled or being deleted, once its owner is gone, disabled or replaced,
 * or once a User's `spec.tokenGeneration` differs from the token's `gen`. A cluster that verifies
 * tokens offline through the JWKS sees none of this (docs/trust.md): for it a token ends at `exp`.
 */

export const PLATFORM_AUDIENCE = 'management.platform';
const PLATFORM_CLAIM = 'management.platform';
/** Lifetime when `spec.ttl` is 0 or unset. */
export const DEFAULT_DIRECT_TOKEN_TTL_SECONDS = 3600;
/** No token outlives this (signing keys are kept this long after they retire). */
export const MAX_DIRECT_TOKEN_TTL_SECONDS = DEFAULT_ROTATION_POLICY.maxTokenTtlMs / 1000;

interface TokenSubject {
  readonly username: string;
  readonly groups: readonly string[];
  readonly uid: string | undefined;
  /** The User or Team name (or the subject). */
  readonly name: string;
  readonly kind: 'User' | 'Team' | 'Subject';
}

/** The OwnedAccessKey a token is minted with: a token lives no longer than this very object. */
export interface MintingKey {
  readonly name: string;
  readonly uid: string;
}

/** The requested scope reaches beyond the caller's own key scope. */
export class ScopeWidens extends Error {
  override readonly name = 'ScopeWidens';
}

/**
 * The lifetime in seconds: `ttl` (default {@link DEFAULT_DIRECT_TOKEN_TTL_SECONDS} when 0 or
 * unset), at most `accessKeyMaxTTLSeconds` when that is set, and never above
 * {@link MAX_DIRECT_TOKEN_TTL_SECONDS}.
 */
export function directTokenTtlSeconds(
  ttl: number | undefined,
  accessKeyMaxTTLSeconds: number | undefined,
): number {
  const requested = ttl && ttl > 0 ? ttl : DEFAULT_DIRECT_TOKEN_TTL_SECONDS;
  const caps = [MAX_DIRECT_TOKEN_TTL_SECONDS];
  if (accessKeyMaxTTLSeconds && accessKeyMaxTTLSeconds > 0) caps.push(accessKeyMaxTTLSeconds);
  return Math.min(requested, ...caps);
}

/** A request into a connected cluster or a virtual cluster, as the scope library sees it. */
const requestInto = (target: Pick<RequestAttributes, 'target' | 'cluster' | 'project' | 'virtualCluster'>) =>
  nonResourceRequest('get', '/', target);

/**
 * The token's scope: the requested one, which may only narrow what the caller's access key may
 * reach. A request without a scope inherits the key's. When the key's scope narrows, the requested
 * scope must name the clusters or virtual clusters the token is for, each of which the key's scope
 * must allow (by the scope library's own rules); anything else is refused ({@link ScopeWidens})
 * rather than silently widened.
 */
export function directTokenScope(
  keyScope: Scope | undefined,
  requested: Scope | undefined,
): Scope | undefined {
  if (requested === undefined || !scopeNarrows(requested)) return keyScope;
  const partial = partialWildcard(requested);
  if (partial !== undefined) {
    throw new ScopeWidens(
      `"${partial}": a wildcard may only stand for a whole name (\`*\`); names are matched exactly`,
    );
  }
  if (keyScope === undefined || !scopeNarrows(keyScope)) return requested;
  const clusters = requested.clusters ?? [];
  const virtualClusters = requested.virtualClusters ?? [];
  if (clusters.length + virtualClusters.length === 0) {
    throw new ScopeWidens(
      'with a scoped access key, the token scope must name its clusters or virtual clusters',
    );
  }
  for (const { cluster } of clusters) {
    const decision = checkScope(keyScope, requestInto({ target: 'Cluster', cluster }));
    if (cluster === '*' || !decision.allowed)
      throw new ScopeWidens(`the access key scope does not allow cluster ${cluster}`);
  }
  for (const { project, virtualCluster } of virtualClusters) {
    const decision = checkScope(
      keyScope,
      requestInto({
        target: 'ProjectVirtualCluster',
        project,
        virtualCluster: { name: virtualCluster, namespace: '' },
      }),
    );
    if (project === '*' || virtualCluster === '*' || !decision.allowed) {
      throw new ScopeWidens(
        `the access key scope does not allow virtual cluster ${project}/${virtualCluster}`,
      );
    }
  }
  return requested;
}

/** A name of the scope's projects, clusters or virtual clusters with a `*` that is not the whole name. */
function partialWildcard(scope: Scope): string | undefined {
  const names = [
    ...(scope.projects ?? []).map((entry) => entry.project),
    ...(scope.clusters ?? []).map((entry) => entry.cluster),
    ...(scope.spaces ?? []).flatMap((entry) => [entry.project, entry.space]),
    ...(scope.virtualClusters ?? []).flatMap((entry) => [entry.project, entry.virtualCluster]),
  ];
  return names.find((name) => name !== '*' && name.includes('*'));
}

/** `aud`: the clusters the scope names, or the platform audience when it names none (or all). */
export function directTokenAudience(scope: Scope | undefined): string[] {
  const clusters = (scope?.clusters ?? []).map((entry) => entry.cluster);
  const virtual = (scope?.virtualClusters ?? []).map((entry) => `${entry.project}/${entry.virtualCluster}`);
  const named = [...clusters, ...virtual];
  if (named.length === 0 || named.some((name) => name.includes('*'))) return [PLATFORM_AUDIENCE];
  return [...new Set(named)].sort();
}

interface MintInput {
  readonly subject: TokenSubject;
  /** The owner's token generation now (a User's `spec.tokenGeneration`, else 0). */
  readonly generation: number;
  readonly accessKey: MintingKey;
  readonly scope: Scope | undefined;
  readonly ttlSeconds: number;
  readonly issuer: string;
  readonly key: SigningKey;
  readonly now: number;
}

/** Signs the token. */
/**
 * Imported private keys by ring entry: importing a JWK costs more than the signature itself, and
 * a key signs every token of its period. Entries go with their ring objects (a rotation or re-read
 * makes new ones), so nothing outlives the ring that holds it.
 */
const importedKeys = new WeakMap<SigningKey, ReturnType<typeof importJWK>>();

function privateKeyOf(key: SigningKey): ReturnType<typeof importJWK> {
  let imported = importedKeys.get(key);
  if (!imported) {
    imported = importJWK(key.privateJwk, SIGNING_ALGORITHM);
    // A failed import is not remembered.
    imported.catch(() => importedKeys.delete(key));
    importedKeys.set(key, imported);
  }
  return imported;
}

export async function mintDirectClusterEndpointToken(input: MintInput): Promise<string> {
  const { subject, generation, accessKey, scope, ttlSeconds, issuer, key, now } = input;
  const iat = Math.floor(now / 1000);
  const privateKey = await privateKeyOf(key);
  return new SignJWT({
    groups: [...subject.groups],
    [PLATFORM_CLAIM]: {
      uid: subject.uid ?? '',
      name: subject.name,
      kind: subject.kind,
      gen: generation,
      accessKey: { name: accessKey.name, uid: accessKey.uid },
      ...(scope ? { scope } : {}),
    },
  })
    .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid: key.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(subject.username)
    .setAudience(directTokenAudience(scope))
    .setIssuedAt(iat)
    .setNotBefore(iat)
    .setExpirationTime(iat + ttlSeconds)
    .sign(privateKey);
}

/** The OpenID Connect discovery document a cluster's JWT authenticator reads (`/.well-known/openid-configuration`). */
export function openIdConfiguration(issuer: string, jwksUri: string) {
  return {
    issuer,
    jwks_uri: jwksUri,
    response_types_supported: ['id_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [SIGNING_ALGORITHM],
    claims_supported: ['sub', 'aud', 'exp', 'iat', 'nbf', 'iss', 'groups', PLATFORM_CLAIM],
  };
}

/** A User's token generation: `spec.tokenGeneration`, 0 when unset. Teams and subjects have none (0). */
export function tokenGenerationOf(user: User | undefined): number {
  return user?.spec.tokenGeneration ?? 0;
}

/** The `management.platform` claim as the platform reads it back; anything else fails the token. */
const PlatformClaimSchema = z.object({
  uid: z.string(),
  name: z.string().min(1),
  kind: z.enum(['User', 'Team', 'Subject']),
  gen: z.number().int().min(0),
  accessKey: z.object({ name: z.string().min(1), uid: z.string().min(1) }),
  scope: ScopeSchema.optional(),
});
export type PlatformClaim = z.infer<typeof PlatformClaimSchema>;

const VerifiedClaimsSchema = z.object({
  sub: z.string().min(1),
  aud: z.union([z.string(), z.array(z.string())]),
  groups: z.array(z.string()),
  [PLATFORM_CLAIM]: PlatformClaimSchema,
});

/** A token whose signature, issuer and lifetime hold; whether it is still in force is not decided yet. */
export interface VerifiedDirectToken {
  readonly username: string;
  readonly groups: readonly string[];
  readonly audiences: readonly string[];
  readonly claim: PlatformClaim;
}

/** Shaped like a JWS compact serialization (three base64url parts): never an access key. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}

/**
 * Verifies a DirectClusterEndpointToken as a cluster's JWT authenticator does (signature by a
 * published key of `keys`, `iss`, `exp`/`nbf` at `now`, ES256 only) and reads its claims; tokens
 * minted before tokens named their access key (no `accessKey` claim) are refused too. Undefined
 * for any failure: a caller cannot tell one from another.
 */
export async function verifyDirectClusterEndpointToken(
  token: string,
  input: { readonly issuer: string; readonly keys: readonly SigningKey[]; readonly now: number },
): Promise<VerifiedDirectToken | undefined> {
  if (!looksLikeJwt(token)) return undefined;
  try {
    const { payload } = await jwtVerify(token, createLocalJWKSet(publicJwks(input.keys)), {
      issuer: input.issuer,
      algorithms: [SIGNING_ALGORITHM],
      typ: 'JWT',
      currentDate: new Date(input.now),
      requiredClaims: ['exp', 'sub', 'aud'],
    });
    const claims = VerifiedClaimsSchema.safeParse(payload);
    if (!claims.success) return undefined;
    const { sub, aud, groups } = claims.data;
    return {
      username: sub,
      groups,
      audiences: typeof aud === 'string' ? [aud] : aud,
      claim: claims.data[PLATFORM_CLAIM],
    };
  } catch {
    return undefined;
  }
}

/** What the revocation check reads: the informer caches of keys, users and teams. */
export interface DirectTokenOwners {
  readonly key: (name: string) => OwnedAccessKey | undefined;
  readonly user: (name: string) => User | undefined;
  readonly team: (name: string) => Team | undefined;
}

/**
 * Why a verified token is no longer in force, or undefined while it is. The token ends with the
 * very objects it was minted from:
 * - its access key: gone, or another object under that name (another uid), disabled, being
 *   deleted, or now acting for someone else than the token's owner;
 * - its owner: a User or Team that is gone or another object under that name (another uid); a
 *   disabled User;
 * - a User's `spec.tokenGeneration` that differs from the token's `gen` (raised to revoke every
 *   token; the generation of a team or subject token is 0).
 * The reasons are for logs and tests; a reviewer is only ever told "not authenticated".
 */
export function directTokenRevocation(claim: PlatformClaim, owners: DirectTokenOwners): string | undefined {
  const key = owners.key(claim.accessKey.name);
  if (!key || key.metadata.uid !== claim.accessKey.uid) return 'its access key is gone';
  if (key.spec.disabled === true || key.metadata.deletionTimestamp) return 'its access key is disabled';
  const keyOwner =
    claim.kind === 'User' ? key.spec.user : claim.kind === 'Team' ? key.spec.team : key.spec.subject;
  if (keyOwner !== claim.name) return 'its access key acts for someone else';
  if (claim.kind === 'User') {
    const user = owners.user(claim.name);
    if (!user || user.metadata.uid !== claim.uid) return 'its user is gone';
    if (user.spec.disabled === true) return 'its user is disabled';
    if (tokenGenerationOf(user) !== claim.gen) return "its user's tokens were revoked";
    return undefined;
  }
  if (claim.kind === 'Team') {
    const team = owners.team(claim.name);
    if (!team || team.metadata.uid !== claim.uid) return 'its team is gone';
  }
  if (claim.gen !== 0) return 'its generation is unknown';
  return undefined;
}
