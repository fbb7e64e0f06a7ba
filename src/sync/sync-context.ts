import type { SyncConfig } from './config.ts';
import type { Labels } from './names.ts';
import { emptyRecord, isJsonObject, type Json, type JsonObject } from './patches/merge-patch.ts';

/**
 * What every translation works on: the virtual cluster's context, objects as plain JSON, and the
 * readers of their fields that tolerate any shape.
 */

/** What every translation needs to know about the virtual cluster. */
export interface SyncContext {
  vclusterName: string;
  /** The namespace the virtual cluster runs in on the host. */
  hostNamespace: string;
  config: SyncConfig;
}

/** A Kubernetes object as plain JSON. */
export type KubeObject = JsonObject & { metadata?: JsonObject };

export interface ObjectRef {
  name: string;
  namespace: string;
}

/** The object's `metadata`, or an empty object when it has none. */
export function metadataOf(obj: KubeObject): JsonObject {
  return isJsonObject(obj.metadata) ? obj.metadata : {};
}
/**
 * The string values of a label or annotation map, in a map without prototype: a key named like an
 * `Object.prototype` member (`constructor`, `toString`) reads and writes as any other key.
 */
export function stringMapOf(v: Json | undefined): Labels | null {
  if (!isJsonObject(v)) return null;
  const out = emptyRecord<string>();
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}
/** The value when it is a string, else the empty string. */
export function stringOf(v: Json | undefined): string {
  return typeof v === 'string' ? v : '';
}
