import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { translateToHost } from '../translate.ts';
import {
  hasSelector,
  hostIneligibility,
  isOlder,
  type PlanInput,
  planSync,
  syncedFields,
  virtualKeyOfHost,
  virtualOwnedFields,
  virtualWritableView,
  writableView,
} from './plan.ts';

const ctx: SyncContext = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig({}) };

const endpoints = (name = 'db', uid = 'u-1'): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Endpoints',
  metadata: { name, namespace: 'default', uid, resourceVersion: '5' },
  subsets: [{ addresses: [{ ip: '10.0.0.1' }], ports: [{ port: 5432 }] }],
});
const service = (selector?: Record<string, string>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'db', namespace: 'default', uid: 's-1' },
  spec: { ports: [{ port: 5432 }], ...(selector ? { selector } : {}) },
});
const hostOf = (virtual: KubeObject) => translateToHost('Endpoints', virtual, null, ctx);

const base = (over: Partial<PlanInput> = {}): PlanInput => ({
  kind: 'Endpoints',
  key: 'default/db',
  virtual: endpoints(),
  host: null,
  service: service(),
  wanted: true,
  hostSyncedBefore: false,
  ...over,
});

describe('planSync (the reference decision table)', () => {
  it('creates Endpoints of a selector-less Service', () => {
    expect(planSync(base())).toEqual({ action: 'create' });
  });

  it('never syncs default/kubernetes, whatever exists', () => {
    for (const kind of ['Endpoints', 'Service'] as const) {
      expect(planSync(base({ kind, key: 'default/kubernetes' })).action).toBe('skip');
      expect(planSync(base({ kind, key: 'default/kubernetes', host: hostOf(endpoints()) })).action).toBe(
        'skip',
      );
    }
    expect(planSync(base({ kind: 'Secret', key: 'default/kubernetes' })).action).toBe('create');
  });

  it('skips Endpoints without a Service or whose Service has a selector; deletes their host copy', () => {
    expect(planSync(base({ service: null }))).toMatchObject({ action: 'skip' });
    expect(planSync(base({ service: service({ app: 'db' }) }))).toMatchObject({ action: 'skip' });
    const host = hostOf(endpoints());
    expect(planSync(base({ service: service({ app: 'db' }), host }))).toMatchObject({
      action: 'deleteHost',
      reason: 'the virtual Service has a selector',
    });
    expect(planSync(base({ service: null, host }))).toMatchObject({ action: 'deleteHost' });
    // An empty selector is no selector (the apiserver drops `selector: {}` anyway).
    expect(planSync(base({ service: service({}) }))).toEqual({ action: 'create' });
  });

  it('a Service being deleted counts as gone', () => {
    const dying = service();
    dying.metadata = { ...dying.metadata, deletionTimestamp: '2025-01-01T00:00:00Z' };
    expect(planSync(base({ service: dying })).action).toBe('skip');
  });

  it('virtual gone: the host copy is deleted, unless it asks for skip-backsync', () => {
    const host = hostOf(endpoints());
    expect(planSync(base({ virtual: null, host }))).toMatchObject({ action: 'deleteHost' });
    const dying = endpoints();
    dying.metadata = { ...dying.metadata, deletionTimestamp: '2025-01-01T00:00:00Z' };
    expect(planSync(base({ virtual: dying, host }))).toMatchObject({ action: 'deleteHost' });
    const skip = structuredClone(host) as { metadata: { annotations: Record<string, string> } };
    skip.metadata.annotations['vcluster.platform/skip-backsync'] = 'true';
    expect(planSync(base({ virtual: null, host: skip as KubeObject }))).toMatchObject({ action: 'skip' });
    expect(planSync(base({ virtual: null, host: null }))).toMatchObject({ action: 'skip' });
  });

  it('host gone after we synced it: the virtual object goes too; never synced: create', () => {
    expect(planSync(base({ hostSyncedBefore: true }))).toMatchObject({ action: 'deleteVirtual' });
    expect(planSync(base({ hostSyncedBefore: false }))).toEqual({ action: 'create' });
  });

  it('a host object of an earlier virtual object (other uid) is deleted to be recreated', () => {
    const host = hostOf(endpoints('db', 'old-uid'));
    expect(planSync(base({ host }))).toMatchObject({ action: 'deleteHost' });
    expect(planSync(base({ host: hostOf(endpoints()) }))).toEqual({ action: 'update' });
    // An empty uid annotation (the reference allows it) never triggers a recreation.
    const noUid = structuredClone(host) as { metadata: { annotations: Record<string, string> } };
    noUid.metadata.annotations['vcluster.platform/object-uid'] = '';
    expect(planSync(base({ host: noUid as KubeObject }))).toEqual({ action: 'update' });
  });

  it('objects controlled by another controller are left alone on both sides', () => {
    const host = hostOf(endpoints()) as { metadata: { labels: Record<string, string> } };
    host.metadata.labels['vcluster.platform/controlled-by'] = 'other';
    expect(planSync(base({ virtual: null, host: host as KubeObject }))).toMatchObject({ action: 'skip' });
    const virtual = endpoints();
    virtual.metadata = { ...virtual.metadata, annotations: { 'vcluster.platform/controlled-by': 'x' } };
    expect(planSync(base({ virtual }))).toMatchObject({ action: 'skip' });
  });

  it('Secrets and ConfigMaps that nothing wants are not synced; their host copies are removed', () => {
    const secret: KubeObject = { metadata: { name: 's', namespace: 'default', uid: 'x' }, data: {} };
    const input = { kind: 'Secret' as const, key: 'default/s', virtual: secret, service: undefined };
    expect(planSync(base({ ...input, wanted: false }))).toMatchObject({ action: 'skip' });
    const host = translateToHost('Secret', secret, null, ctx);
    expect(planSync(base({ ...input, wanted: false, host }))).toMatchObject({ action: 'deleteHost' });
    expect(planSync(base({ ...input, wanted: true }))).toEqual({ action: 'create' });
    const token = { ...secret, type: 'kubernetes.io/service-account-token' };
    expect(planSync(base({ ...input, virtual: token, wanted: true }))).toMatchObject({ action: 'skip' });
  });

  it('every input gets exactly one plan, and a missing virtual object never creates anything', () => {
    const host = hostOf(endpoints());
    fc.assert(
      fc.property(
        fc.record({
          virtual: fc.constantFrom(null, endpoints(), endpoints('db', 'other')),
          host: fc.constantFrom(null, host),
          service: fc.constantFrom(null, service(), service({ a: 'b' })),
          wanted: fc.boolean(),
          hostSyncedBefore: fc.boolean(),
        }),
        (over) => {
          const plan = planSync(base(over));
          if (over.virtual === null) expect(['skip', 'deleteHost']).toContain(plan.action);
          if (over.host === null) expect(plan.action).not.toBe('deleteHost');
          if (plan.action === 'deleteVirtual') expect(over.hostSyncedBefore && over.host === null).toBe(true);
        },
      ),
    );
  });
});

