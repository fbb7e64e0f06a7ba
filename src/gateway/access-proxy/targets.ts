import type http from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Cluster } from '../../api/cluster.ts';
import { API_GROUP } from '../../api/meta.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { notFound, StatusError, serviceUnavailable } from '../../api/status.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { provisionedConnection } from '../../clusters/provisioned-connection.ts';
import { type Clock, systemClock } from '../../runtime/clock.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import type { Manager } from '../../runtime/manager.ts';
import {
  clusterKey,
  clusterTarget,
  instanceKey,
  instanceTarget,
  type ManagedTarget,
  targetKey,
} from './managed-targets.ts';
import type { ProxyTarget, TargetConnection } from './target.ts';
import {
  agentPlan,
  connectionDigest,
  createTargetAgent,
  credentialHeaders,
  DEFAULT_CONNECT_TIMEOUT_MS,
  retireAgent,
} from './target-agents.ts';
import { HostConnection } from './target-host.ts';

export { DEFAULT_CONNECT_TIMEOUT_MS, TargetConnectTimeout } from './target-agents.ts';

/**
 * Where the access proxy sends a request, and with what: a {@link ProxyTarget} resolved to a
 * {@link TargetConnection}. A `Cluster` and a project's `VirtualClusterInstance` are read from the
 * gateway's informers; the credentials Secret their `spec.credentialsSecretRef` names is read as
 * the gateway (`get` on secrets) and reduced by `connectionFor` (inline credentials only: a
 * tenant-written Secret cannot make the gateway read its own files). A VirtualClusterInstance the
 * platform provisioned (no `spec.endpoint`) is reached with its admin Secret (`vc-<name>-admin`,
 * read the same way, by `provisionedConnection`); while that Secret does not exist the instance is
 * not made yet, a 503 `NotProvisioned`. A project's space is the host apiserver, reached with the
 * gateway's own kubeconfig.
 *
 * Connections are cached per target object (LRU, {@link ProxyTargetsOptions.maxCachedTargets}),
 * and their agents pool sockets. A cached connection is rebuilt when its object changes (uid or
 * resourceVersion) or its Secret's content does; the Secret is read again at most every
 * {@link SECRET_RECHECK_MS} while the target is in use, at once after `invalidate` (the relay calls
 * it when the target answers 401 to the platform's credential). Whatever callers do, a target's
 * Secret is read at most once per {@link MIN_SECRET_READ_INTERVAL_MS}: a refusal (a missing or
 * unusable Secret) is answered again from memory until then, so that a tenant hammering a broken
 * virtual cluster, or one answering 401, makes no request to the apiserver per request. A replaced or evicted agent is
 * retired: its open streams finish, its sockets are not reused.
 */

/** How often the credentials Secret of a target in use is read again (a rotation shows within this). */
export const SECRET_RECHECK_MS = 10_000;
/** The shortest time between two reads of one target's Secret. */
export const MIN_SECRET_READ_INTERVAL_MS = 1_000;
/** Targets whose connections (agents, sockets) are kept; the least recently used goes first. */
export const DEFAULT_MAX_CACHED_TARGETS = 256;

export interface ProxyTargetsOptions {
  readonly clusters: Informer<Stored<Cluster>>;
  readonly virtualClusters: Informer<Stored<VirtualClusterInstance>>;
  /** The namespace of a project (`projectNamespaceName`; the project need not exist). */
  readonly projectNamespace: (project: string) => string;
  /** The project a namespace belongs to (`projectOfNamespace`), if any. */
  readonly projectOfNamespace: (namespace: string) => string | undefined;
  /** Reads credentials Secrets, as the gateway. */
  readonly api: KubeApi;
  /** The gateway's own kubeconfig: how a project's space (the host apiserver) is reached. */
  readonly hostKubeConfig: KubeConfig;
  readonly clock?: Clock;
  /** Default {@link DEFAULT_CONNECT_TIMEOUT_MS}. */
  readonly connectTimeoutMs?: number;
  /** Default {@link SECRET_RECHECK_MS}. */
  readonly secretRecheckMs?: number;
  /** Default {@link DEFAULT_MAX_CACHED_TARGETS}. */
  readonly maxCachedTargets?: number;
}

/** Registers the informers the targets are read from; call before `manager.start()`. */
export function setupProxyTargets(
  manager: Manager,
  options: Omit<ProxyTargetsOptions, 'clusters' | 'virtualClusters'>,
): ProxyTargets {
  return new ProxyTargets({
    ...options,
    clusters: manager.informer<Stored<Cluster>>(resources.clusters),
    virtualClusters: manager.informer<Stored<VirtualClusterInstance>>(resources.virtualClusterInstances),
  });
}

interface CachedConnection {
  version: string;
  readonly digest: string;
  readonly connection: TargetConnection;
  /** When the Secret was last read (clock ms). */
  checkedAt: number;
  /** `invalidate` asked for the Secret to be read again. */
  invalidated: boolean;
}

