import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, type Dispatcher, type Headers, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll } from 'vitest';
import type { Scope } from '../../src/api/scope.ts';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { type GatewayEnv, type GatewayEnvOptions, useGatewayEnv } from '../gateway/support.ts';
import { type CommandResult, kubeConfigFor, kubectl, uniqueName, useExtraClusters } from './cluster.ts';
import {
  CLUSTER,
  connectCluster,
  connectVirtualCluster,
  createProject,
  PROJECT,
  PROJECT_NAMESPACE,
  prepareTarget,
  VIRTUAL_CLUSTER,
} from './proxy-targets.ts';
import { eventually } from './wait.ts';

export * from './proxy-targets.ts';

/**
 * The access proxy's world (issue 26, docs/access-proxy.md): the platform (the gateway with its
 * own kube-apiserver, the "host", where the project's space lives), a second kube-apiserver
 * connected as the `Cluster` {@link CLUSTER}, and a third as the `VirtualClusterInstance`
 * {@link VIRTUAL_CLUSTER} of the project {@link PROJECT}. On the two targets the only thing
 * installed for the platform is its identity (a ServiceAccount) and the one ClusterRole and
 * binding that let it impersonate ({@link impersonatorRbac}); every request it makes there
 * impersonates the caller. Used by e2e/access-proxy/, e2e/security/ and bench/proxy.
 */

/** The three proxy paths. `space` is the project's namespace on the host. */
export type ProxyPath = 'cluster' | 'virtualcluster' | 'space';
export const PROXY_PATHS: readonly ProxyPath[] = ['cluster', 'virtualcluster', 'space'];

/**
 * The person's side of a test, installed by tests (not the platform): a ClusterRole they bind
 * per namespace to give an impersonated person ordinary rights on a target.
 */
export const EDITOR_ROLE = 'access-proxy-e2e-editor';
const EDITOR_RULES = [
  {
    apiGroups: [''],
    resources: ['configmaps', 'secrets', 'services', 'pods', 'pods/proxy'],
    verbs: ['*'],
  },
];

export interface ProxyTargetInfo {
  /** The kube-apiserver behind the path. */
  readonly cluster: Cluster;
  /** The path's URL on the gateway, without a trailing slash. */
  readonly prefix: string;
  /** A namespace of the target tests work in (the space itself for `space`). */
  readonly namespace: string;
}

export interface ResponseBytes {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  /** The body parsed as JSON, when it is. */
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  readonly json: any;
}

export interface AccessProxyEnv {
  readonly gateway: GatewayEnv;
  readonly host: Cluster;
  readonly connected: Cluster;
  readonly virtual: Cluster;
  target(path: ProxyPath): ProxyTargetInfo;
  /** A key of the person `user` (created if new) with `scope` (none: not narrowed), accepted by the gateway. */
  keyFor(user: string, scope?: Scope): Promise<string>;
  /** Binds {@link EDITOR_ROLE} to the user `user` in the path's work namespace (or `namespace`) on its target. */
  grant(path: ProxyPath, user: string, namespace?: string): Promise<void>;
  /** Removes that binding. */
  revoke(path: ProxyPath, user: string, namespace?: string): Promise<void>;
  /** Writes a kubeconfig whose server is the path's proxy URL and whose bearer is `token`; returns its path. */
  kubeconfig(path: ProxyPath, token: string): string;
  /** Runs kubectl through the path with `token`. */
  kubectl(path: ProxyPath, token: string, args: string[], stdin?: string): Promise<CommandResult>;
  /** A request through the proxy: `upstreamPath` on the target, `token` as the bearer. */
  viaProxy(path: ProxyPath, token: string, upstreamPath: string, init?: RawInit): Promise<ResponseBytes>;
  /** The same request made directly to the target as its admin (impersonating `as` when given). */
  direct(path: ProxyPath, upstreamPath: string, init?: RawInit & { as?: string }): Promise<ResponseBytes>;
  /** A cluster-admin client of the path's target. */
  admin(path: ProxyPath): KubeClient;
  /**
   * Stops the kube-apiserver behind `path` (its data stays in etcd); `start` brings it back on
   * the same address with the same certificates and tokens. `target(path).cluster` is then the new process.
   */
  stopTarget(path: 'cluster' | 'virtualcluster'): Promise<{ start(): Promise<void> }>;
  /** Closes the clients and agents above. */
  close(): Promise<void>;
}

export interface RawInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
}

