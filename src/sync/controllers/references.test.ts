import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox, syncToHost } from '../sync.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import {
  hasReferencePatches,
  hostNameIndexValues,
  referencedKinds,
  referencesOf,
  selectorMatches,
  selectorReferencesOf,
} from './references.ts';

const ctxWith = (config: unknown): SyncContext => ({
  vclusterName: 'vc',
  hostNamespace: 'vc-ns',
  config: loadSyncConfig(config),
});

const ctx = ctxWith({
  sync: {
    toHost: {
      services: {
        patches: [
          {
            path: 'metadata.annotations["tls-secret"]',
            reference: { apiVersion: 'v1', kind: 'Secret' },
          },
          {
            path: 'spec.extra[*]',
            reference: {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              namePath: 'name',
              namespacePath: 'namespace',
              kindPath: 'kind',
            },
          },
          { path: 'metadata.annotations.other', expression: 'value' },
        ],
      },
    },
  },
});

const service: KubeObject = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: {
    name: 'web',
    namespace: 'apps',
    annotations: { 'tls-secret': 'web-tls', other: 'x' },
  },
  spec: {
    ports: [{ port: 443 }],
    extra: [
      { name: 'settings' },
      { name: 'shared', namespace: 'common' },
      { name: 'creds', kind: 'Secret' },
      { name: 'api', kind: 'Service' },
      { name: '' },
      'not-an-object',
    ],
  },
};

describe('referencesOf', () => {
  it('reads plain names and objects with namePath/namespacePath/kindPath', () => {
    expect(referencesOf('Service', service, ctx)).toEqual([
      { kind: 'Secret', namespace: 'apps', name: 'web-tls' },
      { kind: 'ConfigMap', namespace: 'apps', name: 'settings' },
      { kind: 'ConfigMap', namespace: 'common', name: 'shared' },
      { kind: 'Secret', namespace: 'apps', name: 'creds' },
      { kind: 'Service', namespace: 'apps', name: 'api' },
      // A plain string is a name even where objects are expected, as in translateReference.
      { kind: 'ConfigMap', namespace: 'apps', name: 'not-an-object' },
    ]);
  });

  it('kinds without reference patches reference nothing', () => {
    expect(referencesOf('Endpoints', service, ctx)).toEqual([]);
    expect(hasReferencePatches('Service', ctx.config)).toBe(true);
    expect(hasReferencePatches('Endpoints', ctx.config)).toBe(false);
    // kindPath: the value may name any kind the syncer syncs.
    expect([...referencedKinds(ctx.config)].sort()).toEqual(['ConfigMap', 'Endpoints', 'Secret', 'Service']);
    expect(referencedKinds(ctxWith({}).config).size).toBe(0);
  });

  const sandboxes: ReturnType<typeof createSandbox>[] = [];
  afterAll(() => {
    for (const s of sandboxes) s.dispose();
  });

  it('names the same objects as the references syncToHost reports on create', async () => {
    const sandbox = createSandbox(ctx, { timeoutMs: 2000, objectTimeoutMs: 4000 });
    sandboxes.push(sandbox);
    const { references } = await syncToHost({
      kind: 'Service',
      source: service,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    const fromSync = references.map((r) => ({ kind: r.kind, ...r.virtual }));
    expect(fromSync).toEqual(referencesOf('Service', service, ctx));
    expect(fromSync.map((r) => r.kind)).toContain('Service');
  });

  it('a kind the syncer does not sync, read through kindPath, names nothing and fails the sync', () => {
    const sandbox = createSandbox(ctx, { timeoutMs: 2000, objectTimeoutMs: 4000 });
    sandboxes.push(sandbox);
    const withDeployment: KubeObject = {
      ...service,
      spec: { extra: [{ name: 'thing', kind: 'Deployment' }] },
    };
    expect(referencesOf('Service', withDeployment, ctx)).toEqual([
      { kind: 'Secret', namespace: 'apps', name: 'web-tls' },
    ]);
    expect(() =>
      syncToHost({
        kind: 'Service',
        source: withDeployment,
        previousSource: null,
        existingTarget: null,
        ctx,
        sandbox,
      }),
    ).toThrow(
      'sync.toHost.services.patches[1]: names v1 Deployment, which the syncer does not sync (a reference may name v1 Endpoints, Service, Secret, ConfigMap)',
    );
  });
});

describe('reference.labels: the objects a selector picks are the references', () => {
  const selectorCtx = ctxWith({
    sync: {
      toHost: {
        services: {
          patches: [
            { path: 'spec.selector', reference: { apiVersion: 'v1', kind: 'ConfigMap', labels: {} } },
          ],
        },
      },
    },
  });
  const web: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: 'apps' },
    spec: { selector: { app: 'web' } },
  };

  it('reads the selector from the virtual object, for its kind and namespace', () => {
    expect(selectorReferencesOf('Service', web, selectorCtx)).toEqual([
      { kind: 'ConfigMap', namespace: 'apps', selector: { matchLabels: { app: 'web' } } },
    ]);
    expect(referencesOf('Service', web, selectorCtx)).toEqual([]);
    expect(hasReferencePatches('Service', selectorCtx.config)).toBe(true);
    expect([...referencedKinds(selectorCtx.config)]).toEqual(['ConfigMap']);
  });

  it.each<[string, Record<string, unknown>, Record<string, string>, boolean]>([
    ['matchLabels', { matchLabels: { app: 'web' } }, { app: 'web', x: 'y' }, true],
    ['matchLabels, other value', { matchLabels: { app: 'web' } }, { app: 'db' }, false],
    ['In', { matchExpressions: [{ key: 'tier', operator: 'In', values: ['a', 'b'] }] }, { tier: 'b' }, true],
    ['In, absent', { matchExpressions: [{ key: 'tier', operator: 'In', values: ['a'] }] }, {}, false],
    ['NotIn, absent', { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['a'] }] }, {}, true],
    [
      'NotIn',
      { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['a'] }] },
      { tier: 'a' },
      false,
    ],
    ['Exists', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, { tier: '' }, true],
    ['DoesNotExist', { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, { tier: '' }, false],
    ['empty', {}, { any: 'thing' }, true],
    [
      'unknown operator',
      { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] },
      { a: '2' },
      false,
    ],
  ])('%s', (_name, selector, labels, expected) => {
    expect(selectorMatches(selector, labels)).toBe(expected);
  });
});

