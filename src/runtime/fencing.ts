import type { KubeApi, Query, RequestOptions } from './kube-api.ts';
import type { WatchEvent, WatchStream } from './kube-watch.ts';

/** The HTTP methods that change state on the apiserver. */
export const MUTATING_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Whether this replica may write now. `term()` returns the signal of the current leadership term,
 * aborted (with the reason why) the moment the term ends; it throws when there is no current term
 * (not leading, or the renew deadline has passed on the clock).
 */
export interface WriteFence {
  term(): AbortSignal;
}

/**
 * A KubeApi for leader-only work: reads and watches pass through; a write is sent only while the
 * fence has a current term (otherwise it fails at once with the fence's error, and nothing is sent),
 * and a write still in flight when the term ends is aborted (its connection is closed), so a
 * replica that lost its lease neither starts nor finishes a write after its renew deadline, even
 * from a reconcile that ignores its abort signal or a request queued behind a slow connection.
 */
export class FencedKubeApi implements KubeApi {
  constructor(
    private readonly inner: KubeApi,
    private readonly fence: WriteFence,
  ) {}

  request<T = unknown>(options: RequestOptions): Promise<T> {
    if (!MUTATING_METHODS.has(options.method)) return this.inner.request<T>(options);
    let term: AbortSignal;
    try {
      term = this.fence.term();
    } catch (err) {
      return Promise.reject(err);
    }
    // One signal per request, aborted by the caller's signal or the end of the term; the
    // listeners go with the request, so a long term does not collect them.
    const abort = new AbortController();
    const caller = options.signal;
    const onTermEnd = () => abort.abort(term.reason);
    const onCallerAbort = () => abort.abort(caller?.reason);
    if (caller?.aborted) onCallerAbort();
    else caller?.addEventListener('abort', onCallerAbort, { once: true });
    term.addEventListener('abort', onTermEnd, { once: true });
    return this.inner.request<T>({ ...options, signal: abort.signal }).finally(() => {
      term.removeEventListener('abort', onTermEnd);
      caller?.removeEventListener('abort', onCallerAbort);
    });
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
