import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET, safeParseConfig } from '../api/config.ts';
import type { Project } from '../api/project.ts';
import { resources, type Stored } from '../controllers/resources.ts';
import { type AccessKeyAuthenticator, setupAccessKeyAuthenticator } from '../identity/authenticator.ts';
import type { RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { SigningKeyStore } from '../identity/signing-keys.ts';
import { type Clock, systemClock } from '../runtime/clock.ts';
import type { KubeApi } from '../runtime/kube-client.ts';
import type { Manager } from '../runtime/manager.ts';
import { Auditor } from './audit/auditor.ts';
import { GatewayMetrics } from './metrics.ts';
import { BY_PROJECT_NAMESPACE, projectOfNamespace, recordedNamespace } from './projects.ts';
import { Upstream } from './proxy/upstream.ts';
import { AuthFailureLimiter, type AuthFailureLimits, DEFAULT_AUTH_FAILURE_LIMITS } from './pipeline/throttle.ts';
import { type GatewayServer, type GatewayServerDeps, startGatewayServer } from './server.ts';
import { directTokenHandler, oidcDocument, SigningKeyRing } from './endpoints/direct-tokens.ts';
import type { VirtualEndpoints } from './virtual/extension.ts';
import { kubeConfigHandler } from './endpoints/kubeconfig.ts';

export { BY_PROJECT_NAMESPACE } from './projects.ts';
export { BASE_PATH } from './pipeline/route.ts';
export { TOKEN_REVIEW_BASE } from './endpoints/token-review.ts';

/**
 * The management gateway in the operator process (every replica serves; nothing here is
 * leader-elected): the access key authenticator's informers, a Project informer (namespace to
 * project, members), the platform-config Secret (audit, flags), the HTTP server and the
 * connection pool to kube-apiserver.
 *
 * `setupGateway` registers the informers on the manager before it starts; `start()` (after
 * `manager.start()`) ensures the access-key pepper exists, starts the authenticator and listens.
 */

export interface GatewayOptions {
  /** The operator's kubeconfig (its identity needs `impersonate`, SubjectAccessReviews and the platform Secrets). */
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
  readonly registry?: Registry;
  readonly trustProxy?: boolean;
  readonly authFailureLimits?: AuthFailureLimits;
  /** Replaces the virtual endpoints (tests); by default direct tokens and kubeconfigs are served. */
  readonly virtualEndpoints?: VirtualEndpoints;
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

export function setupGateway(manager: Manager, options: GatewayOptions): Gateway {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? ((size: number) => randomBytes(size));
  const pepper = new PepperStore(options.api, options.platformNamespace, random);
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
  // The same shared informer the authenticator registered (same resource and selector).
  const configInformer = manager.informer<V1Secret>(resources.secrets, {
    namespace: options.platformNamespace,
    fieldSelector: `metadata.name=${PLATFORM_CONFIG_SECRET}`,
  });
  const configSecret = () =>
    configInformer.store.get(`${options.platformNamespace}/${PLATFORM_CONFIG_SECRET}`);
  const registry = options.registry ?? new Registry();
  const metrics = new GatewayMetrics(registry);
  const logger = options.logger;
  const auditor = new Auditor({
    onError: (error) => logger.error({ err: error.message }, 'audit log write failed'),
    ...(options.auditMaxSizeBytes ? { maxSizeBytes: options.auditMaxSizeBytes } : {}),
  });
  const applyAuditConfig = () => {
    const secret = configSecret();
    const encoded = secret?.data?.[PLATFORM_CONFIG_KEY];
    const parsed = safeParseConfig(
      encoded === undefined ? '' : Buffer.from(encoded, 'base64').toString('utf8'),
    );
    if (parsed.ok) auditor.configure(parsed.config.audit);
    else
      logger.warn(
        { issues: parsed.error.issues.length },
        'the platform config is invalid; audit settings unchanged',
      );
  };
  configInformer.addEventHandler({
    onAdd: applyAuditConfig,
    onUpdate: applyAuditConfig,
    onDelete: () => auditor.configure(undefined),
  });

  let server: GatewayServer | undefined;
  let upstream: Upstream | undefined;
  const issuer = () => (options.issuer ?? server?.url ?? '').replace(/\/+$/, '');
  const signingKeys = new SigningKeyRing({
    keys: new SigningKeyStore(options.api, options.platformNamespace),
    clock,
  });
  const virtualEndpoints: VirtualEndpoints = options.virtualEndpoints ?? {
    directclusterendpointtokens: directTokenHandler({
      ring: signingKeys,
      issuer,
      clock,
      config: () => authenticator.config(),
    }),
    'virtualclusterinstances/kubeconfig': kubeConfigHandler({
      api: options.api,
      clock,
      ...(options.signingTimeoutMs ? { signingTimeoutMs: options.signingTimeoutMs } : {}),
    }),
  };
  const ready = () => authenticator.ready() && projects.hasSynced();
  return {
    authenticator,
    registry,
    ready,
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
      const tls = options.certDir
        ? {
            cert: readFileSync(join(options.certDir, 'tls.crt')),
            key: readFileSync(join(options.certDir, 'tls.key')),
          }
        : undefined;
      // The documents are served under the issuer URL's path (the root by default); the issuer is
      // known from here on (the listening URL comes later only when it is the default, at the root).
      const issuerPath = options.issuer ? new URL(options.issuer).pathname.replace(/\/+$/, '') : '';
      const deps: GatewayServerDeps = {
        upstream,
        authenticator,
        // Projects without a recorded namespace own `<configured prefix><name>`.
        projectOfNamespace: (namespace) =>
          projectOfNamespace(namespace, {
            byRecordedNamespace: (recorded) => projects.store.byIndex(BY_PROJECT_NAMESPACE, recorded),
            byName: (name) => projects.store.get(name),
            prefix: authenticator.config().projectNamespacePrefix,
          }),
        configSecret,
        platformNamespace: options.platformNamespace,
        random,
        logger,
        metrics,
        limiter: new AuthFailureLimiter(options.authFailureLimits ?? DEFAULT_AUTH_FAILURE_LIMITS),
        auditor,
        version: options.version ?? PLATFORM_VERSION,
        virtualEndpoints,
        publicDocument: (path) =>
          path.startsWith(`${issuerPath}/`)
            ? oidcDocument(path.slice(issuerPath.length), issuer(), signingKeys)
            : Promise.resolve(undefined),
        readiness: () => {
          const notReady: string[] = [];
          if (!authenticator.ready()) notReady.push('access key authenticator (caches or pepper)');
          if (!projects.hasSynced()) notReady.push('project cache');
          return { ready: notReady.length === 0, notReady };
        },
      };
      server = await startGatewayServer(deps, {
        host: options.host,
        port: options.port,
        ...(tls ? { tls } : {}),
        ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}),
      });
      logger.info({ url: server.url }, 'management gateway serving');
      return server;
    },
    async stop() {
      await server?.close();
      await upstream?.close();
      await authenticator
        .stop()
        .catch((err: unknown) => logger.warn({ err }, 'could not write all key activity'));
      await auditor.close();
    },
  };
}
