import { importJWK, SignJWT } from 'jose';
import type { Scope } from '../api/scope.ts';
import { nonResourceRequest, type RequestAttributes } from '../authz/attributes.ts';
import { checkScope, scopeNarrows } from '../authz/scope.ts';
import { DEFAULT_ROTATION_POLICY, SIGNING_ALGORITHM, type SigningKey } from './signing-keys.ts';

/**
 * DirectClusterEndpointTokens: JWTs a cluster verifies on its own (OIDC discovery and JWKS from the
 * gateway, no call to the platform per request).
 *
 * Claims: `iss` the platform's issuer URL; `sub` the caller's Kubernetes username; `aud` the
 * clusters the scope allows (connected cluster names, `<project>/<virtual cluster>` for virtual
 * clusters) or {@link PLATFORM_AUDIENCE} when the scope does not name particular clusters;
 * `groups` the caller's platform groups; `iat`, `nbf`, `exp`; and under `management.platform` the
 * caller's `uid`, `name`, `kind`, `gen` (always 0: revocation is by expiry and key rotation) and the
 * token's `scope`.
 */

export const PLATFORM_AUDIENCE = 'management.platform';
export const PLATFORM_CLAIM = 'management.platform';
/** Lifetime when `spec.ttl` is 0 or unset. */
export const DEFAULT_DIRECT_TOKEN_TTL_SECONDS = 3600;
/** No token outlives this (signing keys are kept this long after they retire). */
export const MAX_DIRECT_TOKEN_TTL_SECONDS = DEFAULT_ROTATION_POLICY.maxTokenTtlMs / 1000;

export interface TokenSubject {
  readonly username: string;
  readonly groups: readonly string[];
  readonly uid: string | undefined;
  /** The User or Team name (or the subject). */
  readonly name: string;
  readonly kind: 'User' | 'Team' | 'Subject';
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

export interface MintInput {
  readonly subject: TokenSubject;
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
  const { subject, scope, ttlSeconds, issuer, key, now } = input;
  const iat = Math.floor(now / 1000);
  const privateKey = await privateKeyOf(key);
  return new SignJWT({
    groups: [...subject.groups],
    [PLATFORM_CLAIM]: {
      uid: subject.uid ?? '',
      name: subject.name,
      kind: subject.kind,
      gen: 0,
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