/** One HTTP request, its answer's body kept as bytes. */
export async function rawRequest(
  url: string,
  dispatcher: Dispatcher | undefined,
  init: RawInit = {},
): Promise<ResponseBytes> {
  const response = await undiciFetch(url, {
    method: init.method ?? 'GET',
    headers: init.headers ?? {},
    ...(init.body !== undefined ? { body: init.body } : {}),
    ...(dispatcher ? { dispatcher } : {}),
    ...(init.signal ? { signal: init.signal } : {}),
  });
  const body = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, body, json };
}

/**
 * Starts the access proxy's world for the calling describe block (see the module comment).
 * `options` go to the gateway environment (HTTPS always: kubectl sends tokens only over TLS).
 */
export function useAccessProxyEnv(options: Omit<GatewayEnvOptions, 'https'> = {}): () => AccessProxyEnv {
  const gateway = useGatewayEnv({
    ...options,
    https: true,
    controllers: options.controllers ?? ['sharedsecret', 'project'],
  });
  const startCluster = useExtraClusters();
  let env: AccessProxyEnv | undefined;
  beforeAll(async () => {
    const g = gateway();
    const host = g.cluster;
    if (!host) throw new Error('the access proxy environment needs the gateway on an apiserver of its own');
    // One after the other: useExtraClusters makes its control plane on the first call, and two
    // first calls at once would make two (with two CAs; a restart would then use the other one).
    const connected = await startCluster({ name: uniqueName('connected') });
    // CBOR (alpha in 1.36) on one target: the proxy passes CBOR bodies where a target speaks it.
    const virtual = await startCluster({
      name: uniqueName('virtual'),
      extraApiServerArgs: ['--feature-gates=CBORServingAndStorage=true'],
    });
    const [connectedToken, virtualToken] = await Promise.all([
      prepareTarget(connected),
      prepareTarget(virtual),
    ]);
    await createProject(g);
    await connectCluster(g, {
      name: CLUSTER,
      endpoint: connected.server,
      caPem: connected.caPem,
      credentials: { token: connectedToken },
    });
    await connectVirtualCluster(g, {
      name: VIRTUAL_CLUSTER,
      endpoint: virtual.server,
      caPem: virtual.caPem,
      credentials: { token: virtualToken },
    });
    const targets = proxyTargets(g.server.url, host, connected, virtual);
    env = makeEnv(g, host, connected, virtual, targets, async (path) => {
      const stopped = targets[path].cluster;
      await stopped.stop();
      return {
        start: async () => {
          const started = await startCluster({ name: stopped.name, port: stopped.port });
          targets[path] = { ...targets[path], cluster: started };
        },
      };
    });
    for (const path of PROXY_PATHS) {
      const admin = env.admin(path);
      await admin.request({
        method: 'POST',
        path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
        body: { metadata: { name: EDITOR_ROLE }, rules: EDITOR_RULES },
      });
      if (path !== 'space')
        await admin.request({
          method: 'POST',
          path: '/api/v1/namespaces',
          body: { metadata: { name: 'work' } },
        });
    }
  });
  afterAll(async () => {
    await env?.close();
  });
  return () => {
    if (!env) throw new Error('the access proxy environment is not started');
    return env;
  };
}

/** Where each path goes: its target apiserver, its URL on the gateway, the namespace tests work in. */
function proxyTargets(
  gateway: string,
  host: Cluster,
  connected: Cluster,
  virtual: Cluster,
): Record<ProxyPath, ProxyTargetInfo> {
  return {
    cluster: {
      cluster: connected,
      prefix: `${gateway}/kubernetes/cluster/${CLUSTER}`,
      namespace: 'work',
    },
    virtualcluster: {
      cluster: virtual,
      prefix: `${gateway}/kubernetes/project/${PROJECT}/virtualcluster/${VIRTUAL_CLUSTER}`,
      namespace: 'work',
    },
    space: {
      cluster: host,
      prefix: `${gateway}/kubernetes/project/${PROJECT}/space/${PROJECT_NAMESPACE}`,
      namespace: PROJECT_NAMESPACE,
    },
  };
}

/** Memoized per path: `make` runs once for each path asked. */
function perPath<T>(make: (path: ProxyPath) => T): {
  get(path: ProxyPath): T;
  all(): T[];
  forget(path: ProxyPath): void;
} {
  const made = new Map<ProxyPath, T>();
  return {
    get: (path) => {
      if (!made.has(path)) made.set(path, make(path));
      return made.get(path) as T;
    },
    all: () => [...made.values()],
    forget: (path) => made.delete(path),
  };
}

