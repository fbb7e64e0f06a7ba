import type http from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { serviceUnavailable } from '../../api/status.ts';
import type { Clock } from '../../runtime/clock.ts';
import { kubeConfigCredentials } from '../proxy/upstream.ts';
import type { TargetConnection } from './target.ts';
import { createTargetAgent } from './target-agents.ts';

/** How often the gateway's own credential is read again from its kubeconfig (as `Upstream` does). */
const HOST_CREDENTIAL_REFRESH_MS = 60_000;

/**
 * The host apiserver (where a project's spaces are), reached with the gateway's own kubeconfig:
 * one agent for every space, its TLS material read once, its credential (a rotating
 * service-account token) read again in the background every minute, at once after `invalidate`.
 */
export class HostConnection {
  private agent: http.Agent | undefined;
  private server: URL | undefined;
  private authorization: Readonly<Record<string, string>> = {};
  private started: Promise<void> | undefined;
  private refreshedAt = 0;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly connectTimeoutMs: number,
    private readonly clock: Clock,
  ) {}

  /** The host's connection, described as `description` (the space it is for). */
  async connection(description: string): Promise<TargetConnection> {
    this.started ??= this.start();
    await this.started.catch(() => {
      this.started = undefined;
      throw serviceUnavailable(
        `${description} cannot be reached: the platform's credentials could not be read`,
      );
    });
    this.maybeRefresh();
    return {
      description,
      server: this.server!,
      agent: this.agent!,
      credentials: () => this.authorization,
    };
  }

  invalidate(): void {
    this.refreshedAt = 0;
  }

  close(): void {
    this.agent?.destroy();
  }

  private async start(): Promise<void> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const { tls, authorization } = await kubeConfigCredentials(this.kubeConfig);
    this.server = new URL(cluster.server);
    this.authorization = authorization ? { authorization } : {};
    this.refreshedAt = this.clock.now();
    this.agent = createTargetAgent(
      {
        server: this.server,
        options: {
          keepAlive: true,
          ...(tls.ca ? { ca: tls.ca } : {}),
          ...(tls.cert ? { cert: tls.cert } : {}),
          ...(tls.key ? { key: tls.key } : {}),
          ...(tls.servername ? { servername: tls.servername } : {}),
          ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
        },
      },
      this.connectTimeoutMs,
    );
  }

  private maybeRefresh(): void {
    if (this.refreshing || this.clock.now() - this.refreshedAt < HOST_CREDENTIAL_REFRESH_MS) return;
    this.refreshing = kubeConfigCredentials(this.kubeConfig)
      .then(({ authorization }) => {
        this.authorization = authorization ? { authorization } : {};
      })
      .catch(() => {
        // Keep the previous credential; the next refresh tries again.
      })
      .finally(() => {
        this.refreshedAt = this.clock.now();
        this.refreshing = undefined;
      });
  }
}
