// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${name}` is the configuration's own placeholder
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROTOTYPE_KEYS } from '../../test-support/prototype-keys.ts';
import { InvalidSyncConfig, loadSyncConfig, validateSyncConfig } from './config.ts';
import { singleExpressionError } from './patches/expression.ts';

const withPatches = (patches: unknown[]) => ({ sync: { toHost: { endpoints: { patches } } } });

describe('defaults', () => {
  it('endpoints and services on, secrets and configMaps off, cluster.local', () => {
    const c = loadSyncConfig('');
    expect(c.sync.toHost.endpoints).toEqual({ enabled: true, patches: [] });
    expect(c.sync.toHost.services.enabled).toBe(true);
    expect(c.sync.toHost.secrets.enabled).toBe(false);
    expect(c.sync.toHost.configMaps.enabled).toBe(false);
    expect(c.sync.toHost.namespaces.enabled).toBe(false);
    expect(c.networking.advanced.clusterDomain).toBe('cluster.local');
  });
  it('keeps unrelated keys', () => {
    expect(
      loadSyncConfig('controlPlane: {distro: k8s}\nsync: {toHost: {endpoints: {enabled: false}}}'),
    ).toMatchObject({
      controlPlane: { distro: 'k8s' },
      sync: { toHost: { endpoints: { enabled: false } } },
    });
  });
});

describe('keys named like Object.prototype members', () => {
  it('a key __proto__ is refused where it stands, not dropped without a word', () => {
    const { config, errors } = validateSyncConfig(
      'sync:\n  toHost:\n    namespaces:\n      enabled: true\n      mappings:\n        byName:\n          __proto__: host\n',
    );
    expect(config).toBeNull();
    expect(errors).toEqual([
      'sync.toHost.namespaces.mappings.byName.__proto__: the key "__proto__" is not supported',
    ]);
  });

  it('a virtual namespace named constructor is mapped like any other', () => {
    const config = loadSyncConfig({
      sync: { toHost: { namespaces: { enabled: true, mappings: { byName: { constructor: 'host-c' } } } } },
    });
    expect(Object.entries(config.sync.toHost.namespaces.mappings.byName)).toEqual([
      ['constructor', 'host-c'],
    ]);
  });
});

