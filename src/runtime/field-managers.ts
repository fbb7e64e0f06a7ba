import type { KubeApi, Query, RequestOptions } from './kube-api.ts';
import type { WatchEvent, WatchStream } from './kube-watch.ts';

/**
 * Every field manager the platform writes as: the one list (server-side apply and
 * `metadata.managedFields` tell writers apart by these names, so they must not change once
 * released). A component names its writes `platform-<component>`; a controller whose applies
 * must be told apart from the others' has its own name.
 */
export const fieldManagers = {
  /** The controllers' writes that are not one controller's apply: status, finalizers, Events, leases. */
  controller: 'platform-controller',
  sharedSecret: 'platform-sharedsecret-controller',
  secretSync: 'platform-secret-sync',
  project: 'platform-project-controller',
  virtualCluster: 'platform-virtualcluster-controller',
  /** The admission webhooks: their configurations and serving certificates, key id claims. */
  admission: 'platform-admission',
  /** The management gateway's own writes: issued keys, the platform config, key activity. */
  gateway: 'platform-gateway',
  /** Signing in: Users, Teams, passwords, the keys it issues, identity refresh. */
  login: 'platform-login',
  /** A virtual cluster's syncer, on the host and on the virtual cluster. */
  syncer: 'platform-syncer',
  /** `platform dev`: the namespace, roles and bootstrap objects of a local platform. */
  dev: 'platform-dev',
  /** The CRDs, installed by `platform dev` and the tests. */
  crds: 'platform-crds',
} as const;

export type FieldManager = (typeof fieldManagers)[keyof typeof fieldManagers];

const PLATFORM_FIELD_MANAGERS: ReadonlySet<string> = new Set(Object.values(fieldManagers));

/** Whether `name` is one of the platform's field managers. */
export function isPlatformFieldManager(name: string): name is FieldManager {
  return PLATFORM_FIELD_MANAGERS.has(name);
}

/** The methods whose requests write fields (a DELETE writes none). */
const FIELD_WRITING_METHODS: ReadonlySet<RequestOptions['method']> = new Set(['POST', 'PUT', 'PATCH']);

/**
 * The `fieldManager` query of a request: the request's own when it names one (a controller's
 * apply), else `manager`. Reads and deletes are left as they are.
 */
export function withDefaultFieldManager(options: RequestOptions, manager: FieldManager): RequestOptions {
  if (!FIELD_WRITING_METHODS.has(options.method) || options.query?.fieldManager !== undefined) return options;
  return { ...options, query: { ...options.query, fieldManager: manager } };
}

/**
 * A KubeApi whose writes name `manager` as their field manager unless they name their own. Every
 * component wraps the client it is handed in one, at its entry point, so that whoever built the
 * client (a command, a test, another component sharing its connection), the component's writes
 * are recorded as its own, never as `unknown` or a library's user agent.
 */
export class FieldManagedKubeApi implements KubeApi {
  constructor(
    private readonly inner: KubeApi,
    readonly manager: FieldManager,
  ) {}

  request<T = unknown>(options: RequestOptions): Promise<T> {
    return this.inner.request<T>(withDefaultFieldManager(options, this.manager));
  }

  watch(
    path: string,
    query: Query,
    onEvent: (event: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<WatchStream> {
    return this.inner.watch(path, query, onEvent, signal);
  }
}

/** `api`, its writes named `manager` (see {@link FieldManagedKubeApi}). */
export function asFieldManager(api: KubeApi, manager: FieldManager): KubeApi {
  return new FieldManagedKubeApi(api, manager);
}
