import { canonicalScopeRole, type Scope } from '../../api/scope.ts';
import { badRequest, forbidden, notFound, StatusError } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { checkScope, scopeNarrows } from '../../authz/scope.ts';
import { type AuthFailureLimiter, keySubject } from '../../http/failure-limiter.ts';
import type { AuthenticatedIdentity, AuthenticationResult } from '../../identity/authenticate.ts';
import {
  type DirectTokenOwners,
  directTokenRevocation,
  looksLikeJwt,
  PLATFORM_AUDIENCE,
  type VerifiedDirectToken,
  verifyDirectClusterEndpointToken,
} from '../../identity/direct-token.ts';
import { ACCESS_KEY_EXTRA } from '../../identity/groups.ts';
import type { SigningKeyRing } from '../../identity/signing-key-ring.ts';
import type { Clock } from '../../runtime/clock.ts';
import { isJsonObject } from '../../runtime/json.ts';
import { authenticateToken, type KeyAuthenticator, keyIdOf } from '../key-authentication.ts';
import type { GatewayEndpoint } from './endpoint.ts';

/**
 * The TokenReview webhook (`authentication.k8s.io/v1`, the webhook token authenticator protocol)
 * that lets other clusters trust platform access keys: a connected cluster or virtual cluster
 * runs kube-apiserver with `--authentication-token-webhook-config-file` pointing at
 *
 * - `/kubernetes/tokenreview/cluster/<cluster>` (a connected cluster), or
 * - `/kubernetes/tokenreview/project/<project>/virtualcluster/<name>` (a project's virtual cluster),
 *
 * and every bearer token it does not know itself is reviewed here. A review is answered
 * `authenticated: true` with the key's username, groups and extra when the key is valid and its
 * scope allows requests into that cluster or virtual cluster; `authenticated: false` otherwise
 * (malformed, unknown, wrong, disabled, expired keys, or out of scope), never with a reason that
 * tells one from the other. The reviewing cluster's own RBAC then decides, on the same
 * `platform:user:<u>` and `platform:team:<t>` groups as the management API.
 *
 * A DirectClusterEndpointToken (a JWT) is reviewed too ({@link reviewDirectToken}): accepted when
 * its signature, issuer and lifetime hold, its audience names the target (or is the platform
 * audience), its scope admits the target, and it is still in force (`directTokenRevocation`: its
 * key, its owner and the owner's token generation, from the caches); answered with its claims'
 * username and groups, the owner's uid, and its key's name as the access-key extra. Unlike a
 * cluster that verifies such tokens offline, a cluster reviewing them here sees a revocation as
 * soon as the gateway's caches do (plus its own review cache TTL).
 *
 * The reviewing apiserver authenticates itself (docs/trust.md): its webhook kubeconfig carries a
 * reviewer credential, an access key whose scope holds the role `agent` and lists the cluster in
 * `clusters` (a connected cluster), or holds the role `vcluster` with an entry covering the
 * virtual cluster ({@link reviewerAllowed}). Anyone else gets 401 or 403 and reviews nothing. The
 * reviewed tokens' failures count per key id only (the reviewer speaks for many clients), and a
 * key whose secret verifies is accepted whatever failures others made with its id: bogus reviews
 * cannot turn valid keys away.
 */

export const TOKEN_REVIEW_BASE = '/kubernetes/tokenreview';

/**
 * The namespace of a project by name (`projectNamespaceName`: the namespace recorded on the
 * Project, otherwise the configured prefix's), for the virtual clusters a scope names by namespace.
 */
export type ProjectNamespaceOf = (project: string) => string;

export type ReviewTarget =
  | { readonly kind: 'Cluster'; readonly cluster: string }
  | { readonly kind: 'VirtualCluster'; readonly project: string; readonly virtualCluster: string };

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** The cluster a review path is for; 404 for other paths. `path` starts after {@link TOKEN_REVIEW_BASE}. */
export function reviewTarget(path: string): ReviewTarget | StatusError {
  const parts = path.split('/').filter((part) => part !== '');
  if (parts.length === 2 && parts[0] === 'cluster' && NAME.test(parts[1]!)) {
    return { kind: 'Cluster', cluster: parts[1]! };
  }
  if (
    parts.length === 4 &&
    parts[0] === 'project' &&
    parts[2] === 'virtualcluster' &&
    NAME.test(parts[1]!) &&
    NAME.test(parts[3]!)
  ) {
    return { kind: 'VirtualCluster', project: parts[1]!, virtualCluster: parts[3]! };
  }
  return notFound(
    'not a token review endpoint: use /kubernetes/tokenreview/cluster/<cluster> or /kubernetes/tokenreview/project/<project>/virtualcluster/<name>',
  );
}

/** The attributes of "any request into the target", as far as they are known at authentication time. */
export function targetAttributes(
  target: ReviewTarget,
  projectNamespace: ProjectNamespaceOf,
): RequestAttributes {
  return target.kind === 'Cluster'
    ? nonResourceRequest('get', '/', { target: 'Cluster', cluster: target.cluster })
    : nonResourceRequest('get', '/', {
        target: 'ProjectVirtualCluster',
        project: target.project,
        virtualCluster: {
          name: target.virtualCluster,
          namespace: projectNamespace(target.project),
        },
      });
}

