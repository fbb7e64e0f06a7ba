import type { ConfigStatus } from '../../api/config.ts';
import { DirectClusterEndpointTokenSchema } from '../../api/directclusterendpointtoken.ts';
import type { User } from '../../api/identity.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { resources } from '../../api/resources.ts';
import {
  conflict,
  forbidden,
  invalidFromIssues,
  notFound,
  refusePrototypeKeys,
  serviceUnavailable,
} from '../../api/status.ts';
import { validateScope } from '../../authz/scope-validation.ts';
import type { Endpoint } from '../../http/endpoint.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import {
  type DirectTokenOwners,
  directTokenScope,
  directTokenTtlSeconds,
  type MintingKey,
  mintDirectClusterEndpointToken,
  openIdConfiguration,
  ScopeWidens,
  tokenGenerationOf,
} from '../../identity/direct-token.ts';
import { GROUP_ADMINS } from '../../identity/groups.ts';
import type { SigningKeyRing } from '../../identity/signing-key-ring.ts';
import { currentSigningKey, publicJwks } from '../../identity/signing-keys.ts';
import type { Clock } from '../../runtime/clock.ts';
import { isConflict, isNotFound } from '../../runtime/errors.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectPath } from '../../runtime/kube-client.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import type { Upstream } from '../proxy/upstream.ts';
import type { GatewayEndpoint } from './endpoint.ts';
import { rbacForbidden } from './rbac.ts';

/** Where the gateway publishes the JWKS its discovery document names. */
export const JWKS_PATH = '/openid/v1/jwks';
export const OPENID_CONFIGURATION_PATH = '/.well-known/openid-configuration';

export interface DirectTokenDeps {
  readonly ring: SigningKeyRing;
  readonly clock: Clock;
  /**
   * The issuer URL (`iss`), where the discovery document is served: the gateway's external URL
   * (read per token, since a gateway on port 0 knows its URL only once it listens).
   */
  readonly issuer: () => string;
  readonly config: () => ConfigStatus;
  /** The informer caches of keys, users and teams the authenticator keeps. */
  readonly owners: DirectTokenOwners;
  /**
   * The caller's key read from the apiserver, for a key the caches do not hold yet (a key used
   * the moment it was created authenticates through such a read too).
   */
  readonly readKey: (name: string) => Promise<OwnedAccessKey | undefined>;
}

/**
 * `POST directclusterendpointtokens`: a JWT for the caller, narrowed by the requested scope, and
 * ending no later than the caller's key. What the token is for is only known from the body, so
 * the endpoint checks the key's scope itself: the requested scope may only narrow it. The token
 * names the key object that minted it and carries its owner's token generation, so that it ends
 * with either (`directTokenRevocation`).
 */
export function directTokensEndpoint(deps: DirectTokenDeps): GatewayEndpoint {
  return {
    name: 'direct cluster endpoint tokens',
    route: { kind: 'resource', resource: 'directclusterendpointtokens', verbs: ['create'] },
    authentication: 'key',
    scope: 'handler',
    sensitive: true,
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      // apiVersion and kind may be left out (the path names them); wrong ones are refused.
      const body = request.object();
      refusePrototypeKeys('DirectClusterEndpointToken', '', body);
      const parsed = DirectClusterEndpointTokenSchema.safeParse({
        apiVersion: GROUP_VERSION,
        kind: 'DirectClusterEndpointToken',
        ...body,
      });
      if (!parsed.success) {
        throw invalidFromIssues('DirectClusterEndpointToken', '', parsed.error.issues);
      }
      const spec = parsed.data.spec ?? {};
      let scope: ReturnType<typeof directTokenScope>;
      try {
        scope = directTokenScope(identity.accessKey.scope, spec.scope);
      } catch (err) {
        if (err instanceof ScopeWidens) throw forbidden(err.message);
        throw err;
      }
      const now = deps.clock.now();
      const key = currentSigningKey(await deps.ring.current(), now);
      if (!key) throw serviceUnavailable('no token signing key is available yet; retry shortly');
      const ttlSeconds = Math.min(
        directTokenTtlSeconds(spec.ttl, deps.config().auth.accessKeyMaxTTLSeconds),
        secondsLeft(identity.accessKey.expiresAt, now),
      );
      const accessKey = await mintingKey(deps, identity.accessKey.name);
      const token = await mintDirectClusterEndpointToken({
        subject: identity,
        generation: identity.kind === 'User' ? tokenGenerationOf(deps.owners.user(identity.name)) : 0,
        accessKey,
        scope,
        ttlSeconds,
        issuer: deps.issuer(),
        key,
        now,
      });
      // The deprecated scope fields (rules, allowPlatformCli) still narrow the token; the caller
      // is told, as admission tells the writer of a key (kubectl prints `Warning: ...`).
      const warnings = validateScope(spec.scope).warnings.map((warning) => `299 - "${warning}"`);
      return {
        code: 201,
        object: {
          apiVersion: GROUP_VERSION,
          kind: 'DirectClusterEndpointToken',
          metadata: { creationTimestamp: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z') },
          spec,
          status: { token },
        },
        ...(warnings.length > 0 ? { headers: { warning: warnings } } : {}),
      };
    },
  };
}

/** The name and uid of the caller's key object: from the cache, else read (a key not cached yet). */
async function mintingKey(deps: DirectTokenDeps, name: string): Promise<MintingKey> {
  const key = deps.owners.key(name) ?? (await deps.readKey(name));
  const uid = key?.metadata.uid;
  if (!uid) throw serviceUnavailable('the access key is not readable yet; retry shortly');
  return { name, uid };
}

