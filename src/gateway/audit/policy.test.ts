import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AuditPolicy, AuditPolicyRule } from '../../api/config-audit.ts';
import type { RequestTarget } from '../../authz/attributes.ts';
import {
  type AuditDecision,
  type AuditRequestAttributes,
  auditLevelFor,
  auditRuleMatches,
  effectiveAuditPolicy,
  InvalidAuditLevel,
} from './policy.ts';

function req(overrides: Partial<AuditRequestAttributes> = {}): AuditRequestAttributes {
  return {
    target: 'Management',
    verb: 'get',
    resourceRequest: true,
    apiGroup: '',
    resource: 'pods',
    subresource: '',
    name: 'x',
    namespace: 'default',
    path: '/api/v1/namespaces/default/pods/x',
    user: { name: 'alice', groups: ['platform:authenticated', 'devs'] },
    ...overrides,
  };
}
const nonResource = (path: string, overrides: Partial<AuditRequestAttributes> = {}) =>
  req({ resourceRequest: false, resource: '', name: '', namespace: '', path, ...overrides });

/**
 * Reference model, written from the Kubernetes checker's rules as plainly as possible: every
 * field is a filter, each resource pattern is turned into the list of request resources it
 * accepts, and nothing is shared with the implementation.
 */
function modelDecision(policy: AuditPolicy, r: AuditRequestAttributes): AuditDecision {
  const allStages = ['RequestReceived', 'ResponseStarted', 'ResponseComplete', 'Panic'] as const;
  const targetName: Record<RequestTarget, string> = {
    Management: 'Management',
    Cluster: 'Cluster',
    VirtualCluster: 'VCluster',
    ProjectSpace: 'ProjectSpace',
    ProjectVirtualCluster: 'ProjectVCluster',
  };
  const resourceAccepts = (pattern: string): boolean => {
    const full = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
    if (pattern === '*') return true;
    if (pattern === full) return true;
    const [left, right] = pattern.split('/');
    if (left === '*' && right !== undefined && r.subresource !== '' && right === r.subresource) return true;
    if (right === '*' && left === r.resource) return true;
    return false;
  };
  const pathAccepts = (spec: string): boolean => {
    if (spec === '*' || spec === r.path) return true;
    if (!spec.endsWith('*')) return false;
    let prefix = spec;
    while (prefix.endsWith('*')) prefix = prefix.slice(0, -1);
    return r.path.startsWith(prefix);
  };
  const matches = (rule: AuditPolicyRule): boolean => {
    const has = (list: readonly unknown[] | undefined) => (list ?? []).length > 0;
    if (has(rule.requestTargets) && !rule.requestTargets!.includes(targetName[r.target] as never))
      return false;
    if (has(rule.clusters) && !(r.target === 'Cluster' && rule.clusters!.includes(r.cluster ?? '\u0000')))
      return false;
    if (has(rule.users) && !(r.user && rule.users!.includes(r.user.name))) return false;
    if (has(rule.userGroups) && !r.user?.groups.some((g) => rule.userGroups!.includes(g))) return false;
    if (has(rule.verbs) && !rule.verbs!.includes(r.verb)) return false;
    const resourceRule = has(rule.namespaces) || has(rule.resources);
    if (resourceRule) {
      if (!r.resourceRequest) return false;
      if (has(rule.namespaces) && !rule.namespaces!.includes(r.namespace)) return false;
      if (!has(rule.resources)) return true;
      for (const gr of rule.resources!) {
        if ((gr.group ?? '') !== r.apiGroup) continue;
        if (!has(gr.resources)) return true;
        if (has(gr.resourceNames) && !gr.resourceNames!.includes(r.name)) continue;
        if (gr.resources!.some(resourceAccepts)) return true;
      }
      return false;
    }
    if (has(rule.nonResourceURLs)) return !r.resourceRequest && rule.nonResourceURLs!.some(pathAccepts);
    return true;
  };
  for (const rule of policy.rules ?? []) {
    if (matches(rule)) {
      const omitted = new Set([...(policy.omitStages ?? []), ...(rule.omitStages ?? [])]);
      return { level: rule.level, omitStages: allStages.filter((s) => omitted.has(s)) };
    }
  }
  const omitted = new Set(policy.omitStages ?? []);
  return { level: 'None', omitStages: allStages.filter((s) => omitted.has(s)) };
}

