import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  ControllerOwnerUidIndex,
  commonIndexers,
  computeReplaceDelta,
  LabelIndex,
  NamespaceIndex,
  OwnerUidIndex,
  Store,
} from './store.ts';

function cm(
  namespace: string,
  name: string,
  extra: Partial<NonNullable<KubernetesObject['metadata']>> = {},
): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { namespace, name, uid: `uid-${namespace}-${name}`, resourceVersion: '1', ...extra },
  };
}

const owner = (uid: string, controller = false) => ({
  apiVersion: 'v1',
  kind: 'Thing',
  name: uid,
  uid,
  controller,
});

describe('Store', () => {
  it('gets by ns/name key, lists, and deletes', () => {
    const store = new Store();
    store.upsert(cm('a', 'x'));
    store.upsert(cm('b', 'x'));
    expect(store.get('a/x')?.metadata?.namespace).toBe('a');
    expect(store.getByName('b', 'x')).toBeDefined();
    expect(store.list()).toHaveLength(2);
    store.delete('a/x');
    expect(store.get('a/x')).toBeUndefined();
    expect(store.keys()).toEqual(['b/x']);
  });

  it('keeps no index unless asked for one', () => {
    const store = new Store();
    store.upsert(cm('a', 'x', { labels: { app: 'web' }, ownerReferences: [owner('o1', true)] }));
    for (const name of [NamespaceIndex, OwnerUidIndex, ControllerOwnerUidIndex, LabelIndex])
      expect(() => store.byIndex(name, 'a')).toThrow(`no indexer named ${name}`);
  });

  it('indexes by namespace, owner uid, controller owner uid and label, and re-indexes on update', () => {
    const store = new Store(commonIndexers);
    store.upsert(cm('a', 'x', { labels: { app: 'web' }, ownerReferences: [owner('o1', true), owner('o2')] }));
    store.upsert(cm('a', 'y', { labels: { app: 'db' }, ownerReferences: [owner('o2', true)] }));
    store.upsert(cm('b', 'z'));
    const names = (objs: readonly KubernetesObject[]) => objs.map((o) => o.metadata?.name).sort();
    expect(names(store.byIndex(NamespaceIndex, 'a'))).toEqual(['x', 'y']);
    expect(names(store.byIndex(OwnerUidIndex, 'o2'))).toEqual(['x', 'y']);
    expect(names(store.byIndex(ControllerOwnerUidIndex, 'o2'))).toEqual(['y']);
    expect(names(store.byIndex(LabelIndex, 'app=web'))).toEqual(['x']);

    store.upsert(cm('a', 'x', { labels: { app: 'db' } }));
    expect(store.byIndex(LabelIndex, 'app=web')).toEqual([]);
    expect(names(store.byIndex(LabelIndex, 'app=db'))).toEqual(['x', 'y']);
    expect(names(store.byIndex(OwnerUidIndex, 'o2'))).toEqual(['y']);
    expect(store.indexValues(LabelIndex)).toEqual(['app=db']);
    store.delete('a/y');
    expect(store.byIndex(ControllerOwnerUidIndex, 'o2')).toEqual([]);
  });

  it('custom indexers cover existing objects and reject duplicate names', () => {
    const store = new Store();
    store.upsert(cm('a', 'x', { annotations: { team: 't1' } }));
    store.addIndexer('team', (obj) =>
      obj.metadata?.annotations?.team ? [obj.metadata.annotations.team] : [],
    );
    expect(store.byIndex('team', 't1')).toHaveLength(1);
    expect(() => store.addIndexer('team', () => [])).toThrow();
    expect(() => store.byIndex('nope', 'x')).toThrow();
  });

  it('a second consumer asking for the same index function under the same name shares it', () => {
    const store = new Store();
    store.upsert(cm('a', 'x', { labels: { app: 'web' } }));
    store.addIndexer(LabelIndex, commonIndexers[LabelIndex]!);
    store.addIndexer(LabelIndex, commonIndexers[LabelIndex]!);
    expect(store.byIndex(LabelIndex, 'app=web').map((o) => o.metadata?.name)).toEqual(['x']);
    expect(() => store.addIndexer(LabelIndex, (obj) => Object.keys(obj.metadata?.labels ?? {}))).toThrow(
      'indexer label already exists',
    );
  });
});

