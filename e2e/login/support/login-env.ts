import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { type ConfigStatus, PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../../src/api/config.ts';
import { API_GROUP, API_VERSION, GROUP_VERSION } from '../../../src/api/meta.ts';
import { STORED_KINDS } from '../../../src/api/registry.ts';
import { platformConfigSource } from '../../../src/config/platform-config.ts';
import type { AuthFailureLimits } from '../../../src/http/failure-limiter.ts';
import type { ProviderAddresses } from '../../../src/login/providers.ts';
import type { ConnectorRegistry } from '../../../src/login/registry.ts';
import type { LoginService } from '../../../src/login/service.ts';
import { type Login, setupLogin } from '../../../src/login/setup.ts';
import type { LoginThrottle, LoginThrottleLimits } from '../../../src/login/throttle.ts';
import { KubeClient } from '../../../src/runtime/kube-client.ts';
import { type Answer, call, type GatewayEnv, useGatewayEnv } from '../../gateway/support.ts';
import { uniqueName } from '../../support/cluster.ts';
import { eventually } from '../../support/wait.ts';
import { startTestOidcProvider, type TestOidcProvider } from './oidc-provider.ts';
import {
  type ProviderStandIns,
  STAND_IN_CONNECTOR_IDS,
  startProviderStandIns,
} from './provider-stand-ins.ts';
import { startTestSamlIdp, type TestSamlIdp } from './saml-idp.ts';

/**
 * A login test file's world: the gateway environment (its own apiserver, webhooks, the real
 * gateway over HTTPS) serving the login endpoints exactly as the operator composes them
 * (`setupLogin`, then `setupGateway({ endpoints })`), a real OpenID provider and a SAML identity
 * provider started here, and (with `providers`) the hosted providers' stand-ins. The platform
 * configuration is the platform-config Secret, as in production: `configure` writes it and waits
 * until the gateway reads it.
 */

// biome-ignore lint/suspicious/noExplicitAny: test convenience
type Loose = Record<string, any>;
/** A stored key as the tests read it. */
export type StoredKey = {
  metadata: { name: string; creationTimestamp?: string };
  spec: Loose;
  status?: Loose;
};

export interface LoginEnv {
  gateway: GatewayEnv;
  /** The gateway's root URL (`https://127.0.0.1:<port>`), where `/auth` is served. */
  platformUrl: string;
  /** The gateway's CA (PEM), and a file holding it. */
  caPem: string;
  caFile: string;
  oidcCallback: string;
  samlCallback: string;
  oidc: TestOidcProvider;
  saml: TestSamlIdp;
  service: LoginService;
  throttle: LoginThrottle;
  /** The hosted providers' stand-ins (with `providers: true`). */
  providers: ProviderStandIns | undefined;
  /** The login endpoints' connectors. */
  connectors: ConnectorRegistry;
  /** Stores the platform configuration (YAML) and waits until the gateway reads it. */
  configure(yaml: string): Promise<void>;
  config(): ConfigStatus;
  /**
   * Creates a User named `prefix-<unique>` with this password, and the spec fields `spec` gives
   * for its name besides `username` (an email, groups); returns its name.
   */
  userWithPassword(
    prefix: string,
    password: string,
    spec?: (name: string) => Record<string, unknown>,
  ): Promise<string>;
  /**
   * Creates one of our cluster-scoped objects (a User, Team, Project, OwnedAccessKey) as the
   * platform admin, with this metadata and spec.
   */
  create(kind: string, metadata: Loose, spec: Loose): Promise<void>;
  /** Login keys of a user, as stored. */
  loginKeys(user: string): Promise<StoredKey[]>;
  /** A key as stored, or undefined when it is gone. */
  storedKey(name: string): Promise<StoredKey | undefined>;
  /** A GET through the gateway with `key`. */
  use(key: string, path: string): Promise<{ status: number; json: Answer['json'] }>;
}

const KEYS_PATH = '/apis/management.platform/v1/ownedaccesskeys';

export function useLoginEnv(
  options: {
    throttle?: LoginThrottleLimits;
    providers?: boolean;
    controllers?: string[];
    /** The gateway's own limits on failed keys. */
    authFailureLimits?: AuthFailureLimits;
    /** Run kube-controller-manager beside the apiserver (garbage collection of owned objects). */
    controllerManager?: boolean;
  } = {},
): () => LoginEnv {
  let login: Login | undefined;
  let providers: ProviderStandIns | undefined;
  let oidc: TestOidcProvider | undefined;
  let saml: TestSamlIdp | undefined;
  const caDir = mkdtempSync(join(tmpdir(), 'login-test-'));
  // The stand-ins need the gateway's callback URLs, so they start once it listens; the login is
  // set up before, with this object, filled with their addresses when they are up (connectors
  // read it when first used).
  const addresses: { -readonly [K in keyof ProviderAddresses]?: ProviderAddresses[K] } = {};
  const gateway = useGatewayEnv({
    https: true,
    controllers: options.controllers ?? ['sharedsecret', 'accesskey', 'teammembership'],
    ...(options.controllerManager ? { controllerManager: true } : {}),
    gateway: {
      trustedProxies: ['127.0.0.1/32'],
      ...(options.authFailureLimits ? { authFailureLimits: options.authFailureLimits } : {}),
    },
    endpoints: (manager, api) => {
      login = setupLogin({
        manager,
        api,
        platformNamespace: 'platform-system',
        logger: pino({ level: 'silent' }),
        ...(options.throttle ? { throttle: options.throttle } : {}),
        ...(options.providers ? { addresses: addresses as ProviderAddresses } : {}),
      });
      return login.endpoints;
    },
  });
  let env: LoginEnv | undefined;
  beforeAll(async () => {
    const g = gateway();
    const platformUrl = g.server.url;
    const callbacks = ['oidc', 'saml', ...STAND_IN_CONNECTOR_IDS].map(
      (id) => `${platformUrl}/auth/${id}/callback`,
    );
    oidc = await startTestOidcProvider({
      redirectUris: callbacks,
      postLogoutRedirectUris: [`${platformUrl}/auth/login`],
      caDir,
    });
    saml = await startTestSamlIdp();
    if (options.providers) {
      providers = await startProviderStandIns(platformUrl, caDir);
      Object.assign(addresses, providers.addresses);
    }
    if (!login) throw new Error('the login endpoints were not set up');
    const api = new KubeClient(g.kc);
    const source = platformConfigSource(g.manager, g.platformNamespace);
    const caFile = join(caDir, 'gateway-ca.pem');
    writeFileSync(caFile, g.caPem ?? '');
    const current = login;
    const create = async (kind: string, metadata: Loose, spec: Loose) => {
      const info = STORED_KINDS.find((stored) => stored.kind === kind);
      if (!info) throw new Error(`${kind} is not one of our stored kinds`);
      await g.custom.createClusterCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: info.plural,
        body: { apiVersion: GROUP_VERSION, kind, metadata, spec },
      });
    };
    env = {
      gateway: g,
      platformUrl,
      caPem: g.caPem ?? '',
      caFile,
      oidcCallback: `${platformUrl}/auth/oidc/callback`,
      samlCallback: `${platformUrl}/auth/saml/callback`,
      oidc,
      saml,
      service: current.service,
      throttle: current.throttle,
      providers,
      connectors: current.connectors,
      configure: async (yaml) => {
        const path = `/api/v1/namespaces/${g.platformNamespace}/secrets/${PLATFORM_CONFIG_SECRET}`;
        const body = {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: PLATFORM_CONFIG_SECRET, namespace: g.platformNamespace },
          data: { [PLATFORM_CONFIG_KEY]: Buffer.from(yaml, 'utf8').toString('base64') },
        };
        const stored = await api
          .request<{ metadata: { resourceVersion: string } }>({ method: 'PUT', path, body })
          .catch(() =>
            api.request<{ metadata: { resourceVersion: string } }>({
              method: 'POST',
              path: `/api/v1/namespaces/${g.platformNamespace}/secrets`,
              body,
            }),
          );
        await eventually(
          () => source.stored().resourceVersion === stored.metadata.resourceVersion,
          30_000,
          'the gateway to read the configuration',
        );
        if (source.stored().error) throw new Error(`invalid test configuration: ${source.stored().error}`);
      },
      config: () => source.current(),
      create,
      userWithPassword: async (prefix, password, spec) => {
        const name = uniqueName(prefix);
        await create('User', { name }, { username: name, ...spec?.(name) });
        await current.service.setPassword(name, password);
        return name;
      },
      loginKeys: async (user) => {
        const list = await api.request<{ items: StoredKey[] }>({
          method: 'GET',
          path: KEYS_PATH,
          query: { fieldSelector: `spec.user=${user}` },
        });
        return list.items.filter((key) => key.spec.type === 'Login');
      },
      storedKey: (name) =>
        api.request<StoredKey>({ method: 'GET', path: `${KEYS_PATH}/${name}` }).catch(() => undefined),
      use: async (key, path) => {
        await g.accepted(key);
        const answer = await call(`${g.api}${path}`, { token: key, dispatcher: g.dispatcher });
        return { status: answer.status, json: answer.json };
      },
    };
  });
  afterAll(async () => {
    await oidc?.close();
    await saml?.close();
    await providers?.close();
  });
  return () => {
    if (!env) throw new Error('the login environment is not started');
    return env;
  };
}