describe('auditRuleMatches', () => {
  it.each<[string, AuditPolicyRule, AuditRequestAttributes, boolean]>([
    ['empty rule', { level: 'Metadata' }, nonResource('/x'), true],
    ['users listed', { level: 'Metadata', users: ['alice'] }, req(), true],
    ['users not listed', { level: 'Metadata', users: ['bob'] }, req(), false],
    ['users without a user', { level: 'Metadata', users: ['alice'] }, req({ user: undefined }), false],
    ['userGroups any', { level: 'Metadata', userGroups: ['devs', 'x'] }, req(), true],
    ['userGroups none', { level: 'Metadata', userGroups: ['ops'] }, req(), false],
    ['verbs', { level: 'Metadata', verbs: ['get'] }, req(), true],
    ['verbs mismatch', { level: 'Metadata', verbs: ['list'] }, req(), false],
    ['namespaces', { level: 'Metadata', namespaces: ['default'] }, req(), true],
    [
      'namespaces "" = cluster-scoped',
      { level: 'Metadata', namespaces: [''] },
      req({ resource: 'nodes', namespace: '' }),
      true,
    ],
    ['namespaces "" not namespaced', { level: 'Metadata', namespaces: [''] }, req(), false],
    [
      'namespaces never non-resource',
      { level: 'Metadata', namespaces: [''] },
      nonResource('/version'),
      false,
    ],
    ['resources group only', { level: 'Metadata', resources: [{ group: '' }] }, req(), true],
    ['resources other group', { level: 'Metadata', resources: [{ group: 'apps' }] }, req(), false],
    ['resource exact', { level: 'Metadata', resources: [{ resources: ['pods'] }] }, req(), true],
    [
      'resource exact not subresource',
      { level: 'Metadata', resources: [{ resources: ['pods'] }] },
      req({ subresource: 'log' }),
      false,
    ],
    [
      'resource/sub',
      { level: 'Metadata', resources: [{ resources: ['pods/log'] }] },
      req({ subresource: 'log' }),
      true,
    ],
    [
      'resource/*',
      { level: 'Metadata', resources: [{ resources: ['pods/*'] }] },
      req({ subresource: 'exec' }),
      true,
    ],
    [
      'resource/* covers resource',
      { level: 'Metadata', resources: [{ resources: ['pods/*'] }] },
      req(),
      true,
    ],
    [
      '*/sub',
      { level: 'Metadata', resources: [{ resources: ['*/log'] }] },
      req({ subresource: 'log' }),
      true,
    ],
    ['*/sub not resource', { level: 'Metadata', resources: [{ resources: ['*/log'] }] }, req(), false],
    [
      'resourceNames',
      { level: 'Metadata', resources: [{ resources: ['pods'], resourceNames: ['x'] }] },
      req(),
      true,
    ],
    [
      'resourceNames mismatch',
      { level: 'Metadata', resources: [{ resources: ['pods'], resourceNames: ['y'] }] },
      req(),
      false,
    ],
    [
      'nonResourceURLs exact',
      { level: 'Metadata', nonResourceURLs: ['/version'] },
      nonResource('/version'),
      true,
    ],
    [
      'nonResourceURLs prefix',
      { level: 'Metadata', nonResourceURLs: ['/healthz*'] },
      nonResource('/healthz/etcd'),
      true,
    ],
    ['nonResourceURLs never resource', { level: 'Metadata', nonResourceURLs: ['*'] }, req(), false],
    [
      'requestTargets',
      { level: 'Metadata', requestTargets: ['VCluster'] },
      req({ target: 'VirtualCluster' }),
      true,
    ],
    [
      'requestTargets mismatch',
      { level: 'Metadata', requestTargets: ['ProjectVCluster'] },
      req({ target: 'VirtualCluster' }),
      false,
    ],
    ['clusters', { level: 'Metadata', clusters: ['c1'] }, req({ target: 'Cluster', cluster: 'c1' }), true],
    [
      'clusters other',
      { level: 'Metadata', clusters: ['c1'] },
      req({ target: 'Cluster', cluster: 'c2' }),
      false,
    ],
    ['clusters non-cluster request', { level: 'Metadata', clusters: ['c1'] }, req({ cluster: 'c1' }), false],
  ])('%s', (_case, rule, request, expected) => {
    expect(auditRuleMatches(rule, request)).toBe(expected);
    expect(modelDecision({ rules: [rule] }, request).level !== 'None').toBe(expected);
  });
});

