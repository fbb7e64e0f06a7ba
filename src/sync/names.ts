import { createHash } from 'node:crypto';
import { emptyRecord } from '../runtime/json.ts';

/**
 * Name and label-key translation between a virtual cluster and its host namespace.
 * Byte-for-byte the algorithms of the reference syncer (`pkg/util/translate`), with our prefix.
 */

export const PREFIX = 'vcluster.platform';
export const LABEL_MANAGED_BY = `${PREFIX}/managed-by`;
export const LABEL_NAMESPACE = `${PREFIX}/namespace`;
export const LABEL_CONTROLLED_BY = `${PREFIX}/controlled-by`;
export const ANNOTATION_OBJECT_NAME = `${PREFIX}/object-name`;
export const ANNOTATION_OBJECT_NAMESPACE = `${PREFIX}/object-namespace`;
export const ANNOTATION_OBJECT_UID = `${PREFIX}/object-uid`;
export const ANNOTATION_OBJECT_KIND = `${PREFIX}/object-kind`;
export const ANNOTATION_OBJECT_HOST_NAME = `${PREFIX}/object-host-name`;
export const ANNOTATION_OBJECT_HOST_NAMESPACE = `${PREFIX}/object-host-namespace`;
export const ANNOTATION_MANAGED_ANNOTATIONS = `${PREFIX}/managed-annotations`;
export const ANNOTATION_MANAGED_LABELS = `${PREFIX}/managed-labels`;
export const ANNOTATION_SKIP_BACKSYNC = `${PREFIX}/skip-backsync`;

/** Label keys that are rewritten on the host (single-namespace mode). */
export const LABELS_TO_TRANSLATE: readonly string[] = [
  'release',
  LABEL_NAMESPACE,
  LABEL_MANAGED_BY,
  LABEL_CONTROLLED_BY,
];

const MAX_NAME_LENGTH = 63;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Joins parts with `-`. Longer than 63 characters, the result is the first 52 characters, `-` and
 * the first 10 hex digits of the SHA-256 of the full joined string, with `.-` collapsed to `-`.
 */
export function safeConcatName(...parts: string[]): string {
  const joined = parts.join('-');
  if (joined.length <= MAX_NAME_LENGTH) return joined;
  return `${joined.slice(0, 52)}-${sha256Hex(joined).slice(0, 10)}`.replaceAll('.-', '-');
}

/** Big-endian base-36 (`0-9a-z`) of the bytes, one `0` per leading zero byte. */
export function base36Encode(bytes: Uint8Array): string {
  let leadingZeros = 0;
  while (leadingZeros < bytes.length && bytes[leadingZeros] === 0) leadingZeros++;
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  const digits = value === 0n ? '' : value.toString(36);
  return '0'.repeat(leadingZeros) + digits;
}

/** `name-x-namespace-x-vcluster`, shortened by {@link safeConcatName}. */
export function hostNameLong(name: string, namespace: string, vclusterName: string): string {
  if (name === '') return '';
  return safeConcatName(name, 'x', namespace, 'x', vclusterName);
}

/** `v` + the first 13 base-36 digits of SHA-256(`name-x-namespace-x-vcluster`): 14 characters. */
export function hostNameShort(name: string, namespace: string, vclusterName: string): string {
  if (name === '') return '';
  const digest = createHash('sha256').update([name, 'x', namespace, 'x', vclusterName].join('-')).digest();
  return `v${base36Encode(digest).slice(0, 13)}`;
}

/** Host key for a label key; only {@link LABELS_TO_TRANSLATE} are rewritten. */
export function hostLabelKey(key: string, vclusterName: string): string {
  if (!LABELS_TO_TRANSLATE.includes(key)) return key;
  return translatedKeys(vclusterName).toHost.get(key)!;
}

interface TranslatedKeys {
  toHost: ReadonlyMap<string, string>;
  toVirtual: ReadonlyMap<string, string>;
}
const translatedKeysByVcluster = new Map<string, TranslatedKeys>();

/** The host keys of {@link LABELS_TO_TRANSLATE} for a virtual cluster (hashed once, not per label). */
function translatedKeys(vclusterName: string): TranslatedKeys {
  let keys = translatedKeysByVcluster.get(vclusterName);
  if (keys === undefined) {
    const toHost = new Map(
      LABELS_TO_TRANSLATE.map((key) => [
        key,
        safeConcatName(`${PREFIX}/label`, vclusterName, 'x', sha256Hex(key).slice(0, 10)),
      ]),
    );
    keys = { toHost, toVirtual: new Map([...toHost].map(([k, v]) => [v, k])) };
    if (translatedKeysByVcluster.size > 1000) translatedKeysByVcluster.clear();
    translatedKeysByVcluster.set(vclusterName, keys);
  }
  return keys;
}

