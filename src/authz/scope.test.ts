import fc from 'fast-check';
import { describe, expect, it, test } from 'vitest';
import type { Scope, ScopeRule } from '../api/scope.ts';
import type { RequestAttributes, RequestTarget } from './attributes.ts';
import { checkScope, groupResourcesMatch, nonResourcePathMatches, scopeRuleMatches } from './scope.ts';
import { scopeWithin } from './scope-comparison.ts';
import { validateScope } from './scope-validation.ts';

const MGMT = 'management.platform';

function req(overrides: Partial<RequestAttributes> = {}): RequestAttributes {
  return {
    target: 'Management',
    verb: 'get',
    resourceRequest: true,
    apiGroup: '',
    resource: 'pods',
    subresource: '',
    name: '',
    namespace: 'default',
    path: '',
    ...overrides,
  };
}
const nonResource = (path: string, overrides: Partial<RequestAttributes> = {}) =>
  req({ resourceRequest: false, resource: '', namespace: '', path, ...overrides });
const allowed = (scope: Scope | undefined, request: RequestAttributes) => checkScope(scope, request).allowed;

describe('checkScope: no narrowing', () => {
  it.each([
    ['absent', undefined],
    ['empty object', {}],
    ['empty lists', { roles: [], projects: [], spaces: [], virtualClusters: [], clusters: [], rules: [] }],
    ['allowPlatformCli false', { allowPlatformCli: false }],
  ])('%s scope allows everything', (_case, scope) => {
    expect(allowed(scope as Scope | undefined, req({ verb: 'delete', resource: 'secrets' }))).toBe(true);
    expect(
      allowed(scope as Scope | undefined, nonResource('/healthz', { target: 'Cluster', cluster: 'c' })),
    ).toBe(true);
  });
});

