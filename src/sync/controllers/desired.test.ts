// biome-ignore-all lint/suspicious/noExplicitAny: the tests walk loosely typed JSON objects
import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { ExpressionTimeout } from '../patches/expression-failures.ts';
import { applyMergePatch, type Json } from '../patches/merge-patch.ts';
import { createSandbox, syncToHost } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import { type SyncedKind, translateToHost } from '../translate.ts';
import { desiredPair, type SyncRecord } from './desired.ts';

const ctx: SyncContext = {
  vclusterName: 'vc',
  hostNamespace: 'vc-ns',
  config: loadSyncConfig({
    sync: {
      toHost: {
        endpoints: {
          patches: [
            {
              path: 'metadata.annotations.tier',
              expression: '"host-" + value',
              reverseExpression: 'value.replace(/^host-/, "")',
            },
            { path: 'metadata.annotations.random', expression: 'String(Math.random())' },
            { path: 'metadata.annotations.hostile', expression: '(() => { for (;;) {} })()' },
          ],
        },
      },
    },
  }),
};
// Generous limits: only the hostile expression may time out, whatever the machine's load.
const sandbox = createSandbox(ctx, { timeoutMs: 500 });
afterAll(() => sandbox.dispose());

let rv = 100;
/** The object as the apiserver would return it after a write: a fresh resourceVersion. */
const stored = <T extends KubeObject>(obj: T): T => {
  const copy = structuredClone(obj) as any;
  copy.metadata.resourceVersion = String(++rv);
  copy.metadata.uid ??= `uid-${rv}`;
  return copy;
};
const edit = (obj: KubeObject, patch: Json): KubeObject => stored(applyMergePatch(obj, patch) as KubeObject);

const virtualEndpoints = (annotations: Record<string, string> = { tier: 'gold' }): KubeObject =>
  stored({
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: { name: 'db', namespace: 'default', uid: 'v-uid', labels: { app: 'db' }, annotations },
    subsets: [
      {
        addresses: [{ ip: '10.0.0.1', targetRef: { kind: 'Pod', name: 'db-0', namespace: 'default' } }],
        ports: [{ port: 5432 }],
      },
    ],
  });

/** Creates the host object as the syncer does and returns the record of that first sync. */
async function created(kind: SyncedKind, virtual: KubeObject): Promise<SyncRecord> {
  const { object } = await syncToHost({
    kind,
    source: virtual,
    previousSource: null,
    existingTarget: null,
    ctx,
    sandbox,
  });
  return { virtual, host: stored(object) };
}

