import { PatchStrategy } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type Clock, formatMicroTime } from './clock.ts';
import { isNotFound } from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import { collectionPath, objectPath, type ResourceRef } from './kube-client.ts';

export const eventResource: ResourceRef = {
  group: 'events.k8s.io',
  version: 'v1',
  plural: 'events',
  namespaced: true,
};

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventInput {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase; for errors, the error's class name (see `errorReason`). */
  reason: string;
  /** What was done or failed, UpperCamelCase (e.g. `Reconcile`, `ApplyChildren`). */
  action: string;
  /** Human-readable; truncated to the 1 KiB the apiserver allows. */
  note: string;
  related?: ObjectReference;
}

export type DedupeDecision = { kind: 'create' } | { kind: 'repeat'; name: string; count: number };

/**
 * The pure part of Event deduplication: an event equal to one recorded earlier (same key: the
 * regarding object, type, reason, action and note) within `windowMs` of its last occurrence is a
 * repeat: it increments the series count of the existing Event instead of creating a new one.
 * The cache is bounded; the least recently used keys are forgotten first.
 */
export class EventDeduper {
  private readonly entries = new Map<string, { name: string; count: number; lastObservedAt: number }>();

  constructor(
    private readonly windowMs = 6 * 60_000,
    private readonly maxEntries = 4096,
  ) {}

  /** Decides for an occurrence at `now`; a repeat is counted at once. */
  observe(key: string, now: number): DedupeDecision {
    const entry = this.entries.get(key);
    if (!entry || now - entry.lastObservedAt > this.windowMs) return { kind: 'create' };
    entry.count++;
    entry.lastObservedAt = now;
    this.touch(key, entry);
    return { kind: 'repeat', name: entry.name, count: entry.count };
  }

  /** Records that an Event named `name` was created for `key` at `now` (count 1). */
  created(key: string, name: string, now: number): void {
    this.touch(key, { name, count: 1, lastObservedAt: now });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  private touch(key: string, entry: { name: string; count: number; lastObservedAt: number }): void {
    this.entries.delete(key);
    this.entries.set(key, entry);
  }
}

export function eventKey(regarding: ObjectReference, input: EventInput): string {
  return JSON.stringify([
    regarding.apiVersion,
    regarding.kind,
    regarding.namespace,
    regarding.name,
    regarding.uid,
    input.type,
    input.reason,
    input.action,
    input.note,
  ]);
}

export interface EventRecorderOptions {
  api: KubeApi;
  clock: Clock;
  logger: Logger;
  /** The controller's name, e.g. `platform.io/cluster-controller` (events.k8s.io reportingController). */
  reportingController: string;
  /** This process, e.g. the pod name (reportingInstance). */
  reportingInstance: string;
  dedupeWindowMs?: number;
}

/**
 * Records events.k8s.io/v1 Events about objects, deduplicated into series. Recording is best
 * effort: failures are logged, never thrown, so an Event can never fail a reconcile.
 */
export class EventRecorder {
  private readonly deduper: EventDeduper;
  /** Per-key chains so a repeat never races the creation of the Event it increments. */
  private readonly inFlight = new Map<string, Promise<void>>();
  private sequence = 0;

  constructor(private readonly options: EventRecorderOptions) {
    this.deduper = new EventDeduper(options.dedupeWindowMs);
  }

  /** A recorder with the same settings that writes through `api` (e.g. another write fence). */
  through(api: KubeApi): EventRecorder {
    return new EventRecorder({ ...this.options, api });
  }

  record(regarding: ObjectReference, input: EventInput): Promise<void> {
    const key = eventKey(regarding, input);
    const previous = this.inFlight.get(key) ?? Promise.resolve();
    const next = previous.then(() => this.recordNow(key, regarding, input));
    this.inFlight.set(key, next);
    void next.finally(() => {
      if (this.inFlight.get(key) === next) this.inFlight.delete(key);
    });
    return next;
  }

  private async recordNow(key: string, regarding: ObjectReference, input: EventInput): Promise<void> {
    const { api, clock, logger } = this.options;
    const now = clock.now();
    const namespace = regarding.namespace || 'default';
    try {
      const decision = this.deduper.observe(key, now);
      if (decision.kind === 'repeat') {
        try {
          await api.request({
            method: 'PATCH',
            path: objectPath(eventResource, namespace, decision.name),
            body: { series: { count: decision.count, lastObservedTime: formatMicroTime(now) } },
            contentType: PatchStrategy.MergePatch,
          });
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // The Event expired (TTL) or was deleted: start a new one.
          this.deduper.forget(key);
        }
      }
      const name = `${regarding.name ?? 'unknown'}.${(BigInt(now) * 1_000_000n + BigInt(this.sequence++ % 1_000_000)).toString(16)}`;
      await api.request({
        method: 'POST',
        path: collectionPath(eventResource, namespace),
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name, namespace },
          eventTime: formatMicroTime(now),
          reportingController: this.options.reportingController,
          reportingInstance: this.options.reportingInstance,
          action: input.action,
          reason: input.reason,
          note: truncate(input.note, 1024),
          type: input.type,
          regarding,
          ...(input.related ? { related: input.related } : {}),
        },
      });
      this.deduper.created(key, name, now);
    } catch (err) {
      logger.warn({ err, reason: input.reason, regarding }, 'failed to record event');
    }
  }
}

function truncate(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  let end = Math.min(text.length, maxBytes);
  while (Buffer.byteLength(text.slice(0, end)) > maxBytes - 3) end--;
  return `${text.slice(0, end)}...`;
}