describe('checkScope: projects, spaces, virtual clusters, clusters', () => {
  const inSpace = req({ target: 'ProjectSpace', project: 'p1', space: 's1', namespace: 's1' });
  const inVc = req({
    target: 'ProjectVirtualCluster',
    project: 'p1',
    virtualCluster: { name: 'v1', namespace: 'p-p1' },
  });
  const inCluster = req({ target: 'Cluster', cluster: 'c1' });
  const mgmtProject = req({
    apiGroup: MGMT,
    resource: 'virtualclusterinstances',
    namespace: 'p-p1',
    project: 'p1',
    virtualCluster: { name: 'v1', namespace: 'p-p1' },
  });
  const unrelated = req({ apiGroup: MGMT, resource: 'users', namespace: '' });

  it.each<[string, Scope, RequestAttributes, boolean]>([
    ['project covers its space', { projects: [{ project: 'p1' }] }, inSpace, true],
    ['project covers its vcluster', { projects: [{ project: 'p1' }] }, inVc, true],
    ['project covers its management objects', { projects: [{ project: 'p1' }] }, mgmtProject, true],
    ['other project', { projects: [{ project: 'p2' }] }, inSpace, false],
    ['project * covers every project', { projects: [{ project: '*' }] }, inVc, true],
    ['project * does not cover clusters', { projects: [{ project: '*' }] }, inCluster, false],
    ['project does not cover unrelated management', { projects: [{ project: '*' }] }, unrelated, false],
    ['space', { spaces: [{ project: 'p1', space: 's1' }] }, inSpace, true],
    ['space *', { spaces: [{ project: 'p1', space: '*' }] }, inSpace, true],
    ['space in other project', { spaces: [{ project: 'p2', space: 's1' }] }, inSpace, false],
    ['other space', { spaces: [{ project: 'p1', space: 's2' }] }, inSpace, false],
    ['space does not cover vcluster', { spaces: [{ project: 'p1', space: '*' }] }, inVc, false],
    ['space project * is literal', { spaces: [{ project: '*', space: '*' }] }, inSpace, false],
    ['vcluster', { virtualClusters: [{ project: 'p1', virtualCluster: 'v1' }] }, inVc, true],
    [
      'vcluster management object',
      { virtualClusters: [{ project: 'p1', virtualCluster: 'v1' }] },
      mgmtProject,
      true,
    ],
    ['vcluster *', { virtualClusters: [{ project: 'p1', virtualCluster: '*' }] }, inVc, true],
    ['other vcluster', { virtualClusters: [{ project: 'p1', virtualCluster: 'v2' }] }, inVc, false],
    [
      'vcluster in other project',
      { virtualClusters: [{ project: 'p2', virtualCluster: 'v1' }] },
      inVc,
      false,
    ],
    [
      'vcluster does not cover space',
      { virtualClusters: [{ project: 'p1', virtualCluster: '*' }] },
      inSpace,
      false,
    ],
    ['cluster', { clusters: [{ cluster: 'c1' }] }, inCluster, true],
    ['cluster *', { clusters: [{ cluster: '*' }] }, inCluster, true],
    ['other cluster', { clusters: [{ cluster: 'c2' }] }, inCluster, false],
    ['cluster does not cover projects', { clusters: [{ cluster: '*' }] }, inSpace, false],
    [
      'union of entries',
      { clusters: [{ cluster: 'c2' }], spaces: [{ project: 'p1', space: 's1' }] },
      inSpace,
      true,
    ],
  ])('%s', (_case, scope, request, expected) => {
    expect(allowed(scope, request)).toBe(expected);
  });

  it("explains a denial: the request, and which parts of the scope refused it, without the scope's entries", () => {
    const decision = checkScope({ projects: [{ project: 'secret-project' }] }, inCluster);
    expect(decision).toEqual({ allowed: false, reason: expect.stringContaining('get pods') });
    expect(JSON.stringify(decision)).not.toContain('secret-project');
    const parts = checkScope(
      {
        clusters: [{ cluster: 'secret-cluster' }],
        spaces: [{ project: 'p9', space: 'secret-space' }],
        rules: [{ verbs: ['list'] }],
      },
      inCluster,
    );
    expect(parts.allowed === false && parts.reason.split(': ').slice(1).join(': ')).toBe(
      `scope.spaces: the request concerns no space; scope.clusters does not name cluster "${inCluster.cluster}"; no entry of scope.rules matches it`,
    );
    expect(JSON.stringify(parts)).not.toMatch(/secret-cluster|secret-space|p9/);
  });
});