/**
 * Whether a scope admits requests into the target at all. Projects, virtual clusters, clusters
 * and roles are decided by {@link checkScope}; a deprecated rule admits the target when its
 * `requestTargets`, `cluster` and `virtualClusters` do (its verbs and resources are left to the
 * reviewing cluster's RBAC, which sees the request).
 */
export function scopeAdmitsTarget(
  scope: Scope | undefined,
  target: ReviewTarget,
  projectNamespace: ProjectNamespaceOf,
): boolean {
  if (!scopeNarrows(scope)) return true;
  const attributes = targetAttributes(target, projectNamespace);
  if (checkScope(scope, attributes).allowed) return true;
  if (checkScope(scope, { ...attributes, resourceRequest: true }).allowed) return true;
  return (scope?.rules ?? []).some((rule) => {
    const targets = rule.requestTargets ?? [];
    if (targets.length > 0 && !(targets as readonly string[]).includes(attributes.target)) return false;
    if (rule.cluster) {
      if (target.kind !== 'Cluster' || target.cluster !== rule.cluster) return false;
    }
    const virtualClusters = rule.virtualClusters ?? [];
    if (virtualClusters.length > 0 && target.kind === 'VirtualCluster') {
      const vc = attributes.virtualCluster!;
      return virtualClusters.some(
        (entry) =>
          (!entry.name || entry.name === vc.name) && (!entry.namespace || entry.namespace === vc.namespace),
      );
    }
    return true;
  });
}

export interface TokenReviewRequest {
  readonly apiVersion: string;
  readonly token: string;
  readonly audiences: readonly string[] | undefined;
}

/** Reads a TokenReview request body (v1 or v1beta1). */
export function parseTokenReview(body: unknown): TokenReviewRequest | StatusError {
  if (!isJsonObject(body) || body.kind !== 'TokenReview') return badRequest('the body must be a TokenReview');
  const apiVersion = body.apiVersion;
  if (apiVersion !== 'authentication.k8s.io/v1' && apiVersion !== 'authentication.k8s.io/v1beta1') {
    return badRequest('the TokenReview must be authentication.k8s.io/v1 or v1beta1');
  }
  const spec = isJsonObject(body.spec) ? body.spec : {};
  if (typeof spec.token !== 'string') return badRequest('spec.token must be a string');
  const audiences =
    Array.isArray(spec.audiences) && spec.audiences.every((a) => typeof a === 'string')
      ? (spec.audiences as string[])
      : undefined;
  return { apiVersion, token: spec.token, audiences };
}

/** Who a review admits: the user info the reviewing cluster is told. */
export interface ReviewedUser {
  readonly username: string;
  readonly uid: string | undefined;
  readonly groups: readonly string[];
  /** The access key presented, or the one that minted the direct token presented. */
  readonly accessKeyName: string;
}

/** The user info of an access key's identity. */
export const reviewedKeyUser = (identity: AuthenticatedIdentity): ReviewedUser => ({
  username: identity.username,
  uid: identity.uid,
  groups: identity.groups,
  accessKeyName: identity.accessKey.name,
});

/** The answer to a review. */
export function tokenReviewResponse(
  request: TokenReviewRequest,
  identity: ReviewedUser | undefined,
): Record<string, unknown> {
  const status = identity
    ? {
        authenticated: true,
        user: {
          username: identity.username,
          ...(identity.uid ? { uid: identity.uid } : {}),
          groups: [...identity.groups],
          extra: { [ACCESS_KEY_EXTRA]: [identity.accessKeyName] },
        },
        ...(request.audiences ? { audiences: [...request.audiences] } : {}),
      }
    : { authenticated: false, error: 'the token is not a valid platform access key for this cluster' };
  return {
    apiVersion: request.apiVersion,
    kind: 'TokenReview',
    metadata: { creationTimestamp: null },
    spec: {},
    status,
  };
}

/** The identity a review admits, or undefined. */
export function reviewDecision(
  result: AuthenticationResult,
  target: ReviewTarget,
  projectNamespace: ProjectNamespaceOf,
): ReviewedUser | undefined {
  if (!result.ok) return undefined;
  return scopeAdmitsTarget(result.identity.accessKey.scope, target, projectNamespace)
    ? reviewedKeyUser(result.identity)
    : undefined;
}

/** The audience a direct token for the target names (`aud` of directTokenAudience). */
export function targetAudience(target: ReviewTarget): string {
  return target.kind === 'Cluster' ? target.cluster : `${target.project}/${target.virtualCluster}`;
}

/**
 * The user a verified direct token is, for the target, or undefined: its audience must name the
 * target (or be the platform audience of a token whose scope names no clusters), its scope must
 * admit the target, and it must still be in force ({@link directTokenRevocation}).
 */
