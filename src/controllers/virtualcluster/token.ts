import { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../runtime/clock.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { KubeClient } from '../../runtime/kube-client.ts';

/**
 * Short-lived credentials of a ServiceAccount from the TokenRequest API, renewed before they
 * expire, and a client that presents them. Tokens are kept in memory only and never logged.
 */

/** Lifetime asked for (the apiserver may shorten it; 10 minutes is its minimum). */
export const TOKEN_LIFETIME_SECONDS = 3600;
/** A token is renewed once this fraction of its lifetime has passed (as the kubelet does). */
export const RENEW_AT_FRACTION = 0.8;

export interface IssuedToken {
  token: string;
  issuedAtMs: number;
  expiresAtMs: number;
}

/** When a token should be replaced: after {@link RENEW_AT_FRACTION} of its lifetime. */
export function renewalTime(token: Pick<IssuedToken, 'issuedAtMs' | 'expiresAtMs'>): number {
  return token.issuedAtMs + RENEW_AT_FRACTION * (token.expiresAtMs - token.issuedAtMs);
}

/** The token to present at `now`: `renew` when none, or when it is due for renewal. */
export function tokenAction(token: IssuedToken | undefined, now: number): 'use' | 'renew' {
  return token !== undefined && now < renewalTime(token) ? 'use' : 'renew';
}

/**
 * One ServiceAccount's tokens. `current()` returns a token valid for a while yet: the one it has,
 * or (past its renewal time) a new one, asked for once however many callers wait. Should the
 * renewal fail while the old token is still valid, the old one is used and the renewal is tried
 * again on the next call; once it expired, the failure is thrown.
 */
export class ServiceAccountTokens {
  private issued: IssuedToken | undefined;
  private pending: Promise<IssuedToken> | undefined;
  /** Tokens issued so far (tests, metrics). */
  issuedCount = 0;

  constructor(
    private readonly options: {
      /** Asks for tokens: the controller's client (it holds `create serviceaccounts/token`). */
      api: KubeApi;
      namespace: string;
      serviceAccount: string;
      clock: Clock;
      lifetimeSeconds?: number;
    },
  ) {}

  async current(): Promise<string> {
    const now = this.options.clock.now();
    const held = this.issued;
    if (tokenAction(held, now) === 'use') return held!.token;
    try {
      return (await this.renew()).token;
    } catch (err) {
      if (held && now < held.expiresAtMs) return held.token;
      throw err;
    }
  }

  private renew(): Promise<IssuedToken> {
    this.pending ??= this.request().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async request(): Promise<IssuedToken> {
    const { api, namespace, serviceAccount, clock } = this.options;
    const issuedAtMs = clock.now();
    const answer = await api.request<{ status?: { token?: string; expirationTimestamp?: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: this.options.lifetimeSeconds ?? TOKEN_LIFETIME_SECONDS },
      },
    });
    const token = answer.status?.token;
    const expiresAtMs = Date.parse(answer.status?.expirationTimestamp ?? '');
    if (!token || Number.isNaN(expiresAtMs)) throw new TokenRequestIncomplete(serviceAccount);
    this.issued = { token, issuedAtMs, expiresAtMs };
    this.issuedCount += 1;
    return this.issued;
  }
}

/** The apiserver answered a TokenRequest without a token or an expiry. */
export class TokenRequestIncomplete extends Error {
  override readonly name = 'TokenRequestIncomplete';
  constructor(serviceAccount: string) {
    super(`the TokenRequest for ServiceAccount ${serviceAccount} returned no token or expiry`);
  }
}

/**
 * A client of the cluster `base` points at (its server and TLS settings), authenticated only
 * with `tokens`: each request and each watch presents the token current at that moment, so a
 * renewal needs no new connection pool and no restart of whoever uses the client.
 */
export function clientWithTokens(
  base: KubeConfig,
  tokens: Pick<ServiceAccountTokens, 'current'>,
): KubeClient {
  const cluster = base.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const user = 'serviceaccount-token';
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [cluster],
    users: [{ name: user }],
    contexts: [{ name: user, cluster: cluster.name, user }],
    currentContext: user,
  });
  kubeConfig.addAuthenticator({
    isAuthProvider: (candidate) => candidate.name === user,
    applyAuthentication: async (_user, opts) => {
      opts.headers = { ...opts.headers, Authorization: `Bearer ${await tokens.current()}` };
    },
  });
  return new KubeClient(kubeConfig, { fieldManager: fieldManagers.syncer });
}