describe('auditLevelFor', () => {
  it('takes the first matching rule and unions omitStages', () => {
    const policy: AuditPolicy = {
      omitStages: ['RequestReceived'],
      rules: [
        { level: 'None', users: ['bob'] },
        { level: 'RequestResponse', verbs: ['get'], omitStages: ['Panic', 'RequestReceived'] },
        { level: 'Metadata' },
      ],
    };
    expect(auditLevelFor(policy, req())).toEqual({
      level: 'RequestResponse',
      omitStages: ['RequestReceived', 'Panic'],
    });
    expect(auditLevelFor(policy, req({ verb: 'list' }))).toEqual({
      level: 'Metadata',
      omitStages: ['RequestReceived'],
    });
  });

  it('defaults to None with the policy stages', () => {
    expect(auditLevelFor({ omitStages: ['Panic'] }, req())).toEqual({ level: 'None', omitStages: ['Panic'] });
  });

  const mgmt = (verb: string, resource: string, subresource = '') =>
    req({ verb, apiGroup: 'management.platform', resource, subresource, namespace: '' });
  it.each<[number, AuditRequestAttributes, string]>([
    [1, req({ verb: 'create' }), 'Request'],
    [1, req({ verb: 'delete' }), 'Metadata'],
    [1, req({ verb: 'get' }), 'None'],
    [2, req({ verb: 'get' }), 'Metadata'],
    [2, req({ verb: 'create' }), 'Request'],
    [3, req({ verb: 'get' }), 'Request'],
    [4, req({ verb: 'get' }), 'RequestResponse'],
    [4, mgmt('create', 'virtualclusterinstances', 'kubeconfig'), 'None'],
    [4, mgmt('create', 'selves'), 'None'],
    [
      4,
      req({
        verb: 'create',
        apiGroup: 'authorization.k8s.io',
        resource: 'subjectaccessreviews',
        namespace: '',
      }),
      'None',
    ],
    [4, mgmt('create', 'ownedaccesskeys'), 'Metadata'],
    [4, mgmt('update', 'ownedaccesskeys'), 'RequestResponse'],
    [4, req({ verb: 'get', resource: 'secrets' }), 'Metadata'],
    [4, mgmt('create', 'configs'), 'Metadata'],
    [1, req({ verb: 'get', subresource: 'log' }), 'Metadata'],
  ])('level %i: %o -> %s', (level, request, expected) => {
    expect(auditLevelFor(level, request).level).toBe(expected);
  });

  it.each([0, 5, 1.5])('refuses level %d', (level) => {
    expect(() => auditLevelFor(level, req())).toThrow(InvalidAuditLevel);
  });
});

describe('effectiveAuditPolicy', () => {
  it('uses custom rules and ignores level; empty rules fall back to the level; nothing set logs nothing', () => {
    const custom = { rules: [{ level: 'Metadata' as const }] };
    expect(effectiveAuditPolicy({ policy: custom, level: 4 })).toBe(custom);
    expect(
      auditLevelFor(effectiveAuditPolicy({ policy: { rules: [], omitStages: ['Panic'] }, level: 3 }), req()),
    ).toEqual({
      level: 'Request',
      omitStages: ['Panic'],
    });
    expect(auditLevelFor(effectiveAuditPolicy({}), req({ verb: 'delete' })).level).toBe('None');
  });
});