describe('syncedKinds', () => {
  it('enabled kinds, plus the kinds a reference patch can name', async () => {
    const { syncedKinds } = await import('./syncer.ts');
    expect(syncedKinds(ctxWith({}).config)).toEqual(['Service', 'Endpoints']);
    expect(syncedKinds(ctx.config)).toEqual(['Service', 'Endpoints', 'Secret', 'ConfigMap']);
    expect(
      syncedKinds(
        ctxWith({ sync: { toHost: { endpoints: { enabled: false }, configMaps: { enabled: true } } } })
          .config,
      ),
    ).toEqual(['Service', 'ConfigMap']);
    // A reference to a Service keeps Services synced when their own sync is off.
    expect(
      syncedKinds(
        ctxWith({
          sync: {
            toHost: {
              services: { enabled: false },
              endpoints: {
                patches: [
                  { path: 'metadata.annotations.backend', reference: { apiVersion: 'v1', kind: 'Service' } },
                ],
              },
            },
          },
        }).config,
      ),
    ).toEqual(['Service', 'Endpoints']);
  });
});

describe('hostNameIndexValues', () => {
  it('the host name of the object, whether or not it exists; none for an unmapped namespace', () => {
    const web: KubeObject = { metadata: { name: 'web', namespace: 'apps' } };
    expect(hostNameIndexValues('Service', web, ctx)).toEqual(['vc-ns/web-x-apps-x-vc']);
    const mappedOnly = ctxWith({
      sync: {
        toHost: {
          namespaces: { enabled: true, mappingsOnly: true, mappings: { byName: { shop: 'h-shop' } } },
        },
      },
    });
    expect(
      hostNameIndexValues('Service', { metadata: { name: 'web', namespace: 'shop' } }, mappedOnly),
    ).toEqual(['h-shop/web']);
    expect(hostNameIndexValues('Service', web, mappedOnly)).toEqual([]);
  });
});