describe('computeReplaceDelta', () => {
  it('emits adds, updates for changed resourceVersions, and final-state-unknown deletes', () => {
    const current = new Map<string, KubernetesObject>([
      ['ns/same', cm('ns', 'same')],
      ['ns/changed', cm('ns', 'changed')],
      ['ns/gone', cm('ns', 'gone')],
    ]);
    const listed = [cm('ns', 'same'), cm('ns', 'changed', { resourceVersion: '7' }), cm('ns', 'new')];
    const delta = computeReplaceDelta(current, listed);
    expect(delta.added.map((o) => o.metadata?.name)).toEqual(['new']);
    expect(
      delta.updated.map((u) => [
        u.oldObject.metadata?.resourceVersion,
        u.newObject.metadata?.resourceVersion,
      ]),
    ).toEqual([['1', '7']]);
    expect(delta.deleted).toEqual([{ object: cm('ns', 'gone'), finalStateUnknown: true }]);
  });

  it('treats a recreated object (new uid, same name) as delete plus add', () => {
    const current = new Map([['ns/x', cm('ns', 'x')]]);
    const delta = computeReplaceDelta(current, [cm('ns', 'x', { uid: 'other', resourceVersion: '9' })]);
    expect(delta.deleted.map((d) => d.object.metadata?.uid)).toEqual(['uid-ns-x']);
    expect(delta.added.map((o) => o.metadata?.uid)).toEqual(['other']);
    expect(delta.updated).toEqual([]);
  });

  it('Store.replace leaves the store equal to the list', () => {
    const store = new Store(commonIndexers);
    store.upsert(cm('ns', 'a'));
    store.upsert(cm('ns', 'b', { labels: { l: 'v' } }));
    store.replace([cm('ns', 'b', { resourceVersion: '2' }), cm('ns', 'c')]);
    expect(store.keys().sort()).toEqual(['ns/b', 'ns/c']);
    expect(store.get('ns/b')?.metadata?.resourceVersion).toBe('2');
    expect(store.byIndex(LabelIndex, 'l=v')).toEqual([]);
  });
});

describe('Store: our own writes until the cache catches up', () => {
  it('returns the written object while the cache still holds the version it replaced', () => {
    const store = new Store();
    store.upsert(cm('ns', 'a', { resourceVersion: '1' }));
    store.recordWrite(cm('ns', 'a', { resourceVersion: '5', labels: { written: 'yes' } }), '1');
    expect(store.fresh('ns/a')?.metadata?.resourceVersion).toBe('5');
    // An event older than the write changes nothing the write replaced: the cache moved on.
    store.upsert(cm('ns', 'a', { resourceVersion: '5', labels: { written: 'yes' } }));
    expect(store.fresh('ns/a')?.metadata?.labels).toEqual({ written: 'yes' });
  });

  it('a create the cache has not seen yet; forgotten once the cache has any other version', () => {
    const store = new Store();
    store.recordWrite(cm('ns', 'b', { resourceVersion: '7' }), undefined);
    expect(store.fresh('ns/b')?.metadata?.resourceVersion).toBe('7');
    expect(store.get('ns/b')).toBeUndefined();
    // Someone changed it after our write: the cache is the truth from now on.
    store.upsert(cm('ns', 'b', { resourceVersion: '9' }));
    expect(store.fresh('ns/b')?.metadata?.resourceVersion).toBe('9');
    store.delete('ns/b');
    expect(store.fresh('ns/b')).toBeUndefined();
  });

  it('a write over our own write (finalizer, then status) counts from what the cache holds', () => {
    const store = new Store();
    store.upsert(cm('ns', 'c', { resourceVersion: '1' }));
    store.recordWrite(cm('ns', 'c', { resourceVersion: '2' }), '1');
    store.recordWrite(cm('ns', 'c', { resourceVersion: '3' }), '2');
    expect(store.fresh('ns/c')?.metadata?.resourceVersion).toBe('3');
  });

  it('the watch bringing the first of a chain of our writes (the finalizer) does not hide the last (the status)', () => {
    const store = new Store();
    store.upsert(cm('ns', 'e', { resourceVersion: '1' }));
    store.recordWrite(cm('ns', 'e', { resourceVersion: '2' }), '1');
    store.recordWrite(cm('ns', 'e', { resourceVersion: '3', labels: { status: 'written' } }), '2');
    store.upsert(cm('ns', 'e', { resourceVersion: '2' }));
    expect(store.fresh('ns/e')?.metadata?.resourceVersion).toBe('3');
    // The last one came back: the cache is the truth again.
    store.upsert(cm('ns', 'e', { resourceVersion: '3', labels: { status: 'written' } }));
    expect(store.fresh('ns/e')?.metadata?.resourceVersion).toBe('3');
    store.upsert(cm('ns', 'e', { resourceVersion: '4' }));
    expect(store.fresh('ns/e')?.metadata?.resourceVersion).toBe('4');
    // Someone else's version in between forgets the chain too.
    store.recordWrite(cm('ns', 'e', { resourceVersion: '5' }), '4');
    store.recordWrite(cm('ns', 'e', { resourceVersion: '6' }), '5');
    store.upsert(cm('ns', 'e', { resourceVersion: '7' }));
    expect(store.fresh('ns/e')?.metadata?.resourceVersion).toBe('7');
  });

  it('a write over a version the cache does not hold is not trusted: the cache wins', () => {
    const store = new Store();
    store.upsert(cm('ns', 'd', { resourceVersion: '1' }));
    store.recordWrite(cm('ns', 'd', { resourceVersion: '4' }), '2');
    expect(store.fresh('ns/d')?.metadata?.resourceVersion).toBe('1');
  });
});
