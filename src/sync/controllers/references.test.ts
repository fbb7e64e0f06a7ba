import { afterAll, describe, expect, it } from 'vitest';
import { loadSyncConfig } from '../config.ts';
import { createSandbox, syncToHost } from '../sync.ts';
import type { KubeObject, SyncContext } from '../translate.ts';
import { hasReferencePatches, referencedKinds, referencesOf } from './references.ts';

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
      { name: 'thing', kind: 'Deployment' },
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
      // A plain string is a name even where objects are expected, as in translateReference.
      { kind: 'ConfigMap', namespace: 'apps', name: 'not-an-object' },
    ]);
  });

  it('kinds without reference patches reference nothing', () => {
    expect(referencesOf('Endpoints', service, ctx)).toEqual([]);
    expect(hasReferencePatches('Service', ctx.config)).toBe(true);
    expect(hasReferencePatches('Endpoints', ctx.config)).toBe(false);
    expect([...referencedKinds(ctx.config)].sort()).toEqual(['ConfigMap', 'Secret']);
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
    const fromSync = references
      .filter((r) => r.apiVersion === 'v1' && (r.kind === 'Secret' || r.kind === 'ConfigMap'))
      .map((r) => ({ kind: r.kind, ...r.virtual }));
    expect(fromSync).toEqual(referencesOf('Service', service, ctx));
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
  });
});