describe('validation errors name the patch', () => {
  it.each<[unknown[], string]>([
    [
      [{ path: 'a', expression: '1', reference: { apiVersion: 'v1', kind: 'Secret' } }],
      'sync.toHost.endpoints.patches[0]: can only use one of',
    ],
    [[{ path: 'a' }], 'sync.toHost.endpoints.patches[0]: need to use one of'],
    [[{ path: 'a', labels: {}, reference: { apiVersion: 'v1', kind: 'Secret' } }], 'can only use one of'],
    [
      [
        { path: 'a', expression: '1' },
        { path: 'a', expression: '2' },
      ],
      'sync.toHost.endpoints.patches[1]: sync.toHost.endpoints.patches[0] has the same path "a"',
    ],
    [
      [{ path: 'a[0', expression: '1' }],
      'sync.toHost.endpoints.patches[0].path: invalid path "a[0" at 1: unclosed bracket',
    ],
    [[{ path: 'metadata.name', expression: '1' }], 'patches[0].path: "metadata.name" may not patch'],
    [[{ path: 'metadata.*', expression: '1' }], 'may not patch metadata.name'],
    [[{ path: '*.namespace', expression: '1' }], 'may not patch'],
    [
      [{ path: 'a', expression: '1); evil(); (1' }],
      'sync.toHost.endpoints.patches[0].expression: not a single expression',
    ],
    [
      [{ path: 'a', reverseExpression: 'let x = 1' }],
      'patches[0].reverseExpression: not a single expression',
    ],
    [
      [
        { path: 'x', expression: '1' },
        { path: 'y', expression: '1; 2' },
        { path: 'b', expression: 'value /*' },
      ],
      'patches[2].expression',
    ],
    [
      [{ path: 'a', reference: { apiVersion: 'v1', kind: 'Secret', namePath: 'a[' } }],
      'patches[0].reference.namePath: invalid path',
    ],
    [[{ path: 'a', expression: '1', bogus: 1 }], 'sync.toHost.endpoints.patches[0]: Unrecognized key'],
    // Fields that say what an object is, who owns it, or what the apiserver owns: named.
    [
      [{ path: 'type', expression: '"kubernetes.io/service-account-token"' }],
      'patches[0].path: "type" may not patch type',
    ],
    [[{ path: 'metadata.ownerReferences', expression: '[]' }], 'may not patch metadata.ownerReferences'],
    [[{ path: 'metadata.finalizers[0]', expression: '"x"' }], 'may not patch metadata.finalizers'],
    [[{ path: 'metadata.uid', expression: '"x"' }], 'may not patch metadata.uid'],
    [[{ path: 'kind', expression: '"ConfigMap"' }], 'may not patch kind'],
    [
      [{ path: 'metadata', expression: 'value' }],
      'may not patch metadata.name, metadata.namespace, metadata.ownerReferences',
    ],
    [
      [{ path: '*', expression: 'value' }],
      '"*" may not patch metadata.name, metadata.namespace, apiVersion, kind, type',
    ],
    [
      [{ path: 'metadata.ownerReferences[*].name', reference: { apiVersion: 'v1', kind: 'Secret' } }],
      'may not patch metadata.ownerReferences',
    ],
    // Reserved label and annotation keys, named literally.
    [
      [{ path: 'metadata.labels["management.platform/sharedsecret-name"]', expression: '"prod-db"' }],
      'may not set "management.platform/sharedsecret-name": the key is reserved on the host',
    ],
    [
      [{ path: "metadata.annotations['kubernetes.io/service-account.name']", expression: '"default"' }],
      'may not set "kubernetes.io/service-account.name"',
    ],
    [
      [{ path: 'metadata.labels["vcluster.platform/managed-by"]', expression: '"other"' }],
      'may not set "vcluster.platform/managed-by"',
    ],
    [
      [
        {
          path: 'spec.selector',
          reference: { apiVersion: 'v1', kind: 'Secret', labels: {}, namePath: 'name' },
        },
      ],
      'patches[0].reference.namePath: not used with reference.labels',
    ],
    [
      [{ path: 'spec.selector', reference: { apiVersion: 'v1', kind: 'Secret', labels: { x: 1 } } }],
      'reference.labels',
    ],
    [[{ path: 'a', reference: { kind: 'Secret' } }], 'sync.toHost.endpoints.patches[0].reference.apiVersion'],
  ])('%j', (patches, message) => {
    const { config, errors } = validateSyncConfig(withPatches(patches));
    expect(config).toBeNull();
    expect(errors.join('\n')).toContain(message);
  });

  it.each([
    ['the whole object', ''],
    ['a label by wildcard (reserved keys are dropped when synced)', 'metadata.labels.*'],
    ['a Service type (not the Secret type)', 'spec.type'],
    ['an ordinary annotation', 'metadata.annotations["example.com/owner"]'],
    [
      'a user-facing Kubernetes annotation',
      'metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-type"]',
    ],
  ])('accepts a patch of %s', (_what, path) => {
    expect(validateSyncConfig(withPatches([{ path, expression: 'value' }])).errors).toEqual([]);
  });

  it('a reference names a kind the syncer syncs, whatever else it says', () => {
    const reference = (apiVersion: string, kind: string, extra: Record<string, unknown> = {}) => ({
      path: 'metadata.annotations.target',
      reference: { apiVersion, kind, ...extra },
    });
    for (const kind of ['Service', 'Endpoints', 'Secret', 'ConfigMap']) {
      expect(validateSyncConfig(withPatches([reference('v1', kind)])).errors).toEqual([]);
    }
    const refused = (apiVersion: string, kind: string, extra?: Record<string, unknown>) =>
      validateSyncConfig(withPatches([reference(apiVersion, kind, extra)])).errors;
    expect(refused('apps/v1', 'Deployment')).toEqual([
      'sync.toHost.endpoints.patches[0].reference.kind: apps/v1 Deployment is not synced by the syncer (a reference may name v1 Endpoints, Service, Secret, ConfigMap)',
    ]);
    // Pods are translated in Endpoints' targetRef but never synced; a group's kind of the same name
    // is another kind; a kindPath does not excuse the fallback kind; nor does reference.labels.
    expect(refused('v1', 'Pod')).toHaveLength(1);
    expect(refused('example.com/v1', 'Service')).toHaveLength(1);
    expect(refused('v1', 'Widget', { namePath: 'name', kindPath: 'kind' })).toHaveLength(1);
    expect(refused('v1', 'Namespace', { labels: {} })).toHaveLength(1);
    // Kind names are matched as data: an Object.prototype member is not a kind.
    for (const key of PROTOTYPE_KEYS) expect(refused('v1', key)).toHaveLength(1);
  });

  it('reference.labels as SPEC.md writes it and labels beside reference as the reference product does', () => {
    const spec = { path: 'spec.secretSelector', reference: { apiVersion: 'v1', kind: 'Secret', labels: {} } };
    const beside = { path: 'spec.selector', labels: {} };
    const { config, errors } = validateSyncConfig(withPatches([spec, beside]));
    expect(errors).toEqual([]);
    expect(config?.sync.toHost.endpoints.patches).toEqual([spec, beside]);
  });

  it('checks every list', () => {
    const { errors } = validateSyncConfig({
      sync: { toHost: { secrets: { patches: [{ path: 'data', expression: '1;' }] } } },
    });
    expect(errors[0]).toMatch(/^sync\.toHost\.secrets\.patches\[0\]\.expression: /);
  });

  it('rejects bad namespace mappings', () => {
    const { errors } = validateSyncConfig({
      sync: {
        toHost: {
          namespaces: {
            enabled: true,
            mappings: { byName: { 'a-*': 'b', 'c*d*': 'e*', ok: '${name}-ok', Bad: 'x' } },
          },
        },
      },
    });
    expect(errors.join('\n')).toContain('byName["a-*"]: a pattern needs a "*" on both sides');
    expect(errors.join('\n')).toContain('"c*d*" may hold one trailing "*" only');
    expect(errors.join('\n')).toContain('"Bad" is not a valid namespace name');
    expect(errors.join('\n')).not.toContain('byName["ok"]');
  });

  it('loadSyncConfig throws InvalidSyncConfig; YAML errors are reported', () => {
    expect(() => loadSyncConfig(withPatches([{ path: 'a' }]))).toThrow(InvalidSyncConfig);
    expect(validateSyncConfig('a: [').errors[0]).toMatch(/not valid YAML/);
    expect(validateSyncConfig('sync: {toHost: {endpoints: {enabled: "yes"}}}').errors[0]).toMatch(
      /^sync\.toHost\.endpoints\.enabled: /,
    );
  });
});

describe('single expression check', () => {
  it.each([
    '1',
    'value',
    '"lit"',
    '{a: 1, b: 2}',
    '({a: 1})',
    'a ? b : c',
    '1, 2',
    '(() => { let x = 1; return x; })()',
    'value // trailing comment',
    '/* c */ value',
    'function () {}',
    '`${value}`',
  ])('accepts %j', (text) => expect(singleExpressionError(text)).toBeNull());
  it.each([
    '',
    '1); evil(); (1',
    '1), (2',
    '1; 2',
    'let x = 1',
    'return 1',
    'value /*',
    '}); evil(); (function () {',
    '})(); evil(); (function(){ return (1',
    'a\n++b',
    'if (value) 1',
    'with (value) x',
    '010',
  ])('rejects %j', (text) => expect(singleExpressionError(text)).not.toBeNull());

  it('injection attempts around a valid expression are rejected', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(');', '));', '});', '})();', ']);', '`);'),
        fc.constantFrom('evil()', 'while(1){}'),
        (close, stmt) => {
          expect(singleExpressionError(`1${close} ${stmt}; (1`)).not.toBeNull();
        },
      ),
    );
  });
});