describe('desiredPair', () => {
  it('a host annotation edit comes back through reverseExpression; the host keeps its form', async () => {
    const record = await created('Endpoints', virtualEndpoints());
    expect((record.host.metadata as any).annotations.tier).toBe('host-gold');
    const host = edit(record.host, { metadata: { annotations: { tier: 'host-silver' } } });
    const pair = await desiredPair({
      kind: 'Endpoints',
      virtual: record.virtual,
      host,
      record,
      ctx,
      sandbox,
    });
    expect(pair.backSynced).toBe(true);
    expect((pair.virtual.metadata as any).annotations.tier).toBe('silver');
    expect((pair.host.metadata as any).annotations.tier).toBe('host-silver');
    expect(pair.host.subsets).toEqual(host.subsets);
  });

  it('a virtual change goes to the host through expression', async () => {
    const record = await created('Endpoints', virtualEndpoints());
    const virtual = edit(record.virtual, {
      metadata: { annotations: { tier: 'bronze' } },
      subsets: [{ addresses: [{ ip: '10.0.0.9' }], ports: [{ port: 5432 }] }],
    });
    const pair = await desiredPair({ kind: 'Endpoints', virtual, host: record.host, record, ctx, sandbox });
    expect(pair.backSynced).toBe(false);
    expect((pair.host.metadata as any).annotations.tier).toBe('host-bronze');
    expect(pair.host.subsets).toEqual([{ addresses: [{ ip: '10.0.0.9' }], ports: [{ port: 5432 }] }]);
    expect(pair.virtual).toEqual(virtual);
  });

  it('host edits to subsets are reverted and never synced back', async () => {
    const record = await created('Endpoints', virtualEndpoints());
    const host = edit(record.host, {
      subsets: [{ addresses: [{ ip: '6.6.6.6' }], ports: [{ port: 1 }] }],
      metadata: { labels: { extra: 'h' } },
    });
    const pair = await desiredPair({
      kind: 'Endpoints',
      virtual: record.virtual,
      host,
      record,
      ctx,
      sandbox,
    });
    expect(pair.drifted).toBe(true);
    expect(pair.host.subsets).toEqual(record.host.subsets);
    expect(pair.virtual.subsets).toEqual(record.virtual.subsets);
    // The label the host added is a host change like any other: it comes back.
    expect((pair.virtual.metadata as any).labels).toEqual({ app: 'db', extra: 'h' });
  });

  it('nothing changed: expressions are not re-evaluated, so a non-deterministic one is stable', async () => {
    const record = await created('Endpoints', virtualEndpoints({ tier: 'gold', random: 'x' }));
    const pair = await desiredPair({
      kind: 'Endpoints',
      virtual: record.virtual,
      host: record.host,
      record,
      ctx,
      sandbox,
    });
    expect(pair.host).toEqual(record.host);
    expect(pair.virtual).toEqual(record.virtual);
  });

  it('after a restart (no record) the virtual side wins and patched fields stay patched', async () => {
    const record = await created('Endpoints', virtualEndpoints());
    const host = edit(record.host, {
      metadata: { annotations: { tier: 'host-gold' }, labels: { app: 'changed-on-host' } },
      subsets: [{ addresses: [{ ip: '6.6.6.6' }], ports: [{ port: 1 }] }],
    });
    const pair = await desiredPair({
      kind: 'Endpoints',
      virtual: record.virtual,
      host,
      record: null,
      ctx,
      sandbox,
    });
    expect(pair.virtual).toEqual(record.virtual);
    expect((pair.host.metadata as any).labels.app).toBe('db');
    expect((pair.host.metadata as any).annotations.tier).toBe('host-gold');
    expect(pair.host.subsets).toEqual(record.host.subsets);
  });

  it('a hostile expression fails the computation before anything could be written', async () => {
    const record = await created('Endpoints', virtualEndpoints());
    const virtual = edit(record.virtual, { metadata: { annotations: { hostile: 'yes' } } });
    expect(() =>
      desiredPair({ kind: 'Endpoints', virtual, host: record.host, record, ctx, sandbox }),
    ).toThrow(ExpressionTimeout);
  });

  it('Secrets: host data edits are reverted, not synced back; metadata flows both ways', async () => {
    const virtual = stored({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'default', annotations: { a: '1' } },
      type: 'Opaque',
      data: { password: 'aHVudGVyMg==' },
    });
    const record = await created('Secret', virtual);
    const host = edit(record.host, { data: { password: 'c3RvbGVu' }, metadata: { annotations: { a: '2' } } });
    const pair = await desiredPair({ kind: 'Secret', virtual, host, record, ctx, sandbox });
    expect(pair.virtual.data).toEqual({ password: 'aHVudGVyMg==' });
    expect((pair.virtual.metadata as any).annotations.a).toBe('2');
    expect(pair.host.data).toEqual({ password: 'aHVudGVyMg==' });
  });

  it('Services: the host status is copied back, with or without a record', async () => {
    const virtual = stored({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default' },
      spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
      status: { loadBalancer: {} },
    });
    const record = await created('Service', virtual);
    const host = edit(record.host, {
      spec: { clusterIP: '10.0.0.7' },
      status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } },
    });
    for (const r of [record, null]) {
      const pair = await desiredPair({ kind: 'Service', virtual, host, record: r, ctx, sandbox });
      expect(pair.virtual.status).toEqual({ loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } });
      expect(pair.virtual.spec).toEqual(virtual.spec);
      // The host's allocated ClusterIP stays.
      expect((pair.host.spec as any).clusterIP).toBe('10.0.0.7');
    }
  });

  it('a host object is what translateToHost gives, plus patches', async () => {
    const record = await created('Endpoints', virtualEndpoints({ note: 'n' }));
    const plainHost = translateToHost('Endpoints', record.virtual, null, ctx);
    expect(record.host.subsets).toEqual(plainHost.subsets);
    expect((record.host.metadata as any).annotations.note).toBe('n');
  });
});