describe('checkScope: roles', () => {
  const cli = (overrides: Partial<RequestAttributes>) => req({ apiGroup: MGMT, namespace: '', ...overrides });

  it.each<[string, RequestAttributes, boolean]>([
    ['create selves', cli({ verb: 'create', resource: 'selves' }), true],
    ['list projects', cli({ verb: 'list', resource: 'projects' }), true],
    [
      'get projects/clusters',
      cli({ resource: 'projects', subresource: 'clusters', name: 'p', project: 'p' }),
      true,
    ],
    [
      'watch virtualclusterinstances',
      cli({ verb: 'watch', resource: 'virtualclusterinstances', namespace: 'p-p' }),
      true,
    ],
    ['list spaceinstances', cli({ verb: 'list', resource: 'spaceinstances' }), true],
    ['get clusters', cli({ resource: 'clusters', name: 'c', cluster: 'c' }), true],
    ['GET /version', nonResource('/version'), true],
    ['GET /apis/management.platform/v1', nonResource('/apis/management.platform/v1'), true],
    ['delete projects', cli({ verb: 'delete', resource: 'projects', name: 'p', project: 'p' }), false],
    [
      'get projects/members',
      cli({ resource: 'projects', subresource: 'members', name: 'p', project: 'p' }),
      false,
    ],
    ['get sharedsecrets', cli({ resource: 'sharedsecrets', namespace: 'platform' }), false],
    ['get configs', cli({ resource: 'configs', name: 'c' }), false],
    [
      'create kubeconfig',
      cli({ verb: 'create', resource: 'virtualclusterinstances', subresource: 'kubeconfig' }),
      false,
    ],
    [
      'create directclusterendpointtokens',
      cli({ verb: 'create', resource: 'directclusterendpointtokens' }),
      false,
    ],
    ['projects in another group', req({ resource: 'projects', verb: 'list' }), false],
    [
      'list projects in a cluster',
      cli({ verb: 'list', resource: 'projects', target: 'Cluster', cluster: 'c' }),
      false,
    ],
    ['POST /version', nonResource('/version', { verb: 'post' }), false],
  ])('platform-cli: %s', (_case, request, expected) => {
    for (const scope of [
      { roles: [{ role: 'platform-cli' as const }] },
      { roles: [{ role: 'platformCLI' as const }] },
      { allowPlatformCli: true },
    ]) {
      expect(allowed(scope, request)).toBe(expected);
    }
  });

  it('restricts a role to its projects and virtual clusters when the request concerns one', () => {
    const scope: Scope = { roles: [{ role: 'platform-cli', projects: ['p1'], virtualClusters: ['v1'] }] };
    expect(allowed(scope, cli({ resource: 'projects', name: 'p1', project: 'p1' }))).toBe(true);
    expect(allowed(scope, cli({ resource: 'projects', name: 'p2', project: 'p2' }))).toBe(false);
    expect(allowed(scope, cli({ verb: 'list', resource: 'projects' }))).toBe(true);
    const vci = (name: string) =>
      cli({
        resource: 'virtualclusterinstances',
        name,
        namespace: 'p-p1',
        project: 'p1',
        virtualCluster: { name, namespace: 'p-p1' },
      });
    expect(allowed(scope, vci('v1'))).toBe(true);
    expect(allowed(scope, vci('v2'))).toBe(false);
  });

  it.each<[string, string, string, boolean]>([
    ['vcluster', 'vcluster', 'vcluster', true],
    ['vcluster implies network-peer', 'vcluster', 'network-peer', true],
    ['agent implies network-peer', 'agent', 'network-peer', true],
    ['runner implies network-peer', 'runner', 'network-peer', true],
    ['network-peer does not imply vcluster', 'network-peer', 'vcluster', false],
    ['platform-cli does not imply agent', 'platform-cli', 'agent', false],
    ['platformCLI is platform-cli', 'platformCLI', 'platform-cli', true],
    ['workspace is not agent', 'workspace', 'agent', false],
  ])('role endpoints: %s', (_case, held, required, expected) => {
    const request = req({ apiGroup: MGMT, resource: 'internal', requiredRole: required as never });
    expect(allowed({ roles: [{ role: held as never }] }, request)).toBe(expected);
  });

  it('opens role endpoints only through roles', () => {
    const request = req({
      target: 'ProjectVirtualCluster',
      project: 'p',
      requiredRole: 'vcluster',
      virtualCluster: { name: 'v', namespace: 'p-p' },
    });
    expect(allowed({ projects: [{ project: '*' }], rules: [{}] }, request)).toBe(false);
    expect(allowed({ roles: [{ role: 'vcluster', virtualClusters: ['v'] }] }, request)).toBe(true);
    expect(allowed({ roles: [{ role: 'vcluster', virtualClusters: ['w'] }] }, request)).toBe(false);
    expect(allowed(undefined, request)).toBe(true);
  });

  it('grants nothing for an unknown role name that skipped validation', () => {
    expect(allowed({ roles: [{ role: 'root' as never }] }, req({ requiredRole: 'agent' }))).toBe(false);
    expect(allowed({ roles: [{ role: 'root' as never }] }, req())).toBe(false);
  });
});