/** Writes a kubeconfig whose server is `target`'s proxy URL, trusting the gateway, with `token`. */
function writeProxyKubeconfig(
  g: GatewayEnv,
  path: ProxyPath,
  target: ProxyTargetInfo,
  token: string,
): string {
  const file = join(target.cluster.kubeconfigPath, '..', `${uniqueName(`proxy-${path}`)}.kubeconfig`);
  const document = kubeConfigYaml({
    name: `proxy-${path}`,
    server: target.prefix,
    ...(g.caPem ? { caPem: g.caPem } : {}),
    credentials: { token },
  });
  writeFileSync(file, document, { mode: 0o600 });
  return file;
}

/** A key of `user` with `scope`, once the gateway's authenticator knows it; the User is made first. */
async function scopedKey(g: GatewayEnv, users: Set<string>, user: string, scope: Scope): Promise<string> {
  // g.user makes the User (with a key of its own); a scoped key may not be allowed the management
  // API request g.user waits on, so this one waits on the authenticator.
  if (!users.has(user)) {
    await g.user(user);
    users.add(user);
  }
  const token = await g.key({ user, scope });
  await eventually(
    () => g.gateway.authenticator.authenticateCached(token).ok,
    30_000,
    'the gateway to know the scoped key',
  );
  return token;
}

function makeEnv(
  g: GatewayEnv,
  host: Cluster,
  connected: Cluster,
  virtual: Cluster,
  targets: Record<ProxyPath, ProxyTargetInfo>,
  stopTarget: AccessProxyEnv['stopTarget'],
): AccessProxyEnv {
  const admins = perPath((path) => new KubeClient(kubeConfigFor(targets[path].cluster)));
  const directAgents = perPath((path) => new Agent({ connect: { ca: targets[path].cluster.caPem } }));
  const users = new Set<string>();
  const bindings = (namespace: string) =>
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`;
  const bindingName = (user: string) => `${EDITOR_ROLE}-${user}`;
  const kubeconfig = (path: ProxyPath, token: string) => writeProxyKubeconfig(g, path, targets[path], token);
  return {
    gateway: g,
    host,
    connected,
    virtual,
    target: (path) => targets[path],
    admin: admins.get,
    stopTarget: async (path) => {
      admins.get(path).close();
      admins.forget(path);
      return stopTarget(path);
    },
    close: async () => {
      for (const client of admins.all()) client.close();
      await Promise.all(directAgents.all().map((agent) => agent.close()));
    },
    keyFor: (user, scope) => (scope ? scopedKey(g, users, user, scope) : g.user(user)),
    grant: async (path, user, namespace = targets[path].namespace) => {
      await admins.get(path).request({
        method: 'POST',
        path: bindings(namespace),
        body: {
          metadata: { name: bindingName(user) },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: EDITOR_ROLE },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
        },
      });
    },
    revoke: async (path, user, namespace = targets[path].namespace) => {
      await admins
        .get(path)
        .request({ method: 'DELETE', path: `${bindings(namespace)}/${bindingName(user)}` });
    },
    kubeconfig,
    kubectl: (path, token, args, stdin) =>
      kubectl(args, { kubeconfig: kubeconfig(path, token), ...(stdin !== undefined ? { stdin } : {}) }),
    viaProxy: (path, token, upstreamPath, init = {}) =>
      rawRequest(`${targets[path].prefix}${upstreamPath}`, g.dispatcher, {
        ...init,
        headers: { authorization: `Bearer ${token}`, ...init.headers },
      }),
    direct: (path, upstreamPath, init = {}) =>
      rawRequest(`${targets[path].cluster.server}${upstreamPath}`, directAgents.get(path), {
        ...init,
        headers: {
          authorization: `Bearer ${targets[path].cluster.adminToken}`,
          ...(init.as ? { 'impersonate-user': init.as } : {}),
          ...init.headers,
        },
      }),
  };
}

/** Every file of the gateway's audit log directory `dir`, concatenated (rotated files included). */
export function auditDirText(dir: string): string {
  let text = '';
  for (const file of readdirSync(dir)) text += readFileSync(join(dir, file), 'utf8');
  return text;
}

/** Waits until the gateway audits requests through the cluster path into `dir` (its audit configuration is in force). */
export async function untilProxyAudited(env: AccessProxyEnv, token: string, dir: string): Promise<void> {
  await eventually(
    async () => {
      await env.viaProxy('cluster', token, '/api/v1/namespaces/work/configmaps');
      return auditDirText(dir).includes('/kubernetes/cluster/');
    },
    60_000,
    'the gateway to audit a proxied request',
  );
}