describe('helpers', () => {
  it('hasSelector', () => {
    expect(hasSelector(service({ a: 'b' }))).toBe(true);
    expect(hasSelector(service({}))).toBe(false);
    expect(hasSelector(service())).toBe(false);
  });

  it('isOlder compares integer resourceVersions only', () => {
    expect(isOlder('9', '10')).toBe(true);
    expect(isOlder('10', '10')).toBe(false);
    expect(isOlder('11', '10')).toBe(false);
    expect(isOlder('', '10')).toBe(false);
    expect(isOlder('abc', '10')).toBe(false);
    expect(isOlder('99999999999999999998', '99999999999999999999')).toBe(true);
  });

  it('virtualKeyOfHost reads the bookkeeping annotations', () => {
    expect(virtualKeyOfHost(hostOf(endpoints()))).toBe('default/db');
    expect(virtualKeyOfHost({ metadata: { name: 'x' } })).toBeNull();
  });

  it("synced fields are everything but identity, metadata and status; the virtual side owns all but a Service's bidirectional ones", () => {
    const svc: KubeObject = {
      ...service({ app: 'db' }),
      spec: { ports: [{ port: 80 }], type: 'ClusterIP', selector: { app: 'db' }, clusterIP: 'None' },
      status: { loadBalancer: {} },
    };
    expect(syncedFields(svc)).toEqual({ spec: svc.spec });
    expect(virtualOwnedFields('Service', svc)).toEqual({
      spec: { selector: { app: 'db' }, clusterIP: 'None' },
    });
    expect(virtualOwnedFields('Endpoints', endpoints())).toEqual({ subsets: endpoints().subsets });
    expect(writableView(svc)).toEqual({ spec: svc.spec, metadata: {} });
    expect(virtualWritableView('Service', svc)).toEqual({
      spec: { ports: [{ port: 80 }], type: 'ClusterIP' },
      metadata: {},
    });
    const labelled = { ...endpoints(), metadata: { name: 'db', labels: { app: 'db' } } };
    expect(virtualWritableView('Endpoints', labelled)).toEqual({ metadata: { labels: { app: 'db' } } });
  });
});

describe('hostIneligibility (checked on the virtual object, and again on the patched host object)', () => {
  it('a service-account token Secret may not be written to the host; anything else may', () => {
    const secret = (type: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      type,
      metadata: { name: 's' },
    });
    expect(hostIneligibility('Secret', secret('kubernetes.io/service-account-token'))).toBe(
      'service account tokens belong to their cluster',
    );
    expect(hostIneligibility('Secret', secret('Opaque'))).toBeNull();
    expect(
      hostIneligibility('ConfigMap', { ...secret('kubernetes.io/service-account-token'), kind: 'ConfigMap' }),
    ).toBeNull();
  });
});