describe('scope rules', () => {
  const rule = (r: ScopeRule, request: RequestAttributes) => scopeRuleMatches(r, request);
  it.each<[string, ScopeRule, RequestAttributes, boolean]>([
    ['empty rule matches everything', {}, nonResource('/x'), true],
    ['verbs: listed', { verbs: ['get', 'list'] }, req(), true],
    ['verbs: not listed', { verbs: ['list'] }, req(), false],
    ['verbs: * is every verb', { verbs: ['*'] }, req({ verb: 'delete' }), true],
    ['namespaces: listed', { namespaces: ['default'] }, req(), true],
    ['namespaces: not listed', { namespaces: ['kube-system'] }, req(), false],
    [
      'namespaces: "" is cluster-scoped',
      { namespaces: [''] },
      req({ resource: 'nodes', namespace: '' }),
      true,
    ],
    ['namespaces: "" is not namespaced', { namespaces: [''] }, req(), false],
    ['namespaces: never non-resource', { namespaces: ['default'] }, nonResource('/version'), false],
    [
      'resources: group matches, empty list = all',
      { resources: [{ group: '' }] },
      req({ resource: 'secrets' }),
      true,
    ],
    ['resources: other group', { resources: [{ group: 'apps' }] }, req(), false],
    ['resources: never non-resource', { resources: [{ group: '' }] }, nonResource('/version'), false],
    ['resources: exact', { resources: [{ group: '', resources: ['pods'] }] }, req(), true],
    [
      'resources: exact excludes subresource',
      { resources: [{ group: '', resources: ['pods'] }] },
      req({ subresource: 'log' }),
      false,
    ],
    [
      'resources: resource/sub',
      { resources: [{ group: '', resources: ['pods/log'] }] },
      req({ subresource: 'log' }),
      true,
    ],
    ['resources: *', { resources: [{ group: '', resources: ['*'] }] }, req({ subresource: 'exec' }), true],
    ['resources: r/* includes r', { resources: [{ group: '', resources: ['pods/*'] }] }, req(), true],
    [
      'resources: r/* includes subresources',
      { resources: [{ group: '', resources: ['pods/*'] }] },
      req({ subresource: 'log' }),
      true,
    ],
    [
      'resources: */s',
      { resources: [{ group: 'apps', resources: ['*/scale'] }] },
      req({ apiGroup: 'apps', resource: 'deployments', subresource: 'scale' }),
      true,
    ],
    [
      'resources: */s excludes the resource',
      { resources: [{ group: 'apps', resources: ['*/scale'] }] },
      req({ apiGroup: 'apps', resource: 'deployments' }),
      false,
    ],
    [
      'resourceNames: listed',
      { resources: [{ group: '', resources: ['pods'], resourceNames: ['a'] }] },
      req({ name: 'a' }),
      true,
    ],
    [
      'resourceNames: not listed',
      { resources: [{ group: '', resources: ['pods'], resourceNames: ['a'] }] },
      req({ name: 'b' }),
      false,
    ],
    ['nonResourceURLs: exact', { nonResourceURLs: ['/version'] }, nonResource('/version'), true],
    ['nonResourceURLs: final wildcard', { nonResourceURLs: ['/apis/*'] }, nonResource('/apis/apps/v1'), true],
    [
      'nonResourceURLs: wildcard needs the step',
      { nonResourceURLs: ['/apis/*'] },
      nonResource('/apis'),
      false,
    ],
    ['nonResourceURLs: never resources', { nonResourceURLs: ['*'] }, req(), false],
    ['requestTargets: listed', { requestTargets: ['Management'] }, req(), true],
    ['requestTargets: not listed', { requestTargets: ['Cluster'] }, req(), false],
    [
      'requestTargets: legacy virtual cluster never listed',
      { requestTargets: ['ProjectVirtualCluster'] },
      req({ target: 'VirtualCluster' }),
      false,
    ],
    ['cluster: that cluster', { cluster: 'c1' }, req({ target: 'Cluster', cluster: 'c1' }), true],
    ['cluster: other cluster', { cluster: 'c1' }, req({ target: 'Cluster', cluster: 'c2' }), false],
    ['cluster: non-cluster request denied', { cluster: 'c1' }, req(), false],
    ['cluster: "" is no restriction', { cluster: '' }, req(), true],
    ['virtualClusters: non-vc request unaffected', { virtualClusters: [{ name: 'v' }] }, req(), true],
    [
      'virtualClusters: name match',
      { virtualClusters: [{ name: 'v' }] },
      req({ target: 'VirtualCluster', virtualCluster: { name: 'v', namespace: 'n' } }),
      true,
    ],
    [
      'virtualClusters: name mismatch',
      { virtualClusters: [{ name: 'v' }] },
      req({ target: 'VirtualCluster', virtualCluster: { name: 'w', namespace: 'n' } }),
      false,
    ],
    [
      'virtualClusters: namespace match',
      { virtualClusters: [{ namespace: 'n' }] },
      req({ target: 'ProjectVirtualCluster', virtualCluster: { name: 'w', namespace: 'n' } }),
      true,
    ],
    [
      'virtualClusters: namespace mismatch',
      { virtualClusters: [{ name: 'v', namespace: 'm' }] },
      req({ target: 'VirtualCluster', virtualCluster: { name: 'v', namespace: 'n' } }),
      false,
    ],
    [
      'virtualClusters: empty entry is wildcard',
      { virtualClusters: [{}] },
      req({ target: 'VirtualCluster', virtualCluster: { name: 'v', namespace: 'n' } }),
      true,
    ],
  ])('%s', (_case, r, request, expected) => {
    expect(rule(r, request)).toBe(expected);
    expect(allowed({ rules: [r] }, request)).toBe(expected);
  });

  it('matches like the Kubernetes helpers on their own', () => {
    expect(nonResourcePathMatches('/anything', '*')).toBe(true);
    expect(
      groupResourcesMatch([{ group: '', resources: [], resourceNames: ['x'] }], req({ name: 'y' })),
    ).toBe(true);
  });
});