export function directTokenReviewDecision(
  token: VerifiedDirectToken | undefined,
  target: ReviewTarget,
  projectNamespace: ProjectNamespaceOf,
  owners: DirectTokenOwners,
): ReviewedUser | undefined {
  if (!token) return undefined;
  const audience = targetAudience(target);
  if (!token.audiences.includes(audience) && !token.audiences.includes(PLATFORM_AUDIENCE)) return undefined;
  if (!scopeAdmitsTarget(token.claim.scope, target, projectNamespace)) return undefined;
  if (directTokenRevocation(token.claim, owners) !== undefined) return undefined;
  return {
    username: token.username,
    uid: token.claim.uid || undefined,
    groups: token.groups,
    accessKeyName: token.claim.accessKey.name,
  };
}

/**
 * Whether a reviewer credential's scope may review tokens for `target`: the role `agent` and the
 * cluster in the scope's `clusters` (`*` for every cluster), or the role `vcluster` in an entry
 * whose `projects` and `virtualClusters` (each: empty = all, `*` = all) cover the virtual cluster.
 */
export function reviewerAllowed(scope: Scope | undefined, target: ReviewTarget): boolean {
  const roles = scope?.roles ?? [];
  const covers = (names: readonly string[] | undefined, name: string) =>
    names === undefined || names.length === 0 || names.includes('*') || names.includes(name);
  if (target.kind === 'Cluster') {
    return (
      roles.some((entry) => canonicalScopeRole(entry.role) === 'agent') &&
      (scope?.clusters ?? []).some((entry) => entry.cluster === '*' || entry.cluster === target.cluster)
    );
  }
  return roles.some(
    (entry) =>
      canonicalScopeRole(entry.role) === 'vcluster' &&
      covers(entry.projects, target.project) &&
      covers(entry.virtualClusters, target.virtualCluster),
  );
}

export interface TokenReviewDeps {
  readonly authenticator: KeyAuthenticator;
  readonly failures: AuthFailureLimiter;
  /** The namespace of a named project, by the project-namespace rule (its recorded one first), from the caches. */
  readonly projectNamespace: ProjectNamespaceOf;
  /** What reviewing DirectClusterEndpointTokens needs: the signing keys, the issuer, the caches. */
  readonly directTokens: {
    readonly ring: SigningKeyRing;
    readonly issuer: () => string;
    readonly clock: Clock;
    readonly owners: DirectTokenOwners;
  };
}

/** `POST /kubernetes/tokenreview/...`: the webhook, for authenticated reviewers. */
export function tokenReviewEndpoint(deps: TokenReviewDeps): GatewayEndpoint {
  return {
    name: 'tokenreview',
    route: {
      kind: 'path',
      path: TOKEN_REVIEW_BASE,
      prefix: true,
      methods: ['POST'],
      attributes: (method, path) => ({
        target: 'Management',
        verb: method === 'POST' ? 'create' : method.toLowerCase(),
        resourceRequest: true,
        apiGroup: 'authentication.k8s.io',
        resource: 'tokenreviews',
        subresource: '',
        name: '',
        namespace: '',
        path,
      }),
    },
    authentication: 'key',
    scope: 'handler',
    sensitive: true,
    handle: async (request) => {
      const target = reviewTarget(request.path.slice(TOKEN_REVIEW_BASE.length));
      if (target instanceof StatusError) throw target;
      const reviewer = request.identity;
      if (!reviewer || !reviewerAllowed(reviewer.accessKey.scope, target)) {
        throw forbidden(
          'this access key is no reviewer credential for this cluster: see docs/trust.md (role agent with the cluster in clusters, or role vcluster)',
        );
      }
      const review = parseTokenReview(request.object());
      if (review instanceof StatusError) throw review;
      if (looksLikeJwt(review.token)) {
        const identity = await reviewDirectToken(deps, review.token, target);
        return {
          code: 200,
          object: tokenReviewResponse(review, identity),
          auditAnnotations: { 'authentication.platform/authenticated': String(identity !== undefined) },
        };
      }
      const keyId = keyIdOf(review.token);
      const subject = keyId === undefined ? undefined : keySubject(keyId);
      const result = await authenticateToken(
        deps.authenticator,
        review.token,
        deps.failures.mayBeBlocked(undefined, subject),
      );
      if (!result.ok) await deps.failures.failed(undefined, subject);
      const identity = reviewDecision(result, target, deps.projectNamespace);
      return {
        code: 200,
        object: tokenReviewResponse(review, identity),
        auditAnnotations: { 'authentication.platform/authenticated': String(identity !== undefined) },
      };
    },
  };
}

/**
 * A direct token's review: verified against the published keys (no failure counting: it names no
 * key id, and verifying costs one signature check), then decided from the caches.
 */
async function reviewDirectToken(
  deps: TokenReviewDeps,
  token: string,
  target: ReviewTarget,
): Promise<ReviewedUser | undefined> {
  const { ring, issuer, clock, owners } = deps.directTokens;
  const keys = await ring.current().catch(() => undefined);
  if (!keys) return undefined;
  const verified = await verifyDirectClusterEndpointToken(token, {
    issuer: issuer(),
    keys,
    now: clock.now(),
  });
  return directTokenReviewDecision(verified, target, deps.projectNamespace, owners);
}
