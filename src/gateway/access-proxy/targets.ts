import type http from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Cluster } from '../../api/cluster.ts';
import { API_GROUP } from '../../api/meta.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { notFound, type StatusError, serviceUnavailable } from '../../api/status.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { type Clock, systemClock } from '../../runtime/clock.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import type { Manager } from '../../runtime/manager.ts';
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
 * tenant-written Secret cannot make the gateway read its own files). A project's space is the host
 * apiserver, reached with the gateway's own kubeconfig.
 *
 * Connections are cached per target object (LRU, {@link ProxyTargetsOptions.maxCachedTargets}),
 * and their agents pool sockets. A cached connection is rebuilt when its object changes (uid or
 * resourceVersion) or its Secret's content does; the Secret is read again at most every
 * {@link SECRET_RECHECK_MS} while the target is in use, at once after `invalidate` (the relay calls
 * it when the target answers 401 to the platform's credential). A replaced or evicted agent is
 * retired: its open streams finish, its sockets are not reused.
 */

/** How often the credentials Secret of a target in use is read again (a rotation shows within this). */
export const SECRET_RECHECK_MS = 10_000;
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

/** What a Cluster or VirtualClusterInstance says about reaching it. */
interface ManagedTarget {
  /** The cache key: `Cluster/<name>` or `VirtualClusterInstance/<namespace>/<name>`. */
  readonly key: string;
  readonly description: string;
  /** uid and resourceVersion: a different one means the object changed. */
  readonly version: string;
  readonly spec: { readonly endpoint?: string | undefined; readonly caData?: string | undefined };
  readonly secret: { readonly namespace: string; readonly name: string } | undefined;
}

interface CachedConnection {
  version: string;
  readonly digest: string;
  readonly connection: TargetConnection;
  /** When the Secret was last read (clock ms); 0 after `invalidate`. */
  checkedAt: number;
}

export class ProxyTargets {
  private readonly cache = new Map<string, CachedConnection>();
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
    let refreshing = this.pending.get(managed.key);
    if (!refreshing) {
      refreshing = this.refresh(managed).finally(() => this.pending.delete(managed.key));
      this.pending.set(managed.key, refreshing);
    }
    return abortable(refreshing, signal);
  }

  /** The target refused the platform's credential: its Secret is read again on the next resolve. */
  invalidate(target: ProxyTarget): void {
    if (target.kind === 'ProjectSpace') {
      this.host.invalidate();
      return;
    }
    const key = targetKey(target, this.options.projectNamespace);
    const cached = this.cache.get(key);
    if (cached) cached.checkedAt = 0;
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
        return cached.connection;
      }
      this.forget(managed.key);
      throw err instanceof SecretUnreadable ? err.status : err;
    }
    const digest = connectionDigest(connection);
    if (cached && cached.digest === digest) {
      cached.version = managed.version;
      cached.checkedAt = this.clock.now();
      this.touch(managed.key, cached);
      return cached.connection;
    }
    const fresh: CachedConnection = {
      version: managed.version,
      digest,
      connection: this.targetConnection(managed.description, connection),
      checkedAt: this.clock.now(),
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
    try {
      const connection = connectionFor(managed.spec, `${secret.namespace}/${secret.name}`, data);
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
    const headers = credentialHeaders(connection);
    return {
      description,
      server: plan.server,
      agent: createTargetAgent(plan, this.connectTimeoutMs),
      credentials: () => headers,
    };
  }

  private due(cached: CachedConnection): boolean {
    return this.clock.now() - cached.checkedAt >= (this.options.secretRecheckMs ?? SECRET_RECHECK_MS);
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

  private forget(key: string): void {
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

/** The cache key of a Cluster or VirtualClusterInstance target (not a space: those share the host's). */
export function targetKey(
  target: Exclude<ProxyTarget, { kind: 'ProjectSpace' }>,
  projectNamespace: (project: string) => string,
): string {
  return target.kind === 'Cluster'
    ? `Cluster/${target.cluster}`
    : `VirtualClusterInstance/${projectNamespace(target.project)}/${target.virtualCluster}`;
}

const clusterKey = (cluster: Stored<Cluster>) => `Cluster/${cluster.metadata.name}`;
const instanceKey = (vci: Stored<VirtualClusterInstance>) =>
  `VirtualClusterInstance/${vci.metadata.namespace}/${vci.metadata.name}`;
const versionOf = (object: { metadata: { uid?: string; resourceVersion?: string } }) =>
  `${object.metadata.uid ?? ''}/${object.metadata.resourceVersion ?? ''}`;

function clusterTarget(cluster: Stored<Cluster>): ManagedTarget {
  return {
    key: clusterKey(cluster),
    description: `cluster "${cluster.metadata.name}"`,
    version: versionOf(cluster),
    spec: cluster.spec,
    secret: cluster.spec.credentialsSecretRef,
  };
}

function instanceTarget(vci: Stored<VirtualClusterInstance>, project: string): ManagedTarget {
  const secretName = vci.spec.credentialsSecretRef?.name;
  return {
    key: instanceKey(vci),
    description: `virtual cluster "${project}/${vci.metadata.name}"`,
    version: versionOf(vci),
    spec: vci.spec,
    secret: secretName ? { namespace: vci.metadata.namespace ?? '', name: secretName } : undefined,
  };
}

/** 404 as kube-apiserver words it: `clusters.management.platform "prod" not found`. */
function missing(resource: string, name: string): StatusError {
  const group = API_GROUP;
  return notFound(`${resource}.${group} "${name}" not found`, { name, group, kind: resource });
}

/** 503 naming the target and why the platform cannot reach it (never the credentials). */
function unreachable(description: string, reason: string, message: string): StatusError {
  return serviceUnavailable(`${description} cannot be reached (${reason}): ${message}`);
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
