import type { ConfigStatus } from '../../api/config.ts';
import { DirectClusterEndpointTokenSchema } from '../../api/directclusterendpointtoken.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import { forbidden, invalidFromIssues, serviceUnavailable } from '../../api/status.ts';
import type { Endpoint } from '../../http/endpoint.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import {
  directTokenScope,
  directTokenTtlSeconds,
  mintDirectClusterEndpointToken,
  openIdConfiguration,
  ScopeWidens,
} from '../../identity/direct-token.ts';
import {
  currentSigningKey,
  publicJwks,
  type SigningKey,
  type SigningKeyStore,
} from '../../identity/signing-keys.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { GatewayEndpoint } from './endpoint.ts';

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
}

/**
 * The key ring, read (and rotated when due) at most once per `ringCacheMs`, so that minting and
 * JWKS requests cost no apiserver round trip in the common case.
 */
export class SigningKeyRing {
  private cached: { ring: readonly SigningKey[]; readAt: number } | undefined;
  private pending: Promise<readonly SigningKey[]> | undefined;

  constructor(
    private readonly deps: {
      readonly keys: SigningKeyStore;
      readonly clock: Clock;
      /** How long a read of the key ring is reused. Default 30 s. */
      readonly ringCacheMs?: number;
    },
  ) {}

  async current(): Promise<readonly SigningKey[]> {
    const now = this.deps.clock.now();
    if (this.cached && now - this.cached.readAt < (this.deps.ringCacheMs ?? 30_000)) return this.cached.ring;
    this.pending ??= this.deps.keys
      .ensure(now)
      .then((ring) => {
        this.cached = { ring, readAt: now };
        return ring;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }
}

/**
 * `POST directclusterendpointtokens`: a JWT for the caller, narrowed by the requested scope, and
 * ending no later than the caller's key. What the token is for is only known from the body, so
 * the endpoint checks the key's scope itself: the requested scope may only narrow it.
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
      const parsed = DirectClusterEndpointTokenSchema.safeParse({
        apiVersion: GROUP_VERSION,
        kind: 'DirectClusterEndpointToken',
        ...request.object(),
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
      const token = await mintDirectClusterEndpointToken({
        subject: identity,
        scope,
        ttlSeconds,
        issuer: deps.issuer(),
        key,
        now,
      });
      return {
        code: 201,
        object: {
          apiVersion: GROUP_VERSION,
          kind: 'DirectClusterEndpointToken',
          metadata: { creationTimestamp: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z') },
          spec,
          status: { token },
        },
      };
    },
  };
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