// --- properties --------------------------------------------------------------------------

const names = fc.constantFrom('a', 'b', '*');
const targets = fc.constantFrom<RequestTarget>(
  'Management',
  'Cluster',
  'ProjectSpace',
  'ProjectVirtualCluster',
  'VirtualCluster',
);
const scopeRules: fc.Arbitrary<ScopeRule> = fc.record(
  {
    verbs: fc.array(fc.constantFrom('get', 'list', 'delete', '*'), { maxLength: 2 }),
    resources: fc.array(
      fc.record({
        group: fc.constantFrom('', 'apps'),
        resources: fc.array(fc.constantFrom('pods', 'pods/log', 'pods/*', '*', '*/log'), { maxLength: 2 }),
        resourceNames: fc.array(fc.constantFrom('x', 'y'), { maxLength: 1 }),
      }),
      { maxLength: 2 },
    ),
    namespaces: fc.array(fc.constantFrom('', 'default', 'n'), { maxLength: 2 }),
    nonResourceURLs: fc.array(fc.constantFrom('/version', '/apis/*', '*'), { maxLength: 2 }),
    requestTargets: fc.array(
      fc.constantFrom('Management' as const, 'Cluster' as const, 'ProjectSpace' as const),
      { maxLength: 2 },
    ),
    cluster: fc.constantFrom('', 'a', 'b'),
    virtualClusters: fc.array(
      fc.record({ name: fc.constantFrom('', 'a'), namespace: fc.constantFrom('', 'n') }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);
const scopes: fc.Arbitrary<Scope> = fc.record(
  {
    roles: fc.array(
      fc.record(
        {
          role: fc.constantFrom(
            'agent' as const,
            'vcluster' as const,
            'network-peer' as const,
            'platform-cli' as const,
            'platformCLI' as const,
            'runner' as const,
          ),
          projects: fc.array(names, { maxLength: 2 }),
          virtualClusters: fc.array(names, { maxLength: 2 }),
        },
        { requiredKeys: ['role'] },
      ),
      { maxLength: 2 },
    ),
    projects: fc.array(fc.record({ project: names }), { maxLength: 2 }),
    spaces: fc.array(fc.record({ project: names, space: names }), { maxLength: 2 }),
    virtualClusters: fc.array(fc.record({ project: names, virtualCluster: names }), { maxLength: 2 }),
    clusters: fc.array(fc.record({ cluster: names }), { maxLength: 2 }),
    rules: fc.array(scopeRules, { maxLength: 2 }),
    allowPlatformCli: fc.boolean(),
  },
  { requiredKeys: [] },
);
const requests: fc.Arbitrary<RequestAttributes> = fc.record(
  {
    target: targets,
    verb: fc.constantFrom('get', 'list', 'watch', 'create', 'delete'),
    resourceRequest: fc.boolean(),
    apiGroup: fc.constantFrom('', 'apps', MGMT),
    resource: fc.constantFrom('pods', 'projects', 'selves', 'virtualclusterinstances'),
    subresource: fc.constantFrom('', 'log', 'clusters'),
    name: fc.constantFrom('', 'x', 'y'),
    namespace: fc.constantFrom('', 'default', 'n'),
    path: fc.constantFrom('/version', '/apis/apps', '/healthz'),
    cluster: fc.constantFrom('a', 'b'),
    project: fc.constantFrom('a', 'b'),
    space: fc.constantFrom('a', 'b'),
    virtualCluster: fc.record({ name: fc.constantFrom('a', 'b'), namespace: fc.constantFrom('n', 'm') }),
    requiredRole: fc.constantFrom(
      'agent' as const,
      'vcluster' as const,
      'network-peer' as const,
      'platform-cli' as const,
    ),
  },
  {
    requiredKeys: [
      'target',
      'verb',
      'resourceRequest',
      'apiGroup',
      'resource',
      'subresource',
      'name',
      'namespace',
      'path',
    ],
  },
);

describe('checkScope properties', () => {
  it('is never more permissive than no scope (it only ever narrows)', () => {
    fc.assert(
      fc.property(scopes, requests, (scope, request) => {
        expect(checkScope(undefined, request).allowed).toBe(true);
        const decision = checkScope(scope, request);
        if (!decision.allowed) expect(decision.reason.length).toBeGreaterThan(0);
      }),
      { numRuns: 2000 },
    );
  });

  it('denies something once it narrows: a non-empty scope is not the empty scope in disguise', () => {
    const nothing: RequestAttributes = req({
      target: 'Cluster',
      cluster: 'zz',
      verb: 'delete',
      resource: 'secrets',
    });
    fc.assert(
      fc.property(scopes, (scope) => {
        fc.pre(!(scope.rules ?? []).length && !(scope.clusters ?? []).some((c) => c.cluster === '*'));
        const narrows =
          scope.allowPlatformCli === true ||
          [scope.roles, scope.projects, scope.spaces, scope.virtualClusters, scope.clusters].some(
            (l) => (l ?? []).length > 0,
          );
        expect(checkScope(scope, nothing).allowed).toBe(!narrows);
      }),
    );
  });

  it('never removes access when an entry is added to projects, spaces, virtualClusters or clusters of a narrowing scope', () => {
    const additions = fc.oneof(
      fc.record({ field: fc.constant('projects' as const), entry: fc.record({ project: names }) }),
      fc.record({
        field: fc.constant('spaces' as const),
        entry: fc.record({ project: names, space: names }),
      }),
      fc.record({
        field: fc.constant('virtualClusters' as const),
        entry: fc.record({ project: names, virtualCluster: names }),
      }),
      fc.record({ field: fc.constant('clusters' as const), entry: fc.record({ cluster: names }) }),
    );
    fc.assert(
      fc.property(scopes, additions, requests, (scope, addition, request) => {
        const narrowing: Scope = { ...scope, clusters: [...(scope.clusters ?? []), { cluster: 'never' }] };
        const before = checkScope(narrowing, request).allowed;
        const widened = {
          ...narrowing,
          [addition.field]: [...((narrowing[addition.field] as unknown[]) ?? []), addition.entry],
        };
        if (before) expect(checkScope(widened as Scope, request).allowed).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('validateScope', () => {
  const errorsOf = (scope: Scope) => validateScope(scope).errors;

  it('accepts a clean modern scope without warnings', () => {
    expect(
      validateScope({
        roles: [{ role: 'platform-cli' }],
        projects: [{ project: '*' }],
        spaces: [{ project: 'p', space: '*' }],
      }),
    ).toEqual({
      errors: [],
      warnings: [],
    });
    expect(validateScope(undefined)).toEqual({ errors: [], warnings: [] });
  });

  it('warns about deprecated rules and allowPlatformCli', () => {
    expect(validateScope({ rules: [{}], allowPlatformCli: true }).warnings).toHaveLength(2);
  });

  it.each<[string, Scope, string]>([
    ['unknown role', { roles: [{ role: 'root' as never }] }, 'roles[0].role'],
    ['space project *', { spaces: [{ project: '*', space: 's' }] }, 'spaces[0].project'],
    [
      'virtual cluster project *',
      { virtualClusters: [{ project: '*', virtualCluster: 'v' }] },
      'virtualClusters[0].project',
    ],
    [
      'resourceNames without resources',
      { rules: [{ resources: [{ group: '', resourceNames: ['a'] }] }] },
      'rules[0].resources[0].resourceNames',
    ],
    [
      '* with anything',
      { rules: [{ resources: [{ group: '', resources: ['pods', '*'] }] }] },
      'rules[0].resources[0].resources[1]',
    ],
    [
      'r/* with r',
      { rules: [{ resources: [{ group: '', resources: ['pods/*', 'pods'] }] }] },
      'rules[0].resources[0].resources[1]',
    ],
    [
      'r/* with r/s',
      { rules: [{ resources: [{ group: '', resources: ['pods/log', 'pods/*'] }] }] },
      'rules[0].resources[0].resources[1]',
    ],
    [
      '*/s with r/s',
      { rules: [{ resources: [{ group: '', resources: ['*/log', 'pods/log'] }] }] },
      'rules[0].resources[0].resources[1]',
    ],
    [
      '*/s with r/*',
      { rules: [{ resources: [{ group: '', resources: ['pods/*', '*/log'] }] }] },
      'rules[0].resources[0].resources[1]',
    ],
    [
      'malformed wildcard',
      { rules: [{ resources: [{ group: '', resources: ['po*'] }] }] },
      'rules[0].resources[0].resources[0]',
    ],
    [
      '*/*',
      { rules: [{ resources: [{ group: '', resources: ['*/*'] }] }] },
      'rules[0].resources[0].resources[0]',
    ],
    [
      'three parts',
      { rules: [{ resources: [{ group: '', resources: ['a/b/c'] }] }] },
      'rules[0].resources[0].resources[0]',
    ],
    ['partial URL wildcard', { rules: [{ nonResourceURLs: ['/api*'] }] }, 'rules[0].nonResourceURLs[0]'],
    ['inner URL wildcard', { rules: [{ nonResourceURLs: ['/a/*/b'] }] }, 'rules[0].nonResourceURLs[0]'],
    [
      'resources with URLs',
      { rules: [{ namespaces: ['n'], nonResourceURLs: ['/version'] }] },
      'rules[0].nonResourceURLs',
    ],
    ['unknown target', { rules: [{ requestTargets: ['VCluster' as never] }] }, 'rules[0].requestTargets[0]'],
  ])('refuses %s', (_case, scope, path) => {
    expect(errorsOf(scope).map((e) => e.path)).toContain(path);
  });

  it.each<[string, string[]]>([
    ['distinct subresources of *', ['*/log', '*/exec']],
    ['distinct resources with wildcards', ['pods/*', 'deployments/*']],
    ['*/s next to a plain resource', ['*/scale', 'deployments']],
    ['plain entries without wildcards', ['pods', 'pods/log']],
  ])('accepts %s', (_case, resources) => {
    expect(errorsOf({ rules: [{ resources: [{ group: '', resources }] }] })).toEqual([]);
  });

  it('accepts whole-step URL wildcards', () => {
    expect(errorsOf({ rules: [{ nonResourceURLs: ['*', '/*', '/apis/*', '/version'] }] })).toEqual([]);
  });
});

describe('scopeWithin: writing or minting a scope widens nothing', () => {
  test.each([
    ['anything within no scope', { projects: [{ project: 'a' }] }, undefined, true],
    ['no scope is not within a scope', undefined, { projects: [{ project: 'a' }] }, false],
    [
      'a listed project',
      { projects: [{ project: 'a' }] },
      { projects: [{ project: 'a' }, { project: 'b' }] },
      true,
    ],
    ['another project', { projects: [{ project: 'c' }] }, { projects: [{ project: 'a' }] }, false],
    ['* is only within *', { projects: [{ project: '*' }] }, { projects: [{ project: 'a' }] }, false],
    [
      'a space of a listed project',
      { spaces: [{ project: 'a', space: 's' }] },
      { projects: [{ project: 'a' }] },
      true,
    ],
    [
      'a space of another project',
      { spaces: [{ project: 'b', space: 's' }] },
      { spaces: [{ project: 'a', space: '*' }] },
      false,
    ],
    [
      'a virtual cluster under *',
      { virtualClusters: [{ project: 'a', virtualCluster: 'v' }] },
      { virtualClusters: [{ project: 'a', virtualCluster: '*' }] },
      true,
    ],
    ['a cluster', { clusters: [{ cluster: 'x' }] }, { clusters: [{ cluster: 'y' }] }, false],
    [
      'a role with a narrower restriction',
      { roles: [{ role: 'platform-cli', projects: ['a'] }] },
      { roles: [{ role: 'platformCLI' }] },
      true,
    ],
    [
      'a role with a wider restriction',
      { roles: [{ role: 'platform-cli' }] },
      { roles: [{ role: 'platform-cli', projects: ['a'] }] },
      false,
    ],
    [
      'a rule must be there as it is',
      { rules: [{ verbs: ['get'] }] },
      { rules: [{ verbs: ['get', 'list'] }] },
      false,
    ],
    [
      'the same scope',
      { rules: [{ verbs: ['get'] }], clusters: [{ cluster: 'x' }] },
      { rules: [{ verbs: ['get'] }], clusters: [{ cluster: 'x' }] },
      true,
    ],
  ] as const)('%s', (_name, inner, outer, within) => {
    expect(scopeWithin(inner as Scope | undefined, outer as Scope | undefined)).toBe(within);
  });
});

describe('validateScope: every part means something', () => {
  test('roles without a meaning here are refused; the supported ones pass', () => {
    for (const role of ['network-peer', 'runner', 'workspace'] as const) {
      const { errors } = validateScope({ roles: [{ role }] });
      expect(errors).toEqual([{ path: 'roles[0].role', message: expect.stringContaining('opens nothing') }]);
    }
    for (const role of ['platform-cli', 'platformCLI', 'vcluster'] as const) {
      expect(validateScope({ roles: [{ role }] }).errors).toEqual([]);
    }
    expect(validateScope({ roles: [{ role: 'agent' }], clusters: [{ cluster: 'edge' }] })).toEqual({
      errors: [],
      warnings: [],
    });
  });

  test('a wildcard inside a name is refused: names match exactly', () => {
    const { errors } = validateScope({
      projects: [{ project: 'web*' }],
      clusters: [{ cluster: '*' }, { cluster: 'e*ge' }],
      spaces: [{ project: 'web', space: 'p-*' }],
      virtualClusters: [{ project: 'web', virtualCluster: 'dev-*' }],
      roles: [{ role: 'vcluster', virtualClusters: ['d*'] }],
    });
    expect(errors.map((e) => e.path).sort()).toEqual([
      'clusters[1].cluster',
      'projects[0].project',
      'roles[0].virtualClusters[0]',
      'spaces[0].space',
      'virtualClusters[0].virtualCluster',
    ]);
  });

  test('parts that can match nothing are warned about', () => {
    expect(validateScope({ roles: [{ role: 'agent' }] }).warnings).toEqual([
      expect.stringContaining('matches nothing'),
    ]);
    expect(
      validateScope({ rules: [{ cluster: 'edge', requestTargets: ['Management'] }] }).warnings,
    ).toContainEqual(expect.stringContaining('matches nothing'));
  });
});
