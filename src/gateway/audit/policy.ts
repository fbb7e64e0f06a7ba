import {
  type AUDIT_LEVELS,
  type AUDIT_REQUEST_TARGETS,
  AUDIT_STAGES,
  type AuditConfig,
  type AuditPolicy,
  type AuditPolicyRule,
} from '../../api/config-audit.ts';
import { API_GROUP } from '../../api/meta.ts';
import type { RequestAttributes, RequestTarget } from '../../authz/attributes.ts';
import { ruleTargetMatches } from '../../authz/scope.ts';

/**
 * Audit policy evaluation with Kubernetes' semantics
 * (`k8s.io/apiserver/pkg/audit/policy/checker.go`):
 *
 * - rules are tried in order; the first matching rule decides; no match means level `None`;
 * - the policy's `omitStages` are added to every rule's (a set union; returned sorted); with no
 *   match, the policy's own `omitStages` apply;
 * - a rule matches when every set field matches ("empty means all"): `users` (the authenticated
 *   username), `userGroups` (any of the user's groups), `verbs`; then, when `namespaces` or
 *   `resources` is set, only resource requests match, in a listed namespace (`""` is how
 *   cluster-scoped requests are listed, exactly as Kubernetes does) and of a listed resource
 *   (`*`, `r`, `r/s`, `r/*`, `*\/s`, with `resourceNames`); otherwise, when `nonResourceURLs` is
 *   set, only non-resource requests on a listed path match (`*` all, trailing `*` prefix);
 * - platform additions, checked first: `requestTargets` (empty = every target; spelled
 *   `Management`, `Cluster`, `VCluster`, `ProjectSpace`, `ProjectVCluster`) and `clusters` (when
 *   set, only cluster requests, target `Cluster`, to a listed cluster match).
 *
 * `audit.level` (1-4, the established product's levels) stands for a built-in policy:
 * {@link BUILT_IN_AUDIT_RULES} first, then
 * 1 = `create` at `Request`, other modifying verbs at `Metadata`, reads not logged;
 * 2 = as 1, plus every other request at `Metadata`;
 * 3 = every request at `Request`; 4 = every request at `RequestResponse`.
 * A policy with rules replaces the built-in rules and the level (see {@link effectiveAuditPolicy}).
 */

export type AuditLevel = (typeof AUDIT_LEVELS)[number];
export type AuditStage = (typeof AUDIT_STAGES)[number];
export type AuditRequestTarget = (typeof AUDIT_REQUEST_TARGETS)[number];

export interface AuditRequestAttributes extends RequestAttributes {
  /** The authenticated user (for `users`/`userGroups`); absent for unauthenticated requests. */
  readonly user: { readonly name: string; readonly groups: readonly string[] } | undefined;
}

export interface AuditDecision {
  readonly level: AuditLevel;
  /** Stages that produce no event; sorted, without duplicates. */
  readonly omitStages: readonly AuditStage[];
}

/** An `audit.level` outside 1-4 (or not an integer). */
export class InvalidAuditLevel extends Error {
  override readonly name = 'InvalidAuditLevel';
  constructor(level: number) {
    super(`audit level ${level} is not one of 1, 2, 3, 4`);
  }
}

const TARGETS: Readonly<Record<RequestTarget, AuditRequestTarget>> = {
  Management: 'Management',
  Cluster: 'Cluster',
  VirtualCluster: 'VCluster',
  ProjectSpace: 'ProjectSpace',
  ProjectVirtualCluster: 'ProjectVCluster',
};

/** The audit policy's spelling of a request target. */
export function auditRequestTarget(target: RequestTarget): AuditRequestTarget {
  return TARGETS[target];
}

const MODIFYING_VERBS = ['update', 'patch', 'delete', 'deletecollection'];

/**
 * Rules that precede every `level` policy. From the established product: never log access
 * reviews, agent/license/ingress token traffic, `selves`, direct cluster endpoint tokens and
 * kubeconfig retrieval (their responses are credentials); only metadata for creating access
 * keys, shared secrets, clusters, user profiles and snapshot credentials, and for long-running
 * log/exec/port-forward streams. Our addition: only metadata, at every verb, for objects whose
 * bodies are secrets (core `secrets`, `configs`, token reviews, service account tokens), since
 * nothing secret may reach a log.
 */
