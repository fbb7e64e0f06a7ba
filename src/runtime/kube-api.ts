import type { WatchEvent, WatchStream } from './kube-watch.ts';

// The contract between the runtime and an apiserver client, apart from the client itself so
// that what wraps a client (field-managers.ts) and the client (kube-client.ts) can both name it
// without importing each other.

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Query;
  body?: unknown;
  /** Defaults to application/json; patches name their strategy (see `PatchStrategy`). */
  contentType?: string;
  signal?: AbortSignal;
  /** Aborts the request (RequestTimeoutError) when no full answer arrived in this time (0: never). */
  timeoutMs?: number;
}

/**
 * The narrow client the runtime talks to the apiserver through. `KubeClient` is the real one;
 * it is an interface so the pure parts can be unit-tested without network.
 */
export interface KubeApi {
  request<T = unknown>(options: RequestOptions): Promise<T>;
  /** `signal` aborts the watch at any stage, including while it is being opened. */
  watch(
    path: string,
    query: Query,
    onEvent: (event: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<WatchStream>;
}
