import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { PROTOTYPE_LABEL_KEYS, recordWithPrototypeKeys } from '../../../test-support/prototype-keys.ts';
import { loadSyncConfig } from '../config.ts';
import { PREFIX } from '../names.ts';
import { applyMergePatch, type Json, type JsonObject, mergePatchDiff } from '../patches/merge-patch.ts';
import { createSandbox, syncToHost } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { desiredPair, type SyncRecord } from './desired.ts';
import { virtualWritableView, writableView } from './plan.ts';

// What the syncer writes, as it writes it: the desired pair, then the merge patches of
// `kindSyncer.update` against each side, applied through JSON as the apiserver applies them.
// Keys named like Object.prototype members (`constructor`, `toString`, `__proto__`) are data
// keys like any other (issue 29): every generated map holds at least one.

const ctx: SyncContext = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig({}) };
const sandbox = createSandbox(ctx, { timeoutMs: 2000, objectTimeoutMs: 4000 });
afterAll(() => sandbox.dispose());

let rv = 100;
/** The object as the apiserver returns it after a write: through JSON, a fresh resourceVersion. */
function stored(obj: Json): KubeObject {
  const copy = JSON.parse(JSON.stringify(obj)) as KubeObject & { metadata: JsonObject };
  copy.metadata.resourceVersion = String(++rv);
  copy.metadata.uid ??= `uid-${rv}`;
  return copy;
}

/** A merge patch written to an apiserver: both sides through JSON. */
function patched(obj: KubeObject, patch: JsonObject): KubeObject {
  return stored(applyMergePatch(JSON.parse(JSON.stringify(obj)), JSON.parse(JSON.stringify(patch))));
}

/** The text of a map with its keys sorted, so two maps compare as documents. */
function text(map: Json | undefined): string {
  if (map === undefined || map === null || typeof map !== 'object' || Array.isArray(map)) return String(map);
  return JSON.stringify(Object.fromEntries(Object.entries(map).sort(([a], [b]) => (a < b ? -1 : 1))));
}

/** A label or annotation map without the syncer's own bookkeeping. */
function withoutBookkeeping(map: Json | undefined): JsonObject {
  if (map === undefined || map === null || typeof map !== 'object' || Array.isArray(map)) return {};
  return Object.fromEntries(Object.entries(map).filter(([key]) => !key.startsWith(`${PREFIX}/`)));
}

const dataValues = fc.constantFrom<string>('', 'MQ==', 'Mg==', 'value');
const data = recordWithPrototypeKeys(dataValues);
const labelValues = fc.constantFrom<string>('a', 'b', 'c');
const labels = recordWithPrototypeKeys(labelValues, {
  prototypeKeys: PROTOTYPE_LABEL_KEYS,
  otherKeys: fc.constantFrom('app', 'tier', 'example.com/team'),
});

function configMap(contents: { data: Json; labels: Json; annotations: Json }): KubeObject {
  return stored({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'cm',
      namespace: 'default',
      labels: contents.labels,
      annotations: contents.annotations,
    },
    data: contents.data,
  });
}

/** The record of a first sync: the host object as the syncer creates it. */
function created(virtual: KubeObject): SyncRecord {
  const { object } = syncToHost({
    kind: 'ConfigMap',
    source: virtual,
    previousSource: null,
    existingTarget: null,
    ctx,
    sandbox,
  });
  return { virtual, host: stored(object) };
}

/** One sync of an existing pair, written as the syncer writes it. */
function synced(virtual: KubeObject, host: KubeObject, record: SyncRecord) {
  const pair = desiredPair({ kind: 'ConfigMap', virtual, host, record, ctx, sandbox });
  const virtualPatch = mergePatchDiff(
    virtualWritableView('ConfigMap', virtual),
    virtualWritableView('ConfigMap', pair.virtual),
  );
  const hostPatch = mergePatchDiff(writableView(host), writableView(pair.host));
  return { virtual: patched(virtual, virtualPatch), host: patched(host, hostPatch) };
}