/** Key of a namespace label copied onto host objects. */
export function hostNamespaceLabelKey(key: string, vclusterName: string): string {
  return safeConcatName(`${PREFIX}/ns-label`, vclusterName, 'x', sha256Hex(key).slice(0, 10));
}

/**
 * Virtual key for a host label key: a raw translated key is dropped (null), a translated form maps
 * back to its original key, anything else is unchanged.
 */
export function virtualLabelKey(hostKey: string, vclusterName: string): string | null {
  if (LABELS_TO_TRANSLATE.includes(hostKey)) return null;
  return translatedKeys(vclusterName).toVirtual.get(hostKey) ?? hostKey;
}

function isTranslatedHostLabelKey(key: string, vclusterName: string): boolean {
  return translatedKeys(vclusterName).toVirtual.has(key);
}

/** A label or annotation map; built with `emptyRecord` (keys such as `constructor` are data). */
export type Labels = Record<string, string>;

/**
 * Host labels for virtual labels (`HostLabelsMap`). Virtual keys that already look translated are
 * dropped; the marker labels are added for object metadata, or when the existing host labels carry
 * them; `controlled-by` is kept from the existing host labels.
 */
export function hostLabels(
  virtualLabels: Labels | null | undefined,
  existingHostLabels: Labels | null | undefined,
  virtualNamespace: string,
  isMetadata: boolean,
  vclusterName: string,
): Labels | undefined {
  if (virtualLabels == null) return undefined;
  const result = emptyRecord<string>();
  for (const [key, value] of Object.entries(virtualLabels)) {
    if (isTranslatedHostLabelKey(key, vclusterName)) continue;
    result[hostLabelKey(key, vclusterName)] = value;
  }
  if (isMetadata || existingHostLabels == null || (existingHostLabels[LABEL_MANAGED_BY] ?? '') !== '') {
    result[LABEL_MANAGED_BY] = vclusterName;
    result[LABEL_NAMESPACE] = virtualNamespace;
  }
  const controlledBy = existingHostLabels?.[LABEL_CONTROLLED_BY];
  if (controlledBy) result[LABEL_CONTROLLED_BY] = controlledBy;
  return result;
}

/** Virtual labels for host labels (`VirtualLabelsMap`): markers and namespace labels excluded. */
export function virtualLabels(
  hostLabelsMap: Labels | null | undefined,
  vclusterName: string,
): Labels | undefined {
  if (hostLabelsMap == null) return undefined;
  const result = emptyRecord<string>();
  for (const [key, value] of Object.entries(hostLabelsMap)) {
    if (key === LABEL_MANAGED_BY || key === LABEL_NAMESPACE || key === LABEL_CONTROLLED_BY) continue;
    if (key.startsWith(`${PREFIX}/ns-label`)) continue;
    const virtualKey = virtualLabelKey(key, vclusterName);
    if (virtualKey !== null) result[virtualKey] = value;
  }
  return result;
}

export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}
export interface LabelSelector {
  matchLabels?: Labels;
  matchExpressions?: LabelSelectorRequirement[];
}

/** Translates `matchLabels` keys and `matchExpressions[].key`, without marker labels. */
export function hostLabelSelector(selector: LabelSelector, vclusterName: string): LabelSelector {
  const result: LabelSelector = { ...selector };
  if (selector.matchLabels) {
    result.matchLabels = Object.fromEntries(
      Object.entries(selector.matchLabels).map(([k, v]) => [hostLabelKey(k, vclusterName), v]),
    );
  }
  if (selector.matchExpressions) {
    result.matchExpressions = selector.matchExpressions.map((e) => ({
      ...e,
      key: hostLabelKey(e.key, vclusterName),
    }));
  }
  return result;
}

/** The inverse of {@link hostLabelSelector}. */
export function virtualLabelSelector(selector: LabelSelector, vclusterName: string): LabelSelector {
  const back = (k: string) => virtualLabelKey(k, vclusterName) ?? k;
  const result: LabelSelector = { ...selector };
  if (selector.matchLabels) {
    result.matchLabels = Object.fromEntries(
      Object.entries(selector.matchLabels).map(([k, v]) => [back(k), v]),
    );
  }
  if (selector.matchExpressions) {
    result.matchExpressions = selector.matchExpressions.map((e) => ({ ...e, key: back(e.key) }));
  }
  return result;
}

/** A Service selector on the host: translated keys plus the marker labels. */
export function hostServiceSelector(
  selector: Labels,
  virtualNamespace: string,
  vclusterName: string,
): Labels {
  return hostLabels(selector, null, virtualNamespace, false, vclusterName) ?? emptyRecord();
}

/** The inverse of {@link hostServiceSelector}: marker labels removed, keys translated back. */
export function virtualServiceSelector(selector: Labels, vclusterName: string): Labels {
  return virtualLabels(selector, vclusterName) ?? emptyRecord();
}