/** A target refused for its credentials: answered again without a read until the next is allowed. */
interface CachedRefusal {
  readonly version: string;
  readonly error: StatusError;
  readonly at: number;
}

export class ProxyTargets {
  private readonly cache = new Map<string, CachedConnection>();
  private readonly refusals = new Map<string, CachedRefusal>();
  private readonly pending = new Map<string, Promise<TargetConnection>>();
  private readonly host: HostConnection;
  private readonly clock: Clock;
  private readonly connectTimeoutMs: number;
  private readonly unsubscribe: Array<() => void>;

  constructor(private readonly options: ProxyTargetsOptions) {
    this.clock = options.clock ?? systemClock;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.host = new HostConnection(options.hostKubeConfig, this.connectTimeoutMs, this.clock);
    // A deleted object's connection goes at once, not when the LRU reaches it.
    this.unsubscribe = [
      options.clusters.addEventHandler({ onDelete: (cluster) => this.forget(clusterKey(cluster)) }),
      options.virtualClusters.addEventHandler({ onDelete: (vci) => this.forget(instanceKey(vci)) }),
    ];
  }

  /** Whether the caches the targets are read from have synced (the gateway's readiness). */
  hasSynced(): boolean {
    return this.options.clusters.hasSynced() && this.options.virtualClusters.hasSynced();
  }

  /**
   * How to reach `target`. Throws a {@link StatusError}: 404 for a Cluster or VirtualClusterInstance
   * that does not exist (or a space that is not the project's), 503 naming the target and why for
   * credentials that are missing or unusable, or a target without an endpoint.
   */
  async resolve(target: ProxyTarget, signal?: AbortSignal): Promise<TargetConnection> {
    if (target.kind === 'ProjectSpace') return this.resolveSpace(target);
    const managed = await this.managedTarget(target, signal);
    const cached = this.cache.get(managed.key);
    if (cached && cached.version === managed.version && !this.due(cached)) {
      this.touch(managed.key, cached);
      return cached.connection;
    }
    const refusal = this.refusals.get(managed.key);
    if (refusal?.version === managed.version && this.clock.now() - refusal.at < MIN_SECRET_READ_INTERVAL_MS) {
      throw refusal.error;
    }
    let refreshing = this.pending.get(managed.key);
    if (!refreshing) {
      refreshing = this.refresh(managed).finally(() => this.pending.delete(managed.key));
      this.pending.set(managed.key, refreshing);
    }
    return abortable(refreshing, signal);
  }

  /**
   * The target refused the platform's credential: its Secret is read again on the next resolve
   * (not before {@link MIN_SECRET_READ_INTERVAL_MS} after the last read).
   */
  invalidate(target: ProxyTarget): void {
    if (target.kind === 'ProjectSpace') {
      this.host.invalidate();
      return;
    }
    const key = targetKey(target, this.options.projectNamespace);
    const cached = this.cache.get(key);
    if (cached) cached.invalidated = true;
  }

  /** Stops following the informers and closes every agent (open streams are cut). */
  close(): void {
    for (const stop of this.unsubscribe) stop();
    for (const { connection } of this.cache.values()) connection.agent.destroy();
    this.cache.clear();
    this.host.close();
  }

  private resolveSpace(target: Extract<ProxyTarget, { kind: 'ProjectSpace' }>): Promise<TargetConnection> {
    if (this.options.projectOfNamespace(target.space) !== target.project) {
      throw notFound(`space "${target.space}" is not a namespace of project "${target.project}"`, {
        name: target.space,
        kind: 'spaces',
      });
    }
    return this.host.connection(`space "${target.project}/${target.space}"`);
  }

  private async managedTarget(
    target: Exclude<ProxyTarget, { kind: 'ProjectSpace' }>,
    signal: AbortSignal | undefined,
  ): Promise<ManagedTarget> {
    if (target.kind === 'Cluster') {
      const { clusters } = this.options;
      await this.synced(clusters, 'clusters', signal);
      const cluster = clusters.store.get(target.cluster);
      if (!cluster) throw missing('clusters', target.cluster);
      return clusterTarget(cluster);
    }
    const { virtualClusters } = this.options;
    await this.synced(virtualClusters, 'virtual clusters', signal);
    const namespace = this.options.projectNamespace(target.project);
    const instance = virtualClusters.store.getByName(namespace, target.virtualCluster);
    if (!instance) throw missing('virtualclusterinstances', target.virtualCluster);
    return instanceTarget(instance, target.project);
  }

  /** Waits for a cache's first list, at most the connect timeout (a gateway just started). */
  private async synced(
    informer: Pick<Informer, 'hasSynced' | 'waitForSync'>,
    what: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (informer.hasSynced()) return;
    const timeout = AbortSignal.timeout(this.connectTimeoutMs);
    if (await informer.waitForSync(signal ? AbortSignal.any([signal, timeout]) : timeout)) return;
    signal?.throwIfAborted();
    throw serviceUnavailable(`the platform's cache of ${what} is not ready yet`);
  }