const meta = (obj: KubeObject) => obj.metadata as JsonObject;

/** The object as a client's update (PUT) leaves it: the given fields replaced whole. */
function replaced(obj: KubeObject, fields: { data?: Json; labels?: Json; annotations?: Json }): KubeObject {
  const { data, ...metadataFields } = fields;
  return stored({
    ...obj,
    ...(data !== undefined ? { data } : {}),
    metadata: { ...meta(obj), ...(metadataFields as JsonObject) },
  });
}

describe('the syncer with keys named like Object.prototype members', () => {
  // The cases of issue 29: a data key `constructor` deleted on the virtual side stays on the host.
  const issueExample = {
    before: { data: JSON.parse('{"constructor":"1","toString":"2","__proto__":"3","plain":"4"}') },
    after: { data: { a: '1' } },
  };

  it('data, labels and annotations added, changed and removed on the virtual side: the host follows exactly', () => {
    const contents = fc.record({ data, labels, annotations: labels });
    fc.assert(
      fc.property(contents, contents, (before, after) => {
        const virtualBefore = configMap(before);
        const record = created(virtualBefore);
        const virtualAfter = replaced(virtualBefore, after);
        const host = synced(virtualAfter, record.host, record).host;
        expect(text(host.data)).toBe(text(after.data));
        expect(text(withoutBookkeeping(meta(host).labels))).toBe(text(after.labels));
        expect(text(withoutBookkeeping(meta(host).annotations))).toBe(text(after.annotations));
      }),
      {
        examples: [
          [
            { ...issueExample.before, labels: { constructor: 'a' }, annotations: { toString: 'b' } },
            { ...issueExample.after, labels: {}, annotations: {} },
          ],
        ],
      },
    );
  });

  it('labels and annotations added, changed and removed on the host come back to the virtual object exactly', () => {
    const contents = fc.record({ labels, annotations: labels });
    fc.assert(
      fc.property(data, contents, contents, (virtualData, before, after) => {
        const virtual = configMap({ data: virtualData, ...before });
        const record = created(virtual);
        // A host-side edit keeps the syncer's bookkeeping and replaces the rest.
        const hostMeta = meta(record.host);
        const bookkeeping = (map: Json | undefined) =>
          Object.fromEntries(
            Object.entries((map ?? {}) as JsonObject).filter(([k]) => k.startsWith(`${PREFIX}/`)),
          );
        const hostAfter = replaced(record.host, {
          labels: { ...bookkeeping(hostMeta.labels), ...after.labels },
          annotations: { ...bookkeeping(hostMeta.annotations), ...after.annotations },
        });
        const result = synced(virtual, hostAfter, record);
        expect(text(meta(result.virtual).labels ?? {})).toBe(text(after.labels));
        expect(text(meta(result.virtual).annotations ?? {})).toBe(text(after.annotations));
        // Data is the virtual side's: it never flows back, whatever its keys.
        expect(text(result.virtual.data)).toBe(text(virtualData));
        expect(text(result.host.data)).toBe(text(virtualData));
      }),
      {
        examples: [
          [
            JSON.parse('{"constructor": "1", "__proto__": "2"}'),
            { labels: { constructor: 'a', app: 'b' }, annotations: { toString: 'c' } },
            { labels: { app: 'b' }, annotations: { valueOf: 'd' } },
          ],
        ],
      },
    );
  });

  it('a data key the virtual side removed is removed on the host (issue 29)', () => {
    const virtualBefore = configMap({ ...issueExample.before, labels: {}, annotations: {} });
    const record = created(virtualBefore);
    expect(Object.keys(record.host.data as JsonObject).sort()).toEqual([
      '__proto__',
      'constructor',
      'plain',
      'toString',
    ]);
    const virtualAfter = replaced(virtualBefore, { ...issueExample.after, labels: {}, annotations: {} });
    const host = synced(virtualAfter, record.host, record).host;
    expect(text(host.data)).toBe(text({ a: '1' }));
  });
});
