import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import type { Project } from '../api/project.ts';
import { BY_PROJECT_NAMESPACE, recordedNamespace } from '../api/project-namespace.ts';
import { resources, type Stored } from '../api/resources.ts';
import type { VirtualClusterInstance } from '../api/virtualclusterinstance.ts';
import { type PlatformConfigSource, platformConfigSource } from '../config/platform-config.ts';
import type { Endpoint } from '../http/endpoint.ts';
import {
  AuthFailureLimiter,
  type AuthFailureLimits,
  DEFAULT_AUTH_FAILURE_LIMITS,
} from '../http/failure-limiter.ts';
import { type AccessKeyAuthenticator, setupAccessKeyAuthenticator } from '../identity/authenticator.ts';
import type { DirectTokenOwners } from '../identity/direct-token.ts';
import type { RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { type SigningKeyRing, signingKeyRing } from '../identity/signing-key-ring.ts';
import { type Clock, systemClock } from '../runtime/clock.ts';
import { isNotFound } from '../runtime/errors.ts';
import { asFieldManager, fieldManagers } from '../runtime/field-managers.ts';
import type { Informer } from '../runtime/informer.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { objectPath } from '../runtime/kube-client.ts';
import type { Manager } from '../runtime/manager.ts';
import type { ProxyLookup } from './access-proxy/route.ts';
import { type ProxyTargets, setupProxyTargets } from './access-proxy/targets.ts';
import { type AccessProxyWaker, InstanceWaker, mayGetInstanceThrough } from './access-proxy/wake.ts';
import { Auditor } from './audit/auditor.ts';
import { accessKeysEndpoints, issueKey } from './endpoints/access-keys.ts';
import { configsEndpoint } from './endpoints/configs.ts';
import { directTokensEndpoint, oidcEndpoints, tokenRevocationEndpoint } from './endpoints/direct-tokens.ts';
import { discoveryEndpoints } from './endpoints/discovery.ts';
import type { GatewayEndpoint } from './endpoints/endpoint.ts';
import { healthEndpoints } from './endpoints/health.ts';
import { kubeConfigEndpoint } from './endpoints/kubeconfig.ts';
import { membersEndpoint } from './endpoints/members.ts';
import { ownerAccessKeysEndpoints } from './endpoints/owner-access-keys.ts';
import { ServingCa } from './endpoints/serving-ca.ts';
import { tokenReviewEndpoint } from './endpoints/token-review.ts';
import { GatewayMetrics } from './metrics.ts';
import { EndpointTable } from './pipeline/route.ts';
import { TrustedProxies } from './pipeline/source.ts';
import { DEFAULT_WATCH_LIMITS, Throttle, type WatchLimits } from './pipeline/throttle.ts';
import { projectLookup, projectNamespaceOf } from './project-lookup.ts';
import type { ProxyDeps } from './proxy/proxy.ts';
import { Upstream } from './proxy/upstream.ts';
import { type GatewayServer, type GatewayServerDeps, startGatewayServer } from './server.ts';
import { KeySessions } from './sessions.ts';

export { TOKEN_REVIEW_BASE } from './endpoints/token-review.ts';
export { BASE_PATH } from './paths.ts';
export type { GatewayServer } from './server.ts';

/**
 * The management gateway (every replica serves; nothing here is leader-elected): the access key
 * authenticator's informers, a Project informer (namespace to project, members), the platform
 * config source, the endpoints, the HTTP server and the connection pools to kube-apiserver.
 *
 * `setupGateway` registers the informers on the manager before it starts; `start()` (after
 * `manager.start()`) ensures the access-key pepper exists, starts the authenticator and listens.
 * Other components add endpoints of their own (`endpoints`, on the interface of
 * `src/http/endpoint.ts`), without any change here.
 */

export interface GatewayOptions {
  /** The gateway's kubeconfig (its identity needs `impersonate`, SubjectAccessReviews and the platform Secrets). */
  readonly kubeConfig: KubeConfig;
  readonly api: KubeApi;
  readonly platformNamespace: string;
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** A directory with `tls.crt` and `tls.key`: HTTPS; plain HTTP (behind an ingress) otherwise. */
  readonly certDir?: string;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly random?: RandomBytes;
  /** Where the gateway's metrics are registered; the manager's (served on its health port) by default. */
  readonly registry?: Registry;
  /**
   * CIDRs (or addresses) of proxies in front of the gateway (an ingress): only from them is
   * `X-Forwarded-For` believed. Default none.
   */
  readonly trustedProxies?: readonly string[];
  readonly authFailureLimits?: AuthFailureLimits;
  readonly watchLimits?: WatchLimits;
  /** Endpoints of other components served by the gateway (login pages and callbacks). */
  readonly endpoints?: readonly Endpoint[];
  /**
   * The issuer (`iss`) of DirectClusterEndpointTokens: the gateway's external URL, where other
   * clusters read `/.well-known/openid-configuration` and the JWKS. Default: the URL it listens on.
   */
  readonly issuer?: string;
  /** How long a kubeconfig request waits for a virtual cluster's certificate signer (default 30 s). */
  readonly signingTimeoutMs?: number;
  /** Reported at `/version`. */
  readonly version?: string;
  /** Audit rotation size override in bytes (tests). */
  readonly auditMaxSizeBytes?: number;
  /** Overrides of the authenticator's activity timing (tests). */
  readonly activity?: Parameters<typeof setupAccessKeyAuthenticator>[1]['activity'];
}

export interface Gateway {
  readonly authenticator: AccessKeyAuthenticator;
  readonly registry: Registry;
  /** Ensures the pepper, starts the authenticator and listens. Call after `manager.start()`. */
  start(): Promise<GatewayServer>;
  /** Stops listening, flushes activity and the audit log. */
  stop(): Promise<void>;
  /** Caches synced and the pepper loaded. */
  ready(): boolean;
}

export const PLATFORM_VERSION = 'v0.1.0';

export function setupGateway(manager: Manager, setup: GatewayOptions): Gateway {
  // The gateway's own writes (the pepper, signing keys, key activity) are named as its own,
  // whoever built the client.
  const options = { ...setup, api: asFieldManager(setup.api, fieldManagers.gateway) };
  const clock = options.clock ?? systemClock;
  const random = options.random ?? ((size: number) => randomBytes(size));
  const logger = options.logger;
  const trustedProxies = new TrustedProxies(options.trustedProxies ?? []);
  const pepper = new PepperStore(options.api, options.platformNamespace, random);
  const config = platformConfigSource(manager, options.platformNamespace, logger);
  const authenticator = setupAccessKeyAuthenticator(manager, {
    api: options.api,
    clock,
    pepper,
    platformNamespace: options.platformNamespace,
    ...(options.activity ? { activity: options.activity } : {}),
  });
  const projects = manager.informer<Stored<Project>>(
    resources.projects,
    {},
    { [BY_PROJECT_NAMESPACE]: recordedNamespace },
  );
  const registry = options.registry ?? manager.registry;
  const metrics = new GatewayMetrics(registry);
  const auditor = gatewayAuditor(options, config);

  let server: GatewayServer | undefined;
  let upstream: Upstream | undefined;
  const signingKeys = signingKeyRing(manager, options.platformNamespace, { api: options.api });
  const projectOf = projectLookup(projects, config);
  const access = setupAccessProxy(manager, options, { clock, projects, config, projectOf });
  const { targets, waker } = access;
  const parts: GatewayParts = {
    options,
    authenticator,
    projects,
    config,
    signingKeys,
    clock,
    random,
    projectOf,
    ...access,
    issuer: () => (options.issuer ?? server?.url ?? '').replace(/\/+$/, ''),
    tokenOwners: directTokenOwners(authenticator),
    servingCa: new ServingCa(options.certDir),
  };

  return {
    authenticator,
    registry,
    ready: () => authenticator.ready() && projects.hasSynced() && targets.hasSynced(),
    async start() {
      await pepper.ensure();
      void authenticator
        .start()
        .catch((err: unknown) => logger.error({ err }, 'authenticator failed to start'));
      upstream = await Upstream.create(options.kubeConfig);
      // The signing keys exist (and rotate when due) before the first token or JWKS request.
      void signingKeys
        .current()
        .catch((err: unknown) => logger.warn({ err }, 'token signing keys not ready yet'));
      server = await serveGateway(parts, upstream, { auditor, metrics, trustedProxies });
      logger.info({ url: server.url }, 'management gateway serving');
      return server;
    },
    async stop() {
      await server?.close();
      await upstream?.close();
      targets.close();
      waker.close();
      parts.servingCa.close();
      await authenticator
        .stop()
        .catch((err: unknown) => logger.warn({ err }, 'could not write all key activity'));
      await auditor.close();
    },
  };
}

/** What the gateway's endpoints are built from, besides the connection to the apiserver. */
interface GatewayParts {
  readonly options: GatewayOptions;
  readonly authenticator: AccessKeyAuthenticator;
  readonly projects: Informer<Stored<Project>>;
  readonly config: PlatformConfigSource;
  readonly signingKeys: SigningKeyRing;
  readonly issuer: () => string;
  readonly tokenOwners: DirectTokenOwners;
  readonly clock: Clock;
  readonly random: RandomBytes;
  readonly projectOf: (namespace: string) => string | undefined;
  /** The project of a namespace and the namespace of a project, as the access proxy routes. */
  readonly lookup: ProxyLookup;
  /** How the access proxy reaches its targets. */
  readonly targets: ProxyTargets;
  /** Sleep mode at the access proxy: asleep virtual clusters woken, activity recorded. */
  readonly waker: AccessProxyWaker;
  /** The CA of the serving certificate, handed out in kubeconfigs. */
  readonly servingCa: ServingCa;
}

/** What the gateway's own endpoints are built from. */
interface OwnEndpointsContext extends GatewayParts {
  /** The connection to the apiserver. */
  readonly connection: Upstream;
  readonly proxy: ProxyDeps;
  readonly failures: AuthFailureLimiter;
}

/** The endpoint table (every endpoint, discovery and other components' included) and the throttle, on a connection to the apiserver. */
function pipelineParts(parts: GatewayParts, connection: Upstream, metrics: GatewayMetrics) {
  const { options, config } = parts;
  const failures = new AuthFailureLimiter(options.authFailureLimits ?? DEFAULT_AUTH_FAILURE_LIMITS);
  const watchLimits = options.watchLimits ?? DEFAULT_WATCH_LIMITS;
  const proxy = { upstream: connection, maxWatchSeconds: watchLimits.maxTimeoutSeconds };
  const own = ownEndpoints({ ...parts, connection, proxy, failures });
  let table: EndpointTable | undefined;
  const discovery = discoveryEndpoints({
    serves: (resource, subresource) => table?.serves(resource, subresource) ?? false,
    version: options.version ?? PLATFORM_VERSION,
    authenticateVersion: () => config.current().authenticateVersionEndpoint === true,
  });
  table = new EndpointTable([...own, ...discovery, ...(options.endpoints ?? [])]);
  // Long-lived connections end with their key (issue 26, Lifetimes).
  const sessions = new KeySessions({ authority: parts.authenticator, clock: parts.clock, metrics });
  return { endpoints: table, throttle: new Throttle(failures, watchLimits, sessions), proxy };
}

/** The gateway's own endpoints (health, documents, TokenReview, its resources), discovery aside. */
function ownEndpoints(context: OwnEndpointsContext): GatewayEndpoint[] {
  const { options, connection, proxy, failures, authenticator, projects, config, signingKeys } = context;
  const { issuer, tokenOwners, clock, random, projectOf } = context;
  const now = () => clock.now();
  // The documents are served under the issuer URL's path (the root by default).
  const issuerPath = options.issuer ? new URL(options.issuer).pathname.replace(/\/+$/, '') : '';
  return [
    ...healthEndpoints(() => {
      const notReady: string[] = [];
      if (!authenticator.ready()) notReady.push('access key authenticator (caches or pepper)');
      if (!projects.hasSynced()) notReady.push('project cache');
      if (!context.targets.hasSynced()) notReady.push('cluster and virtual cluster caches');
      return { ready: notReady.length === 0, notReady };
    }),
    ...oidcEndpoints(issuerPath, issuer, signingKeys),
    tokenReviewEndpoint({
      authenticator,
      failures,
      projectNamespace: projectNamespaceOf(projects, config),
      directTokens: { ring: signingKeys, issuer, clock, owners: tokenOwners },
    }),
    ...accessKeysEndpoints({
      upstream: connection,
      proxy,
      random,
      now,
      limits: () => config.current().auth,
    }),
    ...ownerAccessKeysEndpoints({ upstream: connection, keys: authenticator.keys }),
    membersEndpoint({ upstream: connection, users: authenticator.users, teams: authenticator.teams }),
    configsEndpoint({ upstream: connection, config, platformNamespace: options.platformNamespace }),
    directTokensEndpoint({
      ring: signingKeys,
      issuer,
      clock,
      config: () => config.current(),
      owners: tokenOwners,
      readKey: (name) =>
        options.api
          .request<OwnedAccessKey>({
            method: 'GET',
            path: objectPath(resources.ownedAccessKeys, undefined, name),
          })
          .catch((err: unknown) => {
            if (isNotFound(err)) return undefined;
            throw err;
          }),
    }),
    tokenRevocationEndpoint({
      api: options.api,
      upstream: connection,
      cachedUser: (name) => authenticator.users.get(name),
      clock,
    }),
    kubeConfigEndpoint({
      api: options.api,
      upstream: connection,
      clock,
      projectOfNamespace: projectOf,
      issueKey: (identity, body, signal) =>
        issueKey({ upstream: connection, random, now }, identity, body, signal),
      ...(options.signingTimeoutMs ? { signingTimeoutMs: options.signingTimeoutMs } : {}),
      externalUrl: issuer,
      servingCaPem: () => context.servingCa.pem(),
    }),
  ];
}

/** The serving certificate and key of a directory with `tls.crt` and `tls.key`. */
function tlsFiles(certDir: string): { cert: Buffer; key: Buffer } {
  return { cert: readFileSync(join(certDir, 'tls.crt')), key: readFileSync(join(certDir, 'tls.key')) };
}

/** The audit log, configured by the platform config as it changes. */
function gatewayAuditor(options: GatewayOptions, config: PlatformConfigSource): Auditor {
  const auditor = new Auditor({
    onError: (error) => options.logger.error({ err: error.message }, 'audit log write failed'),
    ...(options.auditMaxSizeBytes ? { maxSizeBytes: options.auditMaxSizeBytes } : {}),
  });
  config.onChange((current) => auditor.configure(current.audit));
  return auditor;
}

/**
 * The access proxy's part of the gateway: how it routes (a namespace's project, a project's
 * namespace) and how it reaches its targets (registering their informers on the manager).
 */
function setupAccessProxy(
  manager: Manager,
  options: GatewayOptions,
  known: Pick<GatewayParts, 'clock' | 'projects' | 'config' | 'projectOf'>,
): { lookup: ProxyLookup; targets: ProxyTargets; waker: AccessProxyWaker } {
  const namespaceOf = projectNamespaceOf(known.projects, known.config);
  const targets = setupProxyTargets(manager, {
    api: options.api,
    hostKubeConfig: options.kubeConfig,
    clock: known.clock,
    projectNamespace: namespaceOf,
    projectOfNamespace: known.projectOf,
  });
  // A project that does not exist has no namespace to route to.
  const namespaceOfProject = (project: string) =>
    known.projects.store.get(project) ? namespaceOf(project) : undefined;
  const waker = new InstanceWaker({
    virtualClusters: manager.informer<Stored<VirtualClusterInstance>>(resources.virtualClusterInstances),
    api: options.api,
    mayWake: mayGetInstanceThrough(options.api),
    projectNamespace: namespaceOf,
    logger: options.logger,
    clock: known.clock,
  });
  return { lookup: { projectOfNamespace: known.projectOf, namespaceOfProject }, targets, waker };
}

/** Direct tokens end with their key and owner, as the authenticator's caches see them. */
function directTokenOwners(authenticator: AccessKeyAuthenticator): DirectTokenOwners {
  return {
    key: (name) => authenticator.keys.get(name),
    user: (name) => authenticator.users.get(name),
    team: (name) => authenticator.teams.get(name),
  };
}

/** The gateway's HTTP server, on its endpoints and its connection to the apiserver. */
function serveGateway(
  parts: GatewayParts,
  upstream: Upstream,
  observers: Pick<GatewayServerDeps, 'auditor' | 'metrics' | 'trustedProxies'>,
): Promise<GatewayServer> {
  const { options } = parts;
  const tls = options.certDir ? tlsFiles(options.certDir) : undefined;
  return startGatewayServer(
    {
      ...pipelineParts(parts, upstream, observers.metrics),
      ...observers,
      authenticator: parts.authenticator,
      logger: options.logger,
      lookup: parts.lookup,
      accessProxy: { targets: parts.targets, waker: parts.waker },
    },
    { host: options.host, port: options.port, ...(tls ? { tls } : {}) },
  );
}