export const BUILT_IN_AUDIT_RULES: readonly AuditPolicyRule[] = Object.freeze([
  {
    level: 'None',
    resources: [
      { group: 'authorization.k8s.io', resources: ['selfsubjectaccessreviews', 'subjectaccessreviews'] },
      {
        group: API_GROUP,
        resources: [
          'selfsubjectaccessreviews',
          'subjectaccessreviews',
          'agentauditevents',
          'licensetokens',
          'directclusterendpointtokens',
          'ingressauthtokens',
          'selves',
          'virtualclusterinstances/kubeconfig',
        ],
      },
    ],
  },
  {
    level: 'Metadata',
    verbs: ['create'],
    resources: [
      {
        group: API_GROUP,
        resources: [
          'ownedaccesskeys',
          'resetaccesskeys',
          'sharedsecrets',
          'clusters',
          'users/profile',
          'virtualclusterinstances/snapshotcredentials',
        ],
      },
    ],
  },
  {
    level: 'Metadata',
    resources: [
      {
        group: '',
        resources: ['pods/log', 'pods/exec', 'pods/portforward', 'secrets', 'serviceaccounts/token'],
      },
      { group: 'authentication.k8s.io', resources: ['tokenreviews'] },
      { group: API_GROUP, resources: ['virtualclusterinstances/log', 'appinstances/log', 'configs'] },
    ],
  },
]);

/** The policy `audit.level` stands for; throws {@link InvalidAuditLevel} outside 1-4. */
export function auditPolicyForLevel(level: number): AuditPolicy {
  if (!Number.isInteger(level) || level < 1 || level > 4) throw new InvalidAuditLevel(level);
  const levelRules: AuditPolicyRule[] =
    level === 1
      ? [
          { level: 'Request', verbs: ['create'] },
          { level: 'Metadata', verbs: MODIFYING_VERBS },
        ]
      : level === 2
        ? [{ level: 'Request', verbs: ['create'] }, { level: 'Metadata' }]
        : [{ level: level === 3 ? 'Request' : 'RequestResponse' }];
  return { rules: [...BUILT_IN_AUDIT_RULES, ...levelRules] };
}

/**
 * The policy an audit config means: its `policy` when that has rules (the built-in rules and
 * `level` are then ignored); otherwise the `level` policy, keeping `policy.omitStages`; otherwise
 * a policy that logs nothing. Throws {@link InvalidAuditLevel}; call once per config change.
 */
export function effectiveAuditPolicy(audit: Pick<AuditConfig, 'level' | 'policy'>): AuditPolicy {
  const { policy, level } = audit;
  if (policy?.rules && policy.rules.length > 0) return policy;
  const omitStages = policy?.omitStages;
  const base = level === undefined ? { rules: [] } : auditPolicyForLevel(level);
  return omitStages === undefined ? base : { ...base, omitStages };
}

const nonEmpty = <T>(list: readonly T[] | undefined): list is readonly T[] =>
  list !== undefined && list.length > 0;

/** Whether one audit rule matches the request (see the module comment). */
export function auditRuleMatches(rule: AuditPolicyRule, request: AuditRequestAttributes): boolean {
  if (nonEmpty(rule.requestTargets) && !rule.requestTargets.includes(auditRequestTarget(request.target)))
    return false;
  if (nonEmpty(rule.clusters)) {
    if (
      request.target !== 'Cluster' ||
      request.cluster === undefined ||
      !rule.clusters.includes(request.cluster)
    ) {
      return false;
    }
  }
  const { user } = request;
  if (nonEmpty(rule.users) && (user === undefined || !rule.users.includes(user.name))) return false;
  if (nonEmpty(rule.userGroups)) {
    const groups = rule.userGroups;
    if (user === undefined || !user.groups.some((group) => groups.includes(group))) return false;
  }
  if (nonEmpty(rule.verbs) && !rule.verbs.includes(request.verb)) return false;
  return ruleTargetMatches(rule, request);
}

const sortedStages = (...lists: (readonly AuditStage[] | undefined)[]): AuditStage[] =>
  AUDIT_STAGES.filter((stage) => lists.some((list) => list?.includes(stage)));

/**
 * The audit level and omitted stages for a request. `policyOrLevel` is a policy (use
 * {@link effectiveAuditPolicy} for a config) or an `audit.level` (1-4).
 */
export function auditLevelFor(
  policyOrLevel: AuditPolicy | number,
  request: AuditRequestAttributes,
): AuditDecision {
  const policy = typeof policyOrLevel === 'number' ? auditPolicyForLevel(policyOrLevel) : policyOrLevel;
  for (const rule of policy.rules ?? []) {
    if (auditRuleMatches(rule, request)) {
      return { level: rule.level, omitStages: sortedStages(policy.omitStages, rule.omitStages) };
    }
  }
  return { level: 'None', omitStages: sortedStages(policy.omitStages) };
}