describe('reverse patches on every path that flows back', () => {
  const svcCtx: SyncContext = {
    vclusterName: 'vc',
    hostNamespace: 'vc-ns',
    config: loadSyncConfig({
      sync: {
        toHost: {
          services: {
            patches: [
              {
                path: 'spec.ports[*].name',
                expression: '"tenant-" + value',
                reverseExpression: 'value.replace(/^tenant-/, "")',
              },
              {
                path: 'metadata.annotations.blob',
                expression: 'btoa(value)',
                reverseExpression: 'atob(value)',
              },
              {
                path: 'status.loadBalancer.ingress[*].hostname',
                reverseExpression: 'value.replace(/[.]host[.]example$/, ".example")',
              },
            ],
          },
        },
      },
    }),
  };
  const svcSandbox = createSandbox(svcCtx, { timeoutMs: 2000, objectTimeoutMs: 4000 });
  afterAll(() => svcSandbox.dispose());

  const virtualService = () =>
    stored({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default', annotations: { blob: 'secret-ish' } },
      spec: { type: 'ClusterIP', selector: { app: 'web' }, ports: [{ name: 'http', port: 80 }] },
    });
  const createdService = (virtual: KubeObject): SyncRecord => {
    const { object } = syncToHost({
      kind: 'Service',
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx: svcCtx,
      sandbox: svcSandbox,
    });
    return { virtual, host: stored(object) };
  };
  const pairOf = (virtual: KubeObject, host: KubeObject, record: SyncRecord | null) =>
    desiredPair({ kind: 'Service', virtual, host, record, ctx: svcCtx, sandbox: svcSandbox });

  it('a host change to a port name, an encoded annotation and the status comes back decoded', () => {
    const record = createdService(virtualService());
    expect((record.host.spec as any).ports[0].name).toBe('tenant-http');
    expect((record.host.metadata as any).annotations.blob).toBe(btoa('secret-ish'));
    const host = edit(record.host, {
      spec: { ports: [{ name: 'tenant-web', port: 80 }] },
      metadata: { annotations: { blob: btoa('changed') } },
      status: { loadBalancer: { ingress: [{ hostname: 'lb.host.example' }] } },
    });
    const pair = pairOf(record.virtual, host, record);
    expect(pair.backSynced).toBe(true);
    expect((pair.virtual.spec as any).ports).toEqual([{ name: 'web', port: 80 }]);
    expect((pair.virtual.metadata as any).annotations.blob).toBe('changed');
    expect(pair.virtual.status).toEqual({ loadBalancer: { ingress: [{ hostname: 'lb.example' }] } });
    // Forward again, the host keeps its form: nothing to write.
    expect(pair.host.spec).toEqual(host.spec);
    expect((pair.host.metadata as any).annotations).toEqual((host.metadata as any).annotations);
  });

  it('without a record only the status comes back, through its reverse patches', () => {
    const record = createdService(virtualService());
    const host = edit(record.host, {
      spec: { ports: [{ name: 'tenant-web', port: 80 }] },
      status: { loadBalancer: { ingress: [{ hostname: 'lb.host.example' }] } },
    });
    const pair = pairOf(record.virtual, host, null);
    expect(pair.virtual.status).toEqual({ loadBalancer: { ingress: [{ hostname: 'lb.example' }] } });
    expect((pair.virtual.spec as any).ports).toEqual([{ name: 'http', port: 80 }]);
    expect((pair.host.spec as any).ports).toEqual([{ name: 'tenant-http', port: 80 }]);
  });

  it('a field both sides changed keeps the virtual value', () => {
    const record = createdService(virtualService());
    const virtual = edit(record.virtual, { spec: { ports: [{ name: 'api', port: 80 }] } });
    const host = edit(record.host, { spec: { ports: [{ name: 'tenant-web', port: 80 }] } });
    const pair = pairOf(virtual, host, record);
    expect((pair.virtual.spec as any).ports).toEqual([{ name: 'api', port: 80 }]);
    expect((pair.host.spec as any).ports).toEqual([{ name: 'tenant-api', port: 80 }]);
  });

  it("the rest of the spec is the virtual side's: a host edit to the selector is reverted, never brought back", () => {
    const record = createdService(virtualService());
    const host = edit(record.host, { spec: { selector: { app: 'other' } } });
    const pair = pairOf(record.virtual, host, record);
    expect(pair.drifted).toBe(true);
    expect((pair.virtual.spec as any).selector).toEqual({ app: 'web' });
    expect((pair.host.spec as any).selector).toEqual((record.host.spec as any).selector);
  });
});