  /** Reads the Secret, and keeps the cached connection if it reaches the target the same way. */
  private async refresh(managed: ManagedTarget): Promise<TargetConnection> {
    const cached = this.cache.get(managed.key);
    let connection: Connection;
    try {
      connection = await this.connectionOf(managed);
    } catch (err) {
      if (err instanceof SecretUnreadable && cached) {
        // The apiserver did not answer: keep what worked, try again after the recheck period.
        cached.checkedAt = this.clock.now();
        cached.invalidated = false;
        return cached.connection;
      }
      this.forget(managed.key);
      const error = err instanceof SecretUnreadable ? err.status : err;
      if (error instanceof StatusError) {
        this.refusals.set(managed.key, { version: managed.version, error, at: this.clock.now() });
      }
      throw error;
    }
    this.refusals.delete(managed.key);
    const digest = connectionDigest(connection);
    if (cached && cached.digest === digest) {
      cached.version = managed.version;
      cached.checkedAt = this.clock.now();
      cached.invalidated = false;
      this.touch(managed.key, cached);
      return cached.connection;
    }
    const fresh: CachedConnection = {
      version: managed.version,
      digest,
      connection: this.targetConnection(managed.description, connection),
      checkedAt: this.clock.now(),
      invalidated: false,
    };
    this.forget(managed.key);
    this.cache.set(managed.key, fresh);
    this.evictBeyondCap();
    return fresh.connection;
  }

  private async connectionOf(managed: ManagedTarget): Promise<Connection> {
    const { secret, description } = managed;
    if (!secret) {
      throw unreachable(description, 'CredentialsNotConfigured', 'spec.credentialsSecretRef is not set');
    }
    let data: Record<string, string> | null;
    try {
      data = await readCredentialsSecret(this.options.api, secret.namespace, secret.name);
    } catch {
      throw new SecretUnreadable(
        serviceUnavailable(`${description} cannot be reached: its credentials Secret could not be read`),
      );
    }
    if (managed.provisioned && data === null) {
      // The provisioner writes the admin Secret before it starts the control plane.
      throw unreachable(
        description,
        'NotProvisioned',
        'the platform has not made its control plane yet (it has no admin credentials yet)',
      );
    }
    try {
      const connection = managed.provisioned
        ? provisionedConnection(managed.provisioned.instanceName, data)
        : connectionFor(managed.spec, `${secret.namespace}/${secret.name}`, data);
      agentPlan(connection);
      return connection;
    } catch (err) {
      if (err instanceof CredentialsMissing || err instanceof InvalidCredentials) {
        throw unreachable(description, err.name, err.message);
      }
      throw err;
    }
  }

  private targetConnection(description: string, connection: Connection): TargetConnection {
    const plan = agentPlan(connection);
    const headers = Object.freeze(credentialHeaders(connection));
    return {
      description,
      server: plan.server,
      agent: createTargetAgent(plan, this.connectTimeoutMs),
      credentials: () => headers,
    };
  }

  private due(cached: CachedConnection): boolean {
    const age = this.clock.now() - cached.checkedAt;
    return age >= this.recheckMs || (cached.invalidated && age >= MIN_SECRET_READ_INTERVAL_MS);
  }

  /** Marks an entry most recently used (a Map iterates in insertion order). */
  private touch(key: string, cached: CachedConnection): void {
    this.cache.delete(key);
    this.cache.set(key, cached);
  }

  private evictBeyondCap(): void {
    const cap = this.options.maxCachedTargets ?? DEFAULT_MAX_CACHED_TARGETS;
    for (const key of this.cache.keys()) {
      if (this.cache.size <= cap) return;
      this.forget(key);
    }
  }

  private get recheckMs(): number {
    return this.options.secretRecheckMs ?? SECRET_RECHECK_MS;
  }

  private forget(key: string): void {
    this.refusals.delete(key);
    const cached = this.cache.get(key);
    if (!cached) return;
    this.cache.delete(key);
    retireAgent(cached.connection.agent as http.Agent);
  }
}

/** A Secret read that failed for another reason than its absence (the answer when nothing is cached). */
class SecretUnreadable extends Error {
  constructor(readonly status: StatusError) {
    super(status.message);
  }
}

/** 404 as kube-apiserver words it: `clusters.management.platform "prod" not found`. */
function missing(resource: string, name: string): StatusError {
  const group = API_GROUP;
  return notFound(`${resource}.${group} "${name}" not found`, { name, group, kind: resource });
}

/**
 * 503 naming the target and why the platform cannot reach it (never the credentials). Without
 * `Retry-After`: the Secret or the object must be fixed first, and client-go retries a 503 that
 * carries one up to ten times, making the client wait instead of telling it.
 */
function unreachable(description: string, reason: string, message: string): StatusError {
  return new StatusError(
    503,
    'ServiceUnavailable',
    `${description} cannot be reached (${reason}): ${message}`,
  );
}

/** `promise`, or a rejection with the signal's reason once it aborts (the work goes on for others). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
