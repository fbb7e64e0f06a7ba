import type * as http from 'node:http';
import type * as https from 'node:https';
import type { KubernetesObject } from '@kubernetes/client-node';
import { abortReason, apiException, transport } from './kube-http.ts';
import { LineSplitter } from './lines.ts';

export interface WatchEvent<T = KubernetesObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** A live watch stream. `done` resolves when the server ends it cleanly, rejects on any error. */
export interface WatchStream {
  readonly done: Promise<void>;
  /** Ends the stream; `done` rejects with `reason`. */
  abort(reason: Error): void;
}

/** What {@link openWatchStream} opens: the watch's URL (with `watch=true`), how, and who hears it. */
export interface WatchRequest {
  url: URL;
  requestOptions: https.RequestOptions;
  onEvent: (event: WatchEvent) => void;
  /** Aborts the watch at any stage, including while it is being opened. */
  signal?: AbortSignal;
  /** Called with the response status (or `<error>`) once known (the REST client metrics). */
  observe?: (status: string) => void;
}

/**
 * Sends a watch request and resolves once the response headers arrived with 200; rejects with
 * `ApiException` otherwise (e.g. 410 when the resourceVersion is too old). Events are delivered
 * in order, one JSON document per line; the stream's `done` settles when it ends (rejects on any
 * error, or with the reason it was aborted for).
 */
export function openWatchStream({
  url,
  requestOptions,
  onEvent,
  signal,
  observe,
}: WatchRequest): Promise<WatchStream> {
  return new Promise<WatchStream>((resolveOpen, rejectOpen) => {
    let settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
    let finished = false;
    const done = new Promise<void>((resolve, reject) => {
      settle = { resolve, reject };
    });
    // The stream may fail before anyone awaits `done`; the owner always awaits it eventually.
    done.catch(() => {});
    const finish = (err?: Error) => {
      if (finished) return;
      finished = true;
      if (err) settle!.reject(err);
      else settle!.resolve();
    };
    const req = transport(url).request(url, requestOptions, (res) => {
      const status = res.statusCode ?? 0;
      observe?.(String(status));
      if (status !== 200) {
        rejectWithAnswer(res, status, rejectOpen);
        return;
      }
      resolveOpen({
        done,
        abort: (reason) => {
          finish(reason);
          req.destroy();
        },
      });
      const lines = new LineSplitter((line) => {
        if (line === '' || finished) return;
        try {
          onEvent(JSON.parse(line) as WatchEvent);
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)));
          req.destroy();
        }
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (!finished) lines.push(chunk);
      });
      res.on('error', (err) => finish(err));
      res.on('aborted', () => finish(new Error('watch stream aborted by the peer')));
      res.on('end', () => {
        // A last event without a trailing newline still counts.
        if (!finished) lines.end();
        finish();
      });
      res.on('close', () => finish(res.complete ? undefined : new Error('watch connection closed')));
    });
    req.on('error', (err) => {
      observe?.('<error>');
      finish(err);
      rejectOpen(err);
    });
    if (signal) {
      const onAbort = () => {
        const reason = abortReason(signal);
        finish(reason);
        rejectOpen(reason);
        req.destroy();
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      done.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => {});
    }
    req.end();
  });
}

/** Reads a refused watch's answer and rejects with it as an ApiException. */
function rejectWithAnswer(res: http.IncomingMessage, status: number, reject: (err: Error) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.on('end', () => reject(apiException(status, Buffer.concat(chunks).toString('utf8'), res.headers)));
  res.on('error', reject);
}