/** Whole seconds until `ends` (at least 1), or infinity for a key that never ends. */
export function secondsLeft(ends: Date | null, now: number): number {
  return ends === null ? Number.POSITIVE_INFINITY : Math.max(1, Math.floor((ends.getTime() - now) / 1000));
}

/**
 * The public documents a cluster's JWT authenticator reads, without authentication: discovery and
 * JWKS, under the issuer URL's path.
 */
export function oidcEndpoints(issuerPath: string, issuer: () => string, ring: SigningKeyRing): Endpoint[] {
  const document = (path: string, build: () => Promise<unknown> | unknown): Endpoint => ({
    name: `oidc ${path}`,
    route: { kind: 'path', path: `${issuerPath}${path}`, methods: ['GET'] },
    authentication: 'none',
    handle: async () => {
      let body: unknown;
      try {
        body = await build();
      } catch {
        throw serviceUnavailable('the document is not available yet; retry shortly');
      }
      return {
        code: 200,
        body: JSON.stringify(body),
        contentType: 'application/json',
        headers: { 'cache-control': 'public, max-age=60' },
      };
    },
  });
  return [
    document(OPENID_CONFIGURATION_PATH, () => openIdConfiguration(issuer(), `${issuer()}${JWKS_PATH}`)),
    document(JWKS_PATH, async () => publicJwks(await ring.current())),
  ];
}

export interface TokenRevocationDeps {
  /** The gateway's own client: the person may not write their User themselves. */
  readonly api: KubeApi;
  readonly upstream: Upstream;
  /** The Users cache the checks read (`DirectTokenOwners.user`). */
  readonly cachedUser: (name: string) => User | undefined;
  readonly clock: Clock;
  /** How long the answer waits for the cache to hold the new generation. Default 5 s. */
  readonly cacheWaitMs?: number;
}

/** The subresource of a User that revokes all its direct cluster endpoint tokens. */
export const TOKEN_REVOCATION_SUBRESOURCE = 'tokenrevocation';

/**
 * `POST users/<name>/tokenrevocation`: "revoke all my tokens". Raises the User's
 * `spec.tokenGeneration` by one, so that every DirectClusterEndpointToken minted for the user
 * until now is refused wherever the platform checks it (their `gen` is the old generation); tokens
 * minted afterwards carry the new one. Allowed for the user themselves, platform admins, and
 * whoever RBAC allows `create` on `users/tokenrevocation`. The write is the gateway's (a person
 * may not edit their own User), guarded by the User's resourceVersion, so two revocations at once
 * each raise the generation. The answer waits (a few seconds at most) until this gateway's cache
 * holds the new generation, so that when it comes the tokens are refused here; other replicas
 * follow as their caches do. Answers a Success `Status` naming the new generation.
 */
export function tokenRevocationEndpoint(deps: TokenRevocationDeps): GatewayEndpoint {
  return {
    name: 'user token revocation',
    route: {
      kind: 'resource',
      resource: 'users',
      subresource: TOKEN_REVOCATION_SUBRESOURCE,
      verbs: ['create'],
    },
    authentication: 'key',
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      const { attributes, signal } = request;
      const self = identity.kind === 'User' && identity.name === attributes.name;
      if (
        !self &&
        !identity.groups.includes(GROUP_ADMINS) &&
        !(await subjectAccessAllowed(deps.upstream, identity, attributes, signal))
      ) {
        throw rbacForbidden(identity.username, attributes);
      }
      const generation = await raiseTokenGeneration(deps.api, attributes.name);
      await untilCached(deps, attributes.name, generation, signal);
      return {
        code: 201,
        object: {
          apiVersion: 'v1',
          kind: 'Status',
          metadata: {},
          status: 'Success',
          message: `every direct cluster endpoint token of user ${attributes.name} minted until now is revoked; its token generation is ${generation}`,
          details: { name: attributes.name, group: 'management.platform', kind: 'users' },
          code: 201,
        },
      };
    },
  };
}

/** Resolves once the cached User holds `generation` (or a later one), or after `cacheWaitMs`. */
async function untilCached(
  deps: TokenRevocationDeps,
  name: string,
  generation: number,
  signal: AbortSignal,
): Promise<void> {
  const deadline = deps.clock.now() + (deps.cacheWaitMs ?? 5000);
  while (!signal.aborted && deps.clock.now() < deadline) {
    const cached = deps.cachedUser(name);
    if (cached && tokenGenerationOf(cached) >= generation) return;
    await new Promise((resolve) => deps.clock.setTimer(20, () => resolve(undefined)));
  }
}

/** Raises `spec.tokenGeneration` by one from the stored User (not a cache); the new generation. */
async function raiseTokenGeneration(api: KubeApi, name: string): Promise<number> {
  const path = objectPath(resources.users, undefined, name);
  for (let attempt = 0; ; attempt++) {
    let user: User;
    try {
      user = await api.request<User>({ method: 'GET', path });
    } catch (err) {
      if (isNotFound(err))
        throw notFound(`users.management.platform "${name}" not found`, {
          name,
          group: 'management.platform',
          kind: 'users',
        });
      throw err;
    }
    const generation = tokenGenerationOf(user) + 1;
    try {
      await api.request({
        method: 'PATCH',
        path,
        contentType: 'application/merge-patch+json',
        body: {
          metadata: { resourceVersion: user.metadata.resourceVersion },
          spec: { tokenGeneration: generation },
        },
      });
      return generation;
    } catch (err) {
      if (!isConflict(err)) throw err;
      if (attempt >= 4) throw conflict(`user ${name} changed while its tokens were revoked; retry`);
    }
  }
}
