import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { type ConfigStatus, parseConfig } from '../../../src/api/config.ts';
import { PepperStore } from '../../../src/identity/pepper.ts';
import { LoginEndpoints } from '../../../src/login/endpoints.ts';
import { serveLogin } from '../../../src/login/node-http.ts';
import { ConnectorRegistry } from '../../../src/login/registry.ts';
import { loginSecrets } from '../../../src/login/secrets.ts';
import { LoginService } from '../../../src/login/service.ts';
import {
  DEFAULT_LOGIN_THROTTLE_LIMITS,
  LoginThrottle,
  type LoginThrottleLimits,
} from '../../../src/login/throttle.ts';
import { KubeClient } from '../../../src/runtime/kube-client.ts';
import { type Answer, call, type GatewayEnv, useGatewayEnv } from '../../gateway/support.ts';
import { uniqueName } from '../../support/cluster.ts';
import { startTestOidcProvider, type TestOidcProvider } from './oidc-provider.ts';
import { type ProviderStandIns, startProviderStandIns } from './provider-stand-ins.ts';
import { startTestSamlIdp, type TestSamlIdp } from './saml-idp.ts';

/**
 * A login test file's world: the gateway environment (its own apiserver, webhooks, gateway), a
 * real OpenID provider and a SAML identity provider started here, and the login service on the
 * gateway's identity. `config` is the platform configuration the login reads; tests change it.
 */

/** A stored key as the tests read it. */
// biome-ignore lint/suspicious/noExplicitAny: test convenience
export type StoredKey = { metadata: { name: string }; spec: Record<string, any> };

export interface LoginEnv {
  gateway: GatewayEnv;
  /** The login endpoints, served on loopback by the node:http adapter. */
  platformUrl: string;
  oidcCallback: string;
  samlCallback: string;
  oidc: TestOidcProvider;
  saml: TestSamlIdp;
  service: LoginService;
  throttle: LoginThrottle;
  /** Replace the configuration (YAML) the login reads. */
  configure(yaml: string): void;
  config(): ConfigStatus;
  /** Creates a User named `prefix-<unique>` with this password; returns its name. */
  userWithPassword(prefix: string, password: string): Promise<string>;
  /** The hosted providers' stand-ins (with `providers: true`). */
  providers: ProviderStandIns | undefined;
  /** The login endpoints' connectors. */
  connectors: ConnectorRegistry;
  /** Login keys of a user, as stored. */
  loginKeys(user: string): Promise<StoredKey[]>;
  /** A GET through the gateway with `key`. */
  use(key: string, path: string): Promise<{ status: number; json: Answer['json'] }>;
}

export function useLoginEnv(
  options: { throttle?: LoginThrottleLimits; providers?: boolean } = {},
): () => LoginEnv {
  const gateway = useGatewayEnv({ controllers: ['sharedsecret', 'accesskey'] });
  let env: LoginEnv | undefined;
  let platform: Server | undefined;
  beforeAll(async () => {
    const g = gateway();
    const caDir = mkdtempSync(join(tmpdir(), 'login-test-'));
    let endpoints: LoginEndpoints | undefined;
    platform = createServer((req, res) => {
      if (!endpoints) return void res.writeHead(503).end();
      void serveLogin(endpoints, req, res, { source: req.socket.remoteAddress ?? '', secure: false }).then(
        (served) => served || res.writeHead(404).end(),
        () => res.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve) => platform?.listen(0, '127.0.0.1', resolve));
    const platformUrl = `http://127.0.0.1:${(platform.address() as AddressInfo).port}`;
    const oidcCallback = `${platformUrl}/auth/oidc/callback`;
    const samlCallback = `${platformUrl}/auth/saml/callback`;
    const oidc = await startTestOidcProvider({ redirectUris: [oidcCallback], caDir });
    const saml = await startTestSamlIdp();
    const providers = options.providers ? await startProviderStandIns(platformUrl, caDir) : undefined;
    const api = new KubeClient(g.kc);
    const pepper = await new PepperStore(api, g.platformNamespace, randomBytes).ensure();
    const throttle = new LoginThrottle(
      loginSecrets(pepper).deviceKey,
      options.throttle ?? DEFAULT_LOGIN_THROTTLE_LIMITS,
    );
    let config = parseConfig('');
    const service = new LoginService({
      api,
      platformNamespace: g.platformNamespace,
      random: randomBytes,
      config: () => config,
      throttle,
    });
    const secrets = loginSecrets(pepper);
    const connectors = new ConnectorRegistry({ throttle, addresses: providers?.addresses });
    endpoints = new LoginEndpoints({
      service,
      connectors,
      config: () => config,
      secrets: async () => secrets,
      serverUrl: () => g.base,
    });
    env = {
      gateway: g,
      platformUrl,
      oidcCallback,
      samlCallback,
      oidc,
      saml,
      service,
      throttle,
      providers,
      connectors,
      configure: (yaml) => {
        config = parseConfig(yaml);
      },
      config: () => config,
      userWithPassword: async (prefix, password) => {
        const name = uniqueName(prefix);
        await g.custom.createClusterCustomObject({
          group: 'management.platform',
          version: 'v1',
          plural: 'users',
          body: {
            apiVersion: 'management.platform/v1',
            kind: 'User',
            metadata: { name },
            spec: { username: name },
          },
        });
        await service.setPassword(name, password);
        return name;
      },
      loginKeys: async (user) => {
        const list = await api.request<{ items: StoredKey[] }>({
          method: 'GET',
          path: '/apis/management.platform/v1/ownedaccesskeys',
          query: { fieldSelector: `spec.user=${user}` },
        });
        return list.items.filter((key) => key.spec.type === 'Login');
      },
      use: async (key, path) => {
        await g.accepted(key);
        const answer = await call(`${g.api}${path}`, { token: key, dispatcher: g.dispatcher });
        return { status: answer.status, json: answer.json };
      },
    };
  });
  afterAll(async () => {
    await env?.oidc.close();
    await env?.saml.close();
    await env?.providers?.close();
    await new Promise((resolve) => platform?.close(resolve));
  });
  return () => {
    if (!env) throw new Error('the login environment is not started');
    return env;
  };
}
