import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { platformConfigSource } from '../config/platform-config.ts';
import type { Endpoint } from '../http/endpoint.ts';
import type { RandomBytes } from '../identity/keys.ts';
import { PepperStore } from '../identity/pepper.ts';
import { signingKeyRing } from '../identity/signing-key-ring.ts';
import { asFieldManager, fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import type { Manager } from '../runtime/manager.ts';
import { LoginEndpoints } from './endpoints.ts';
import type { LoginHttpRequest } from './http-answers.ts';
import { loginHttpEndpoints } from './http-endpoints.ts';
import { OpenIdProvider } from './oidc-provider/provider.ts';
import { SecretModels } from './oidc-provider/secret-models.ts';
import { PasswordApi } from './password-api.ts';
import type { ProviderAddresses } from './providers.ts';
import { ConnectorRegistry } from './registry.ts';
import { type LoginSecrets, loginSecrets } from './secrets.ts';
import { LoginService } from './service.ts';
import { DEFAULT_LOGIN_THROTTLE_LIMITS, LoginThrottle, type LoginThrottleLimits } from './throttle.ts';

/**
 * Signing in, composed for a process that serves the gateway: the login service on the gateway's
 * identity, the connectors, the throttle, the configuration from the platform-config source, the
 * keys of the login flows derived from the access-key pepper, and the endpoints to hand to
 * `setupGateway({ endpoints })`.
 */

/** The management API's path on the gateway (README: base path), where kubeconfigs point. */
export const MANAGEMENT_API_PATH = '/kubernetes/management';

export interface LoginSetupOptions {
  readonly manager: Manager;
  /** The gateway's identity (it writes Users, Teams, password Secrets and Login keys). */
  readonly api: KubeApi;
  readonly platformNamespace: string;
  readonly logger: Logger;
  readonly random?: RandomBytes;
  /**
   * The platform's external URL (`https://platform.example.com`), for the server of the
   * kubeconfigs handed out; by default the URL the person reached the gateway at.
   */
  readonly externalUrl?: string | undefined;
  readonly throttle?: LoginThrottleLimits;
  /** The hosted providers' addresses (tests point them at local servers). */
  readonly addresses?: ProviderAddresses;
}

export interface Login {
  readonly endpoints: Endpoint[];
  readonly service: LoginService;
  readonly connectors: ConnectorRegistry;
  readonly throttle: LoginThrottle;
  /** The platform as an OpenID provider (`/oidc`). */
  readonly openIdProvider: OpenIdProvider;
}

/** The platform's URL for a request: the external URL, else the scheme and host it came with. */
export function platformUrlFor(
  request: Pick<LoginHttpRequest, 'headers' | 'secure'>,
  externalUrl: string | undefined,
): string {
  if (externalUrl) return externalUrl.replace(/\/+$/, '');
  const host = request.headers.host ?? 'localhost';
  return `${request.secure ? 'https' : 'http'}://${host}`;
}

/** The kubeconfig server for a request: the management API under {@link platformUrlFor}. */
export function serverUrlFor(request: LoginHttpRequest, externalUrl: string | undefined): string {
  return `${platformUrlFor(request, externalUrl)}${MANAGEMENT_API_PATH}`;
}

export function setupLogin(setup: LoginSetupOptions): Login {
  // Signing in writes as itself whoever built the client (it shares the gateway's connection).
  const options = { ...setup, api: asFieldManager(setup.api, fieldManagers.login) };
  const random = options.random ?? ((size: number) => randomBytes(size));
  const source = platformConfigSource(options.manager, options.platformNamespace, options.logger);
  const config = () => source.current();
  const pepper = new PepperStore(options.api, options.platformNamespace, random);
  let secrets: Promise<LoginSecrets> | undefined;
  const loadSecrets = () => {
    secrets ??= pepper.ensure().then(loginSecrets);
    secrets.catch(() => {
      secrets = undefined;
    });
    return secrets;
  };
  // The device key exists only once the pepper is read: the throttle signs with it lazily.
  const throttle = new LoginThrottle(
    async () => (await loadSecrets()).deviceKey,
    options.throttle ?? DEFAULT_LOGIN_THROTTLE_LIMITS,
  );
  const service = new LoginService({
    api: options.api,
    platformNamespace: options.platformNamespace,
    random,
    config,
    throttle,
  });
  const connectors = new ConnectorRegistry({ throttle, addresses: options.addresses });
  const openIdProvider = new OpenIdProvider({
    api: options.api,
    signingKeys: signingKeyRing(options.manager, options.platformNamespace, { api: options.api }),
    config,
    secrets: loadSecrets,
    pepper: () => pepper.ensure(),
    models: new SecretModels(options.manager, { api: options.api, namespace: options.platformNamespace }),
    platformUrl: (request) =>
      platformUrlFor(
        { headers: { host: request.headers.host }, secure: request.secure },
        options.externalUrl,
      ),
    onError: (err) => options.logger.error({ err }, 'the OpenID provider failed on the server'),
  });
  const endpoints = new LoginEndpoints({
    openIdProvider,
    service,
    connectors,
    config,
    secrets: loadSecrets,
    serverUrl: (request) => serverUrlFor(request, options.externalUrl),
    platformUrl: (request) => platformUrlFor(request, options.externalUrl),
    onError: (err) => options.logger.error({ err }, 'sign-in failed on the server'),
  });
  return {
    endpoints: [
      ...loginHttpEndpoints(endpoints, new PasswordApi({ service, api: options.api })),
      openIdProvider.endpoint(),
    ],
    openIdProvider,
    service,
    connectors,
    throttle,
  };
}
