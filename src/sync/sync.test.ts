// biome-ignore-all lint/suspicious/noExplicitAny: the tests walk loosely typed JSON objects
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${name}` is the configuration's own placeholder
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { PROTOTYPE_LABEL_KEYS, recordWithPrototypeKeys } from '../../test-support/prototype-keys.ts';
import { loadSyncConfig } from './config.ts';
import { referencesOf } from './controllers/references.ts';
import { isManagedHostObject } from './metadata.ts';
import { hostLabelKey } from './names.ts';
import { hostObjectRef, NamespaceNotMapped } from './object-refs.ts';
import { ExpressionError } from './patches/expression-failures.ts';
import type { Json } from './patches/merge-patch.ts';
import { createSandbox, syncToHost, syncToVirtual } from './sync.ts';
import type { KubeObject, SyncContext } from './sync-context.ts';
import { translateToHost, translateToVirtual } from './translate.ts';

const ctxWith = (config: unknown, vclusterName = 'vc'): SyncContext => ({
  vclusterName,
  hostNamespace: 'vc-ns',
  config: loadSyncConfig(config),
});
const plain = ctxWith({});
/** Limits no expression of these tests comes near, whatever the machine's load. */
const RELAXED_LIMITS = { timeoutMs: 2000, objectTimeoutMs: 4000 };
const sandboxes: ReturnType<typeof createSandbox>[] = [];
const sandboxFor = (ctx: SyncContext) => {
  const s = createSandbox(ctx, RELAXED_LIMITS);
  sandboxes.push(s);
  return s;
};
afterAll(() => {
  for (const s of sandboxes) s.dispose();
});

const endpoints = (over: Record<string, Json> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Endpoints',
  metadata: {
    name: 'db',
    namespace: 'default',
    uid: 'u-1',
    resourceVersion: '9',
    labels: { app: 'db', release: 'r1' },
    annotations: { note: 'n', 'control-plane.alpha.kubernetes.io/leader': 'x' },
  },
  subsets: [
    {
      addresses: [
        {
          ip: '10.0.0.1',
          targetRef: { kind: 'Pod', name: 'db-0', namespace: 'default', uid: 'p', resourceVersion: '3' },
        },
      ],
      notReadyAddresses: [{ ip: '10.0.0.2', targetRef: { kind: 'Node', name: 'n1' } }],
      ports: [{ port: 5432 }],
    },
  ],
  ...over,
});

describe('translateToHost', () => {
  it('Endpoints: name, bookkeeping, labels, pod targetRefs', () => {
    const host = translateToHost('Endpoints', endpoints(), null, plain);
    expect(host.metadata).toEqual({
      name: 'db-x-default-x-vc',
      namespace: 'vc-ns',
      labels: {
        app: 'db',
        [hostLabelKey('release', 'vc')]: 'r1',
        'vcluster.platform/managed-by': 'vc',
        'vcluster.platform/namespace': 'default',
      },
      annotations: {
        note: 'n',
        'vcluster.platform/managed-annotations': 'note',
        'vcluster.platform/managed-labels': `app\n${hostLabelKey('release', 'vc')}`,
        'vcluster.platform/object-name': 'db',
        'vcluster.platform/object-namespace': 'default',
        'vcluster.platform/object-uid': 'u-1',
        'vcluster.platform/object-kind': '/v1, Kind=Endpoints',
        'vcluster.platform/object-host-name': 'db-x-default-x-vc',
        'vcluster.platform/object-host-namespace': 'vc-ns',
      },
    });
    expect(host.subsets).toEqual([
      {
        addresses: [
          { ip: '10.0.0.1', targetRef: { kind: 'Pod', name: 'db-0-x-default-x-vc', namespace: 'vc-ns' } },
        ],
        notReadyAddresses: [{ ip: '10.0.0.2', targetRef: { kind: 'Node', name: 'n1' } }],
        ports: [{ port: 5432 }],
      },
    ]);
    expect(isManagedHostObject(host, plain, 'Endpoints')).toBe(true);
  });

  it('isManagedHostObject refuses foreign and tampered objects', () => {
    const host = translateToHost('Endpoints', endpoints(), null, plain);
    const tamper = (f: (m: Record<string, any>) => void) => {
      const copy = structuredClone(host) as any;
      f(copy.metadata);
      return isManagedHostObject(copy, plain, 'Endpoints');
    };
    expect(tamper((m) => delete m.labels['vcluster.platform/managed-by'])).toBe(false);
    expect(tamper((m) => (m.labels['vcluster.platform/managed-by'] = 'other'))).toBe(false);
    expect(tamper((m) => (m.name = 'db-x-default-x-other'))).toBe(false);
    expect(tamper((m) => (m.namespace = 'elsewhere'))).toBe(false);
    expect(tamper((m) => (m.annotations['vcluster.platform/object-kind'] = '/v1, Kind=Secret'))).toBe(false);
    expect(tamper((m) => delete m.annotations['vcluster.platform/object-name'])).toBe(false);
    expect(isManagedHostObject({ metadata: { name: 'kubernetes', namespace: 'vc-ns' } }, plain)).toBe(false);
  });

  it('Service: selector with markers, ClusterIP cleared unless None, node ports stripped, allocations kept', () => {
    const virtual: KubeObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default' },
      spec: {
        type: 'NodePort',
        clusterIP: '10.96.0.5',
        clusterIPs: ['10.96.0.5'],
        selector: { app: 'web' },
        ports: [{ port: 80, nodePort: 30080 }],
      },
      status: { loadBalancer: {} },
    };
    const host = translateToHost('Service', virtual, null, plain);
    expect(host.spec).toEqual({
      type: 'NodePort',
      selector: {
        app: 'web',
        'vcluster.platform/managed-by': 'vc',
        'vcluster.platform/namespace': 'default',
      },
      ports: [{ port: 80 }],
    });
    expect(host.status).toBeUndefined();
    const headless = translateToHost('Service', { ...virtual, spec: { clusterIP: 'None' } }, null, plain);
    expect(headless.spec).toEqual({ clusterIP: 'None' });
    const existing = {
      ...host,
      spec: { ...(host.spec as object), clusterIP: '10.0.0.7', ports: [{ port: 80, nodePort: 31000 }] },
    };
    expect(translateToHost('Service', virtual, existing, plain).spec).toMatchObject({
      clusterIP: '10.0.0.7',
      ports: [{ port: 80, nodePort: 31000 }],
    });
  });

  it('Service status flows back', () => {
    const host: KubeObject = {
      metadata: { name: 'web-x-default-x-vc', namespace: 'vc-ns' },
      status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } },
    };
    const virtual: KubeObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default' },
      spec: { type: 'LoadBalancer' },
    };
    expect(translateToVirtual('Service', host, virtual, plain)).toMatchObject({
      spec: { type: 'LoadBalancer' },
      status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } },
    });
  });

  it('Secrets and ConfigMaps are translated by name', () => {
    const secret = translateToHost(
      'Secret',
      { metadata: { name: 's', namespace: 'ns' }, data: { a: 'Yg==' }, type: 'Opaque' },
      null,
      plain,
    );
    expect(secret.metadata?.name).toBe('s-x-ns-x-vc');
    expect(secret.data).toEqual({ a: 'Yg==' });
    expect(
      translateToHost('ConfigMap', { metadata: { name: 'c', namespace: 'ns' } }, null, plain).metadata?.name,
    ).toBe('c-x-ns-x-vc');
  });

  it('keeps host-only annotations and labels of an existing host object', () => {
    const existing = translateToHost('Endpoints', endpoints(), null, plain);
    (existing.metadata as any).annotations['host.example/only'] = 'h';
    (existing.metadata as any).labels['host-label'] = 'h';
    const virtual = endpoints();
    delete (virtual.metadata as any).annotations.note;
    const next = translateToHost('Endpoints', virtual, existing, plain);
    expect((next.metadata as any).annotations).toMatchObject({ 'host.example/only': 'h' });
    expect((next.metadata as any).annotations.note).toBeUndefined();
    expect((next.metadata as any).labels['host-label']).toBe('h');
  });
});

describe('namespace mapping (multi-namespace mode)', () => {
  const multi = ctxWith({
    sync: {
      toHost: {
        namespaces: {
          enabled: true,
          mappings: {
            byName: { 'team-*': 'host-team-*', 'team-special': 'special', '${name}-ns': 'x-${name}' },
          },
        },
      },
    },
  });
  it.each([
    ['team-special', 'special'],
    ['team-a', 'host-team-a'],
    ['vc-ns', 'x-vc'],
  ])('%s -> %s, name kept', (ns, hostNs) => {
    expect(hostObjectRef(multi, 'Secret', 'n', ns)).toEqual({ name: 'n', namespace: hostNs });
  });
  it('unmapped namespaces fall back to single-namespace names, or fail with mappingsOnly', () => {
    expect(hostObjectRef(multi, 'Secret', 'n', 'other')).toEqual({
      name: 'n-x-other-x-vc',
      namespace: 'vc-ns',
    });
    const only = ctxWith({
      sync: {
        toHost: { namespaces: { enabled: true, mappingsOnly: true, mappings: { byName: { a: 'b' } } } },
      },
    });
    expect(() => hostObjectRef(only, 'Secret', 'n', 'other')).toThrow(NamespaceNotMapped);
  });
});

describe('data keys named like Object.prototype members', () => {
  it('a ConfigMap and a Secret keep every data key on the host, `__proto__` included', () => {
    const data = JSON.parse('{"__proto__": "MQ==", "constructor": "Mg==", "toString": "Mw=="}');
    for (const kind of ['ConfigMap', 'Secret']) {
      const virtual: KubeObject = {
        apiVersion: 'v1',
        kind,
        metadata: { name: 'c', namespace: 'default' },
        data,
      };
      const host = translateToHost(kind, virtual, null, plain);
      expect(JSON.stringify(host.data)).toBe(JSON.stringify(data));
      expect(Object.getPrototypeOf(host.data)).toBe(Object.prototype);
    }
  });
});

describe('syncToHost with patches', () => {
  const ctx = ctxWith({
    sync: {
      toHost: {
        endpoints: {
          patches: [
            {
              path: 'metadata.annotations["example.com/svc"]',
              expression: 'virtualToHostDNS(value)',
              reverseExpression: '"reverse:" + value',
            },
            {
              path: 'subsets[*].addresses[*].ip',
              expression: '"192.168." + value.split(".").slice(2).join(".")',
            },
            { path: 'metadata.annotations.drop', expression: 'null' },
            { path: 'metadata.labels.onlyback', reverseExpression: 'value + "-back"' },
            { path: 'metadata.annotations.missing', expression: '"never"' },
            { path: 'metadata.annotations.where', expression: 'context.path' },
          ],
        },
      },
    },
  });
  const sandbox = sandboxFor(ctx);
  const virtual = endpoints({
    metadata: {
      name: 'db',
      namespace: 'default',
      labels: { onlyback: 'x' },
      annotations: { 'example.com/svc': 'db.default.svc', drop: 'me', where: '?' },
    },
  });

  it('on create the patches see the whole translated object', async () => {
    const { object } = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    const annotations = (object.metadata as any).annotations;
    expect(annotations['example.com/svc']).toBe('db-x-default-x-vc.vc-ns.svc.cluster.local');
    expect(annotations.drop).toBeUndefined();
    expect(annotations.missing).toBeUndefined();
    expect(annotations.where).toBe('metadata.annotations.where');
    expect((object.metadata as any).labels.onlyback).toBe('x');
    expect((object.subsets as any)[0].addresses[0].ip).toBe('192.168.0.1');
    expect((object.subsets as any)[0].notReadyAddresses[0].ip).toBe('10.0.0.2');
  });

  it('on update only changed fields are patched; unchanged ones keep their patched value', async () => {
    const created = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    const host = {
      ...created.object,
      metadata: { ...(created.object.metadata as object), resourceVersion: '100', uid: 'host-uid' },
    };
    const changed = structuredClone(virtual);
    (changed.metadata as any).annotations.extra = 'new';
    const updated = await syncToHost({
      kind: 'Endpoints',
      source: changed,
      previousSource: virtual,
      existingTarget: host,
      ctx,
      sandbox,
    });
    expect((updated.object.metadata as any).annotations).toMatchObject({
      extra: 'new',
      'example.com/svc': 'db-x-default-x-vc.vc-ns.svc.cluster.local',
    });
    expect((updated.object.metadata as any).resourceVersion).toBe('100');
    expect((updated.object.subsets as any)[0].addresses[0].ip).toBe('192.168.0.1');
    const same = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: virtual,
      existingTarget: host,
      ctx,
      sandbox,
    });
    expect(same.changed).toBe(false);
    // without a previous source the existing target is the baseline: still no change (no flapping)
    const resync = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: null,
      existingTarget: host,
      ctx,
      sandbox,
    });
    expect(resync.object).toEqual(host);
  });

  it('reverse patches run toward the virtual object on host changes only', async () => {
    const created = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    const host = created.object;
    const hostChanged = structuredClone(host);
    (hostChanged.metadata as any).labels.onlyback = 'y';
    const back = await syncToVirtual({
      kind: 'Endpoints',
      source: hostChanged,
      previousSource: host,
      existingTarget: virtual,
      ctx,
      sandbox,
    });
    expect((back.object.metadata as any).labels.onlyback).toBe('y-back');
    expect((back.object.metadata as any).annotations['example.com/svc']).toBe('db.default.svc');
    expect(back.object.subsets).toEqual(virtual.subsets);
    expect((back.object.metadata as any).name).toBe('db');
  });

  it('a failing expression is an ExpressionError naming the patch', async () => {
    const bad = ctxWith({
      sync: { toHost: { endpoints: { patches: [{ path: 'subsets', expression: 'value.x.y' }] } } },
    });
    expect(() =>
      syncToHost({
        kind: 'Endpoints',
        source: virtual,
        previousSource: null,
        existingTarget: null,
        ctx: bad,
        sandbox: sandboxFor(bad),
      }),
    ).toThrow(
      new ExpressionError(
        'sync.toHost.endpoints.patches[0].expression',
        "TypeError: Cannot read properties of undefined (reading 'y')",
      ),
    );
  });

  it('patches cannot rename or unmanage the host object', async () => {
    const sneaky = ctxWith({
      sync: { toHost: { endpoints: { patches: [{ path: 'metadata.labels.*', expression: '"x"' }] } } },
    });
    const { object } = await syncToHost({
      kind: 'Endpoints',
      source: virtual,
      previousSource: null,
      existingTarget: null,
      ctx: sneaky,
      sandbox: sandboxFor(sneaky),
    });
    expect(isManagedHostObject(object, sneaky, 'Endpoints')).toBe(true);
  });
});

describe('reference and labels patches', () => {
  const ctx = ctxWith({
    sync: {
      toHost: {
        configMaps: {
          enabled: true,
          patches: [
            { path: 'data.secretName', reference: { apiVersion: 'v1', kind: 'Secret' } },
            { path: 'data.backend', reference: { apiVersion: 'v1', kind: 'Service' } },
            {
              path: 'data.ref',
              reference: {
                apiVersion: 'v1',
                kind: 'ConfigMap',
                namePath: 'name',
                namespacePath: 'namespace',
                kindPath: 'kind',
              },
            },
          ],
        },
        secrets: { patches: [{ path: 'data.selector', labels: {} }] },
      },
    },
  });
  const sandbox = sandboxFor(ctx);
  const cm: KubeObject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'c', namespace: 'default' },
    data: {
      secretName: 'creds',
      backend: 'api',
      ref: { name: 'other', namespace: 'team', kind: 'Service' },
    } as any,
  };

  it('toward the host: the host names of every synced kind; references reported', async () => {
    const r = await syncToHost({
      kind: 'ConfigMap',
      source: cm,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    expect(r.object.data).toEqual({
      secretName: 'creds-x-default-x-vc',
      backend: 'api-x-default-x-vc',
      ref: { name: 'other-x-team-x-vc', namespace: 'vc-ns', kind: 'Service' },
    });
    expect(r.references.map((x) => `${x.kind}:${x.virtual.namespace}/${x.virtual.name}`)).toEqual([
      'Secret:default/creds',
      'Service:default/api',
      'Service:team/other',
    ]);
  });

  it('multi-namespace mode translates only the namespace', async () => {
    const multi = ctxWith({
      ...{
        sync: {
          toHost: {
            namespaces: { enabled: true, mappings: { byName: { '*': 'h-*' } } },
            configMaps: {
              patches: [
                {
                  path: 'data.ref',
                  reference: {
                    apiVersion: 'v1',
                    kind: 'Secret',
                    namePath: 'name',
                    namespacePath: 'namespace',
                  },
                },
              ],
            },
          },
        },
      },
    });
    const r = await syncToHost({
      kind: 'ConfigMap',
      source: cm,
      previousSource: null,
      existingTarget: null,
      ctx: multi,
      sandbox: sandboxFor(multi),
    });
    expect((r.object.data as any).ref).toEqual({ name: 'other', namespace: 'h-team', kind: 'Service' });
    // Back: the namespace maps back by the rules; a host namespace no rule maps does not come back.
    const back = (ref: Record<string, string>) =>
      syncToVirtual({
        kind: 'ConfigMap',
        source: { ...r.object, data: { ref } as any },
        previousSource: null,
        existingTarget: null,
        ctx: multi,
        sandbox: sandboxFor(multi),
      }).object.data;
    expect(back({ name: 'other', namespace: 'h-team', kind: 'Service' })).toEqual({
      ref: { name: 'other', namespace: 'team', kind: 'Service' },
    });
    expect(back({ name: 'other', namespace: 'kube-system', kind: 'Service' })).toEqual({});
  });

  const hostCm = (data: Record<string, unknown>) =>
    ({
      ...cm,
      metadata: {
        name: 'c-x-default-x-vc',
        namespace: 'vc-ns',
        annotations: { 'vcluster.platform/object-namespace': 'default' },
      },
      data,
    }) as KubeObject;

  it('toward the virtual cluster host names become virtual names: looked up, else the translation inverted', () => {
    const r = syncToVirtual({
      kind: 'ConfigMap',
      source: hostCm({
        secretName: 'creds-x-default-x-vc',
        backend: 'api-x-default-x-vc',
        ref: { name: 'hashed-name-from-the-record', namespace: 'vc-ns', kind: 'Service' },
      }),
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
      lookupVirtual: (ref) =>
        ref.kind === 'Service' && ref.name === 'hashed-name-from-the-record' && ref.namespace === 'vc-ns'
          ? { name: 'other', namespace: 'team' }
          : null,
    });
    expect(r.object.data).toEqual({
      secretName: 'creds',
      backend: 'api',
      ref: { name: 'other', namespace: 'team', kind: 'Service' },
    });
    expect(
      r.references.map((x) => `${x.kind}:${x.virtual.namespace}/${x.virtual.name}<-${x.host.name}`),
    ).toEqual([
      'Secret:default/creds<-creds-x-default-x-vc',
      'Service:default/api<-api-x-default-x-vc',
      'Service:team/other<-hashed-name-from-the-record',
    ]);
  });

  it('toward the virtual cluster a host name that names no virtual object does not come back', () => {
    const existing: KubeObject = { ...cm, data: { secretName: 'creds', backend: 'api' } as any };
    const unknown = {
      // Not of this virtual cluster, not of this namespace, another virtual cluster's, a bare name.
      secretName: 'creds-x-default-x-other-vc',
      backend: 'api-x-team-x-vc',
      ref: { name: 'db', namespace: 'vc-ns', kind: 'Service' },
    };
    const update = syncToVirtual({
      kind: 'ConfigMap',
      source: hostCm(unknown),
      previousSource: hostCm({ secretName: 'creds-x-default-x-vc', backend: 'api-x-default-x-vc' }),
      existingTarget: existing,
      ctx,
      sandbox,
      lookupVirtual: () => null,
    });
    // The virtual object keeps its values, and gains no field it did not have.
    expect(update.object.data).toEqual({ secretName: 'creds', backend: 'api' });
    expect(update.references).toEqual([]);
    const imported = syncToVirtual({
      kind: 'ConfigMap',
      source: hostCm(unknown),
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    expect(imported.object.data).toEqual({});
  });

  it('a name translated to the host comes back as it was, for every synced kind', () => {
    for (const kind of ['Service', 'Endpoints', 'Secret', 'ConfigMap']) {
      const kindCtx = ctxWith({
        sync: {
          toHost: {
            configMaps: {
              enabled: true,
              patches: [{ path: 'metadata.annotations.target', reference: { apiVersion: 'v1', kind } }],
            },
          },
        },
      });
      const kindSandbox = sandboxFor(kindCtx);
      const source: KubeObject = {
        ...cm,
        metadata: { name: 'c', namespace: 'default', annotations: { target: 'a-x-b' } },
        data: {},
      };
      const host = syncToHost({
        kind: 'ConfigMap',
        source,
        previousSource: null,
        existingTarget: null,
        ctx: kindCtx,
        sandbox: kindSandbox,
      }).object;
      expect(host.metadata!.annotations).toMatchObject({ target: 'a-x-b-x-default-x-vc' });
      const back = syncToVirtual({
        kind: 'ConfigMap',
        source: host,
        previousSource: null,
        existingTarget: null,
        ctx: kindCtx,
        sandbox: kindSandbox,
      }).object;
      expect(back.metadata!.annotations).toEqual({ target: 'a-x-b' });
    }
  });

  it('property: reference patches over annotations named like Object.prototype members go to the host and back', () => {
    const wildcard = ctxWith({
      sync: {
        toHost: {
          services: { enabled: false },
          configMaps: {
            enabled: true,
            patches: [{ path: 'metadata.annotations.*', reference: { apiVersion: 'v1', kind: 'Service' } }],
          },
        },
      },
    });
    const wildcardSandbox = sandboxFor(wildcard);
    const names = recordWithPrototypeKeys(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), {
      prototypeKeys: PROTOTYPE_LABEL_KEYS,
      otherKeys: fc.constantFrom('a', 'example.com/backend'),
    });
    fc.assert(
      fc.property(names, names, (annotations, before) => {
        const source: KubeObject = {
          ...cm,
          metadata: { name: 'c', namespace: 'default', annotations },
          data: {},
        };
        const host = syncToHost({
          kind: 'ConfigMap',
          source,
          previousSource: null,
          existingTarget: null,
          ctx: wildcard,
          sandbox: wildcardSandbox,
        });
        const hostAnnotations = host.object.metadata!.annotations as Record<string, string>;
        for (const [key, name] of Object.entries(annotations)) {
          expect(Object.hasOwn(hostAnnotations, key)).toBe(true);
          expect(hostAnnotations[key]).toBe(`${name}-x-default-x-vc`);
        }
        // The user's annotations only: never the syncer's bookkeeping (object-name would name the
        // ConfigMap itself), which the wildcard reaches too.
        expect(host.references.map((r) => r.virtual.name).sort()).toEqual(Object.values(annotations).sort());
        expect(
          referencesOf('ConfigMap', source, wildcard)
            .map((r) => r.name)
            .sort(),
        ).toEqual([...new Set(Object.values(annotations))].sort());
        // Back into a virtual object that held other names: each comes back as it was (keys the
        // host did not change since the previous host object stay the virtual object's).
        const back = syncToVirtual({
          kind: 'ConfigMap',
          source: host.object,
          previousSource: { ...host.object, metadata: { ...host.object.metadata, annotations: {} } },
          existingTarget: { ...source, metadata: { ...source.metadata, annotations: before } },
          ctx: wildcard,
          sandbox: wildcardSandbox,
        });
        expect(Object.entries(back.object.metadata!.annotations as Record<string, string>).sort()).toEqual(
          Object.entries({ ...before, ...annotations }).sort(),
        );
      }),
      { numRuns: 50 },
    );
  });

  it('reference.labels (as SPEC.md writes it) translates the selector both ways, like labels beside reference', async () => {
    const both = ctxWith({
      sync: {
        toHost: {
          configMaps: {
            patches: [
              { path: 'data.specForm', reference: { apiVersion: 'v1', kind: 'Secret', labels: {} } },
              { path: 'data.referenceForm', labels: {} },
            ],
          },
        },
      },
    });
    const selector = { matchLabels: { app: 'web', release: 'r' } };
    const source: KubeObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'c', namespace: 'shop' },
      data: { specForm: selector, referenceForm: selector } as any,
    };
    const sb = sandboxFor(both);
    const host = syncToHost({
      kind: 'ConfigMap',
      source,
      previousSource: null,
      existingTarget: null,
      ctx: both,
      sandbox: sb,
    });
    const expected = {
      matchLabels: {
        app: 'web',
        [hostLabelKey('release', 'vc')]: 'r',
        'vcluster.platform/managed-by': 'vc',
        'vcluster.platform/namespace': 'shop',
      },
    };
    expect(host.object.data).toEqual({ specForm: expected, referenceForm: expected });
    const back = syncToVirtual({
      kind: 'ConfigMap',
      source: host.object,
      previousSource: null,
      existingTarget: null,
      ctx: both,
      sandbox: sb,
    });
    expect(back.object.data).toEqual({ specForm: selector, referenceForm: selector });
  });

  it('a Service selector already in the host form is not translated twice', () => {
    const svcCtx = ctxWith({
      sync: { toHost: { services: { patches: [{ path: 'spec.selector', labels: {} }] } } },
    });
    const service: KubeObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'shop' },
      spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
    };
    const host = syncToHost({
      kind: 'Service',
      source: service,
      previousSource: null,
      existingTarget: null,
      ctx: svcCtx,
      sandbox: sandboxFor(svcCtx),
    });
    expect((host.object.spec as any).selector).toEqual({
      app: 'web',
      'vcluster.platform/managed-by': 'vc',
      'vcluster.platform/namespace': 'shop',
    });
  });

  it('labels patches translate a selector like a Service selector', async () => {
    const secret: KubeObject = {
      kind: 'Secret',
      metadata: { name: 's', namespace: 'ns' },
      data: {
        selector: {
          matchLabels: { release: 'r' },
          matchExpressions: [{ key: 'release', operator: 'Exists' }],
        },
      } as any,
    };
    const r = await syncToHost({
      kind: 'Secret',
      source: secret,
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox,
    });
    const key = hostLabelKey('release', 'vc');
    expect((r.object.data as any).selector).toEqual({
      matchLabels: { [key]: 'r', 'vcluster.platform/managed-by': 'vc', 'vcluster.platform/namespace': 'ns' },
      matchExpressions: [{ key, operator: 'Exists' }],
    });
  });
});

describe('nothing from the virtual side sets reserved metadata on the host', () => {
  const secret = (labels: Record<string, string>, annotations: Record<string, string> = {}): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: 'db', namespace: 'apps', uid: 'u', labels, annotations },
    data: { password: 'aHVudGVy' },
  });
  const hostile = {
    'management.platform/sharedsecret-name': 'prod-db',
    'management.platform/sharedsecret-namespace': 'finance',
    'x.vcluster.platform/anything': 'y',
    'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
    'kubernetes.io/legacy-token-last-used': '2024-01-01',
    app: 'db',
    'app.kubernetes.io/name': 'db',
  };

  it('reserved labels and annotations of the virtual object are dropped; ordinary ones and the translated ones pass', () => {
    const host = translateToHost(
      'Secret',
      secret(
        { ...hostile, release: 'r1' },
        {
          'kubernetes.io/service-account.name': 'default',
          'vcluster.platform/skip-backsync': 'true',
          'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb',
          note: 'n',
        },
      ),
      null,
      plain,
    );
    const m = host.metadata as any;
    expect(m.labels).toEqual({
      app: 'db',
      'app.kubernetes.io/name': 'db',
      [hostLabelKey('release', 'vc')]: 'r1',
      'vcluster.platform/managed-by': 'vc',
      'vcluster.platform/namespace': 'apps',
    });
    expect(Object.keys(m.annotations).filter((k) => !k.startsWith('vcluster.platform/'))).toEqual([
      'service.beta.kubernetes.io/aws-load-balancer-type',
      'note',
    ]);
  });

  it("the host's own reserved keys stay; ones copied by an earlier syncer are removed", () => {
    const existing = translateToHost('Secret', secret({ app: 'db' }), null, plain);
    const em = existing.metadata as any;
    em.labels['management.platform/project'] = 'owned-by-host';
    em.labels['management.platform/sharedsecret-name'] = 'prod-db';
    em.annotations['vcluster.platform/managed-labels'] = 'app\nmanagement.platform/sharedsecret-name';
    const host = translateToHost('Secret', secret({ app: 'db' }), existing, plain);
    expect((host.metadata as any).labels).toEqual({
      app: 'db',
      'management.platform/project': 'owned-by-host',
      'vcluster.platform/managed-by': 'vc',
      'vcluster.platform/namespace': 'apps',
    });
  });

  it('patches cannot set them either: not through a wildcard, not through the whole object', () => {
    const ctx = ctxWith({
      sync: {
        toHost: {
          secrets: {
            enabled: true,
            patches: [
              { path: 'metadata.labels.*', expression: 'value' },
              {
                path: '',
                expression:
                  '({ metadata: { ...value.metadata, labels: { ...value.metadata.labels, "management.platform/sharedsecret-name": "prod-db" }, annotations: { ...value.metadata.annotations, "kubernetes.io/service-account.name": "default", "vcluster.platform/object-name": "other" } } })',
              },
            ],
          },
        },
      },
    });
    const { object } = syncToHost({
      kind: 'Secret',
      source: secret({ app: 'db' }),
      previousSource: null,
      existingTarget: null,
      ctx,
      sandbox: sandboxFor(ctx),
    });
    const m = object.metadata as any;
    expect(m.labels['management.platform/sharedsecret-name']).toBeUndefined();
    expect(m.annotations['kubernetes.io/service-account.name']).toBeUndefined();
    expect(m.annotations['vcluster.platform/object-name']).toBe('db');
    expect(isManagedHostObject(object, ctx, 'Secret')).toBe(true);
  });

  it("the host's reserved keys do not come back to the virtual object", () => {
    const existing = translateToHost('Secret', secret({ app: 'db' }), null, plain);
    (existing.metadata as any).labels['management.platform/project'] = 'p';
    (existing.metadata as any).annotations['endpoints.kubernetes.io/last-change-trigger-time'] = 't';
    const back = translateToVirtual('Secret', existing, secret({ app: 'db' }), plain);
    expect((back.metadata as any).labels).toEqual({ app: 'db' });
    expect((back.metadata as any).annotations).toBeUndefined();
  });
});
