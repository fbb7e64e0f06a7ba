import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { AuditPolicy, AuditPolicyRule } from '../../api/config-audit.ts';
import { AUDIT_LEVELS, AUDIT_REQUEST_TARGETS, AUDIT_STAGES } from '../../api/config-audit.ts';
import type { RequestTarget } from '../../authz/attributes.ts';
import { type AuditRequestAttributes, auditLevelFor } from './policy.ts';

/**
 * A reference model of Kubernetes' audit policy checker, transcribed line by line from
 * `k8s.io/apiserver/pkg/audit/policy/checker.go` (ruleMatches, ruleMatchesResource,
 * ruleMatchesNonResource, pathMatches, unionStages), plus the platform's `requestTargets` and
 * `clusters`, and a property test of `auditLevelFor` against it over thousands of generated
 * policies and requests.
 */

const hasString = (list: readonly string[], value: string) => list.includes(value);

function pathMatches(path: string, spec: string): boolean {
  if (spec === '*') return true;
  if (spec === path) return true;
  if (spec.endsWith('*') && path.startsWith(spec.replace(/\*+$/, ''))) return true;
  return false;
}

function ruleMatchesResource(r: AuditPolicyRule, a: AuditRequestAttributes): boolean {
  if (!a.resourceRequest) return false;
  if ((r.namespaces ?? []).length > 0 && !hasString(r.namespaces ?? [], a.namespace)) return false;
  if ((r.resources ?? []).length === 0) return true;
  const combined = a.subresource !== '' ? `${a.resource}/${a.subresource}` : a.resource;
  for (const gr of r.resources ?? []) {
    if ((gr.group ?? '') === a.apiGroup) {
      if ((gr.resources ?? []).length === 0) return true;
      for (const res of gr.resources ?? []) {
        if ((gr.resourceNames ?? []).length === 0 || hasString(gr.resourceNames ?? [], a.name)) {
          if (res === combined || res === '*') return true;
          if (a.subresource.length > 0 && res.startsWith('*/') && a.subresource === res.slice(2)) return true;
          if (res.endsWith('/*') && a.resource === res.slice(0, -2)) return true;
        }
      }
    }
  }
  return false;
}

function ruleMatchesNonResource(r: AuditPolicyRule, a: AuditRequestAttributes): boolean {
  if (a.resourceRequest) return false;
  return (r.nonResourceURLs ?? []).some((spec) => pathMatches(a.path, spec));
}

const TARGET_SPELLING: Record<RequestTarget, string> = {
  Management: 'Management',
  Cluster: 'Cluster',
  VirtualCluster: 'VCluster',
  ProjectSpace: 'ProjectSpace',
  ProjectVirtualCluster: 'ProjectVCluster',
};

function ruleMatches(r: AuditPolicyRule, a: AuditRequestAttributes): boolean {
  // Platform additions.
  if ((r.requestTargets ?? []).length > 0 && !hasString(r.requestTargets ?? [], TARGET_SPELLING[a.target]))
    return false;
  if (
    (r.clusters ?? []).length > 0 &&
    !(a.target === 'Cluster' && a.cluster !== undefined && hasString(r.clusters ?? [], a.cluster))
  )
    return false;
  // checker.go ruleMatches.
  const user = a.user;
  if ((r.users ?? []).length > 0) {
    if (user === undefined || !hasString(r.users ?? [], user.name)) return false;
  }
  if ((r.userGroups ?? []).length > 0) {
    if (user === undefined) return false;
    let matched = false;
    for (const group of user.groups) {
      if (hasString(r.userGroups ?? [], group)) {
        matched = true;
        break;
      }
    }
    if (!matched) return false;
  }
  if ((r.verbs ?? []).length > 0 && !hasString(r.verbs ?? [], a.verb)) return false;
  if ((r.namespaces ?? []).length > 0 || (r.resources ?? []).length > 0) return ruleMatchesResource(r, a);
  if ((r.nonResourceURLs ?? []).length > 0) return ruleMatchesNonResource(r, a);
  return true;
}

function unionStages(...lists: (readonly string[] | undefined)[]): string[] {
  const set = new Set<string>();
  for (const list of lists) for (const stage of list ?? []) set.add(stage);
  return [...set].sort();
}

function referenceLevel(
  policy: AuditPolicy,
  a: AuditRequestAttributes,
): { level: string; omitStages: string[] } {
  for (const rule of policy.rules ?? []) {
    if (ruleMatches(rule, a))
      return { level: rule.level, omitStages: unionStages(policy.omitStages, rule.omitStages) };
  }
  return { level: 'None', omitStages: unionStages(policy.omitStages) };
}