// --- property: implementation equals the model --------------------------------------------

const stages = fc.array(
  fc.constantFrom(
    'RequestReceived' as const,
    'ResponseStarted' as const,
    'ResponseComplete' as const,
    'Panic' as const,
  ),
  {
    maxLength: 2,
  },
);
const rules: fc.Arbitrary<AuditPolicyRule> = fc.record(
  {
    level: fc.constantFrom(
      'None' as const,
      'Metadata' as const,
      'Request' as const,
      'RequestResponse' as const,
    ),
    users: fc.array(fc.constantFrom('alice', 'bob'), { maxLength: 2 }),
    userGroups: fc.array(fc.constantFrom('devs', 'ops'), { maxLength: 2 }),
    verbs: fc.array(fc.constantFrom('get', 'list', 'create'), { maxLength: 2 }),
    resources: fc.array(
      fc.record(
        {
          group: fc.constantFrom('', 'apps'),
          resources: fc.array(
            fc.constantFrom('pods', 'pods/log', 'pods/*', '*', '*/log', '*/scale', 'deployments/scale'),
            { maxLength: 3 },
          ),
          resourceNames: fc.array(fc.constantFrom('x', 'y'), { maxLength: 2 }),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 2 },
    ),
    namespaces: fc.array(fc.constantFrom('', 'default', 'kube-system'), { maxLength: 2 }),
    nonResourceURLs: fc.array(fc.constantFrom('*', '/version', '/healthz*', '/apis/*', '/api'), {
      maxLength: 2,
    }),
    omitStages: stages,
    requestTargets: fc.array(
      fc.constantFrom(
        'Management' as const,
        'Cluster' as const,
        'VCluster' as const,
        'ProjectSpace' as const,
        'ProjectVCluster' as const,
      ),
      { maxLength: 2 },
    ),
    clusters: fc.array(fc.constantFrom('c1', 'c2'), { maxLength: 2 }),
  },
  { requiredKeys: ['level'] },
);
const policies: fc.Arbitrary<AuditPolicy> = fc.record(
  { rules: fc.array(rules, { maxLength: 5 }), omitStages: stages },
  { requiredKeys: [] },
);
const requests: fc.Arbitrary<AuditRequestAttributes> = fc.record(
  {
    target: fc.constantFrom<RequestTarget>(
      'Management',
      'Cluster',
      'ProjectSpace',
      'ProjectVirtualCluster',
      'VirtualCluster',
    ),
    verb: fc.constantFrom('get', 'list', 'create'),
    resourceRequest: fc.boolean(),
    apiGroup: fc.constantFrom('', 'apps'),
    resource: fc.constantFrom('pods', 'deployments'),
    subresource: fc.constantFrom('', 'log', 'scale'),
    name: fc.constantFrom('', 'x', 'y'),
    namespace: fc.constantFrom('', 'default', 'kube-system'),
    path: fc.constantFrom('/version', '/healthz', '/healthz/etcd', '/apis', '/apis/apps', '/api'),
    cluster: fc.constantFrom('c1', 'c2'),
    user: fc.option(
      fc.record({
        name: fc.constantFrom('alice', 'bob'),
        groups: fc.array(fc.constantFrom('devs', 'ops'), { maxLength: 2 }),
      }),
      { nil: undefined },
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
      'user',
    ],
  },
);

describe('auditLevelFor property', () => {
  it('equals the reference model for generated policies and requests', () => {
    fc.assert(
      fc.property(policies, requests, (policy, request) => {
        expect(auditLevelFor(policy, request)).toEqual(modelDecision(policy, request));
      }),
      { numRuns: 5000 },
    );
  });
});
