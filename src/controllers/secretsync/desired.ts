import type { V1Secret } from '@kubernetes/client-node';
import {
  DISABLE_SYNC_ANNOTATION,
  KEYS_ANNOTATION,
  SOURCE_NAME_LABEL,
  SOURCE_NAMESPACE_LABEL,
} from '../../api/labels.ts';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import { emptyRecord, ownValue } from '../../runtime/json.ts';
import { LABEL_MANAGED_BY } from '../../sync/names.ts';

export interface SyncSource {
  namespace: string;
  name: string;
}

/**
 * The SharedSecret a Secret asks to be filled from, or undefined when it is not a sync target.
 * A virtual cluster's host copy (labelled managed-by a virtual cluster) is never one, whatever
 * labels it carries: its data is its syncer's, copied from the virtual cluster, and two writers of
 * one field would undo each other's writes forever.
 */
export function syncSourceOf(secret: V1Secret): SyncSource | undefined {
  const labels = secret.metadata?.labels ?? {};
  const name = labels[SOURCE_NAME_LABEL];
  const namespace = labels[SOURCE_NAMESPACE_LABEL];
  if (!name || !namespace) return undefined;
  if (Object.hasOwn(labels, LABEL_MANAGED_BY)) return undefined;
  if (secret.metadata?.annotations?.[DISABLE_SYNC_ANNOTATION] === 'true') return undefined;
  return { namespace, name };
}

/** The keys the Secret's annotation selects; undefined means all. */
export function selectedKeys(secret: V1Secret): string[] | undefined {
  const raw = secret.metadata?.annotations?.[KEYS_ANNOTATION];
  if (raw === undefined) return undefined;
  return [
    ...new Set(
      raw
        .split(',')
        .map((k) => k.trim())
        .filter(Boolean),
    ),
  ].sort();
}

export interface DesiredSecretData {
  /** Base64 values as in `Secret.data` (SharedSecret data is base64 already). */
  data: Record<string, string>;
  /** Selected keys the SharedSecret does not have. */
  missingKeys: string[];
}

/** What the Secret's `data` should be, copied from the SharedSecret, restricted to the selected keys. */
export function desiredSecretData(target: V1Secret, source: SharedSecret): DesiredSecretData {
  const sourceData = source.spec.data ?? {};
  const keys = selectedKeys(target) ?? Object.keys(sourceData).sort();
  // Keys are data: a selected `constructor` or `__proto__` is the SharedSecret's own key or missing.
  const data = emptyRecord<string>();
  const missingKeys: string[] = [];
  for (const key of keys) {
    const value = ownValue(sourceData, key);
    if (value === undefined) missingKeys.push(key);
    else data[key] = value;
  }
  return { data, missingKeys };
}