// Small pools so that matches and mismatches both happen often.
const users = ['alice', 'bob', 'system:admin'];
const groups = ['devs', 'ops', 'platform:admins', 'system:authenticated'];
const verbs = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
const apiGroups = ['', 'apps', 'management.platform'];
const resources = ['pods', 'secrets', 'sharedsecrets', 'ownedaccesskeys'];
const subresources = ['', 'status', 'log'];
const namespaces = ['', 'default', 'team-a'];
const names = ['', 'x', 'y'];
const paths = ['/version', '/healthz', '/healthz/ready', '/apis', '/apis/management.platform', '/metrics'];
const clusters = ['edge', 'core'];
const targets: RequestTarget[] = [
  'Management',
  'Cluster',
  'VirtualCluster',
  'ProjectSpace',
  'ProjectVirtualCluster',
];

const maybeList = <T>(arb: fc.Arbitrary<T>) => fc.option(fc.array(arb, { maxLength: 3 }), { nil: undefined });
const resourcePattern = fc.oneof(
  fc.constantFrom(...resources),
  fc.constant('*'),
  fc.constantFrom(...resources).map((r) => `${r}/*`),
  fc.constantFrom('status', 'log').map((s) => `*/${s}`),
  fc.tuple(fc.constantFrom(...resources), fc.constantFrom('status', 'log')).map(([r, s]) => `${r}/${s}`),
);

const ruleArb: fc.Arbitrary<AuditPolicyRule> = fc
  .record(
    {
      level: fc.constantFrom(...AUDIT_LEVELS),
      users: maybeList(fc.constantFrom(...users)),
      userGroups: maybeList(fc.constantFrom(...groups)),
      verbs: maybeList(fc.constantFrom(...verbs)),
      resources: maybeList(
        fc.record(
          {
            group: fc.constantFrom(...apiGroups),
            resources: maybeList(resourcePattern),
            resourceNames: maybeList(fc.constantFrom('x', 'y')),
          },
          { requiredKeys: ['group'] },
        ),
      ),
      namespaces: maybeList(fc.constantFrom(...namespaces)),
      nonResourceURLs: maybeList(fc.constantFrom('*', '/version', '/healthz*', '/apis/*', '/metrics')),
      omitStages: maybeList(fc.constantFrom(...AUDIT_STAGES)),
      requestTargets: maybeList(fc.constantFrom(...AUDIT_REQUEST_TARGETS)),
      clusters: maybeList(fc.constantFrom(...clusters)),
    },
    { requiredKeys: ['level'] },
  )
  .map(
    (rule) => Object.fromEntries(Object.entries(rule).filter(([, v]) => v !== undefined)) as AuditPolicyRule,
  );

const policyArb: fc.Arbitrary<AuditPolicy> = fc
  .record({
    rules: fc.array(ruleArb, { maxLength: 6 }),
    omitStages: maybeList(fc.constantFrom(...AUDIT_STAGES)),
  })
  .map((policy) => (policy.omitStages === undefined ? { rules: policy.rules } : (policy as AuditPolicy)));

const requestArb: fc.Arbitrary<AuditRequestAttributes> = fc
  .record({
    resourceRequest: fc.boolean(),
    verb: fc.constantFrom(...verbs),
    apiGroup: fc.constantFrom(...apiGroups),
    resource: fc.constantFrom(...resources),
    subresource: fc.constantFrom(...subresources),
    name: fc.constantFrom(...names),
    namespace: fc.constantFrom(...namespaces),
    path: fc.constantFrom(...paths),
    target: fc.constantFrom(...targets),
    cluster: fc.option(fc.constantFrom(...clusters), { nil: undefined }),
    user: fc.option(fc.record({ name: fc.constantFrom(...users), groups: fc.subarray(groups) }), {
      nil: undefined,
    }),
  })
  .map((r) =>
    r.resourceRequest
      ? { ...r, path: '' }
      : { ...r, apiGroup: '', resource: '', subresource: '', name: '', namespace: '' },
  );

describe('auditLevelFor against a reference model of the Kubernetes policy checker', () => {
  test('same level and omitted stages for thousands of policies and requests', () => {
    fc.assert(
      fc.property(policyArb, requestArb, (policy, request) => {
        const actual = auditLevelFor(policy, request);
        const expected = referenceLevel(policy, request);
        expect({ level: actual.level, omitStages: [...actual.omitStages].sort() }).toEqual(expected);
      }),
      { numRuns: 5000 },
    );
  });

  test('the first matching rule wins; no match is None with the policy stages', () => {
    const request: AuditRequestAttributes = {
      target: 'Management',
      verb: 'get',
      resourceRequest: true,
      apiGroup: 'management.platform',
      resource: 'sharedsecrets',
      subresource: '',
      name: 'x',
      namespace: 'default',
      path: '',
      user: { name: 'alice', groups: ['devs'] },
    };
    expect(
      auditLevelFor(
        {
          rules: [
            { level: 'Request', users: ['alice'], omitStages: ['RequestReceived'] },
            { level: 'Metadata' },
          ],
          omitStages: ['Panic'],
        },
        request,
      ),
    ).toEqual({ level: 'Request', omitStages: ['RequestReceived', 'Panic'] });
    expect(
      auditLevelFor({ rules: [{ level: 'Request', users: ['bob'] }], omitStages: ['Panic'] }, request),
    ).toEqual({
      level: 'None',
      omitStages: ['Panic'],
    });
  });
});
