import { setMaxListeners } from 'node:events';
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

/**
 * The terms of one lease held by this replica: `begin` when it is acquired, `end` when it is
 * lost or released. A write of `fence` goes out only during a term and before `validUntil()` on
 * the clock (the renew deadline, which ends the term even before its timer has run).
 */
export class LeaseTerms {
  private current: { controller: AbortController; fence: WriteFence } | undefined;

  constructor(
    private readonly clock: { now(): number },
    private readonly validUntil: () => number,
    private readonly refusal: () => Error,
  ) {}

  begin(): void {
    this.current?.controller.abort(this.refusal());
    const controller = termController();
    const term = {
      controller,
      fence: { term: () => this.signalOf(term === this.current ? controller : undefined) },
    };
    this.current = term;
  }

  end(reason: Error): void {
    this.current?.controller.abort(reason);
    this.current = undefined;
  }

  /** Whether a term is current (begun, not ended, its deadline not passed). */
  isCurrent(): boolean {
    return (
      this.current !== undefined &&
      !this.current.controller.signal.aborted &&
      this.clock.now() < this.validUntil()
    );
  }

  /** The fence of whichever term is current. */
  readonly fence: WriteFence = { term: () => this.signalOf(this.current?.controller) };

  /**
   * The fence of the current term alone (the same object for the whole term; undefined between
   * terms): once the term ends, its writes stay refused even during a later term (what was started
   * in a term, e.g. a syncer with its caches, must not write in the next).
   */
  termFence(): WriteFence | undefined {
    return this.current?.fence;
  }

  private signalOf(term: AbortController | undefined): AbortSignal {
    if (!term || term.signal.aborted || this.clock.now() >= this.validUntil()) throw this.refusal();
    return term.signal;
  }
}

/**
 * A term's controller: every write in flight listens on its signal (and stops listening when it
 * completes), so many concurrent writes are expected, not a leak.
 */
export function termController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
