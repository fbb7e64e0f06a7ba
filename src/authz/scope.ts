import { API_GROUP } from '../api/meta.ts';
import {
  type CanonicalScopeRoleName,
  canonicalScopeRole,
  SCOPE_ROLE_NAMES,
  type Scope,
  type ScopeRoleName,
  type ScopeRule,
} from '../api/scope.ts';
import type { RequestAttributes } from './attributes.ts';

/**
 * Access-key scopes.
 *
 * A scope only narrows: the gateway authorizes a request when Kubernetes RBAC allows the key's
 * identity to make it AND {@link checkScope} does not deny it. So the decision here is only ever
 * "not narrowed" (`allowed: true`, meaning "RBAC decides") or "denied".
 *
 * An absent or empty scope (no roles, projects, spaces, virtual clusters, clusters or rules, and
 * `allowPlatformCli` not true) does not narrow. A non-empty scope allows a request when at least
 * one of its parts allows it (the parts are a union of grants):
 *
 * - `roles` (and the deprecated `allowPlatformCli`, which is the role `platform-cli`):
 *   - a request to a platform-internal endpoint carries `requiredRole`; the scope allows it when
 *     it holds that role, where `vcluster`, `agent` and `runner` imply `network-peer`
 *     (the established product's `ContainsRole`), and only through a role: projects, spaces,
 *     clusters and rules never open such an endpoint;
 *   - `platform-cli` (also spelled `platformCLI`) allows the read-only management requests a
 *     command-line client needs: {@link PLATFORM_CLI_RESOURCE_REQUESTS} and
 *     {@link PLATFORM_CLI_NON_RESOURCE_PATHS}. Minting credentials
 *     (`directclusterendpointtokens`, `virtualclusterinstances/kubeconfig`) is not in the set: a
 *     key gets it through a `projects`/`virtualClusters` entry that covers the virtual cluster;
 *   - a role entry's `projects` / `virtualClusters`, when non-empty, restrict the requests that
 *     concern a project / virtual cluster to the listed ones (`*` lists all); requests that
 *     concern none are not restricted by them.
 * - `projects`: any request concerning a listed project (its spaces, virtual clusters and
 *   management objects), `*` for every project.
 * - `spaces`: requests concerning that space of that project; `space: '*'` for every space of it.
 * - `virtualClusters`: requests concerning that virtual cluster of that project; `*` for all of it.
 * - `clusters`: requests concerning that connected cluster (its API and its management object);
 *   `*` for every cluster.
 * - `rules` (deprecated): a rule matches like a Kubernetes audit policy rule (users aside), plus
 *   `requestTargets`, `cluster` and `virtualClusters`; see {@link scopeRuleMatches}.
 *
 * Which project, space, virtual cluster or cluster a request concerns is the gateway's routing
 * decision ({@link RequestAttributes}); this module never guesses it from names.
 */

type ScopeDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

const NOT_NARROWED: ScopeDecision = Object.freeze({ allowed: true });

/** One kind of management request a command-line client makes. */
interface ManagementRequestPattern {
  readonly verbs: readonly string[];
  readonly resource: string;
  /** Empty for the resource itself. */
  readonly subresource: string;
}

const READ_VERBS = ['get', 'list', 'watch'] as const;

/**
 * The management requests (target `Management`, group `management.platform`) the role
 * `platform-cli` allows: what the command-line client needs to log in, introspect the key and
 * find projects, clusters, spaces and virtual clusters. All are reads, except `create selves`,
 * which only describes the caller's own identity and stores nothing.
 */
const PLATFORM_CLI_RESOURCE_REQUESTS: readonly ManagementRequestPattern[] = Object.freeze([
  { verbs: ['create'], resource: 'selves', subresource: '' },
  { verbs: READ_VERBS, resource: 'projects', subresource: '' },
  { verbs: ['get'], resource: 'projects', subresource: 'clusters' },
  { verbs: ['get'], resource: 'projects', subresource: 'templates' },
  { verbs: READ_VERBS, resource: 'clusters', subresource: '' },
  { verbs: READ_VERBS, resource: 'spaceinstances', subresource: '' },
  { verbs: READ_VERBS, resource: 'virtualclusterinstances', subresource: '' },
]);

/** The non-resource management paths (verb `get`) the role `platform-cli` allows: version and discovery. */
const PLATFORM_CLI_NON_RESOURCE_PATHS: readonly string[] = Object.freeze([
  '/version',
  '/api',
  '/apis',
  `/apis/${API_GROUP}`,
  `/apis/${API_GROUP}/v1`,
  '/openapi/v2',
  '/openapi/v3',
  `/openapi/v3/apis/${API_GROUP}/v1`,
]);

/** Whether the role `platform-cli` covers this request (before any project restriction). */
function isPlatformCliRequest(request: RequestAttributes): boolean {
  if (request.target !== 'Management') return false;
  if (!request.resourceRequest)
    return request.verb === 'get' && PLATFORM_CLI_NON_RESOURCE_PATHS.includes(request.path);
  if (request.apiGroup !== API_GROUP) return false;
  return PLATFORM_CLI_RESOURCE_REQUESTS.some(
    (pattern) =>
      pattern.resource === request.resource &&
      pattern.subresource === request.subresource &&
      pattern.verbs.includes(request.verb),
  );
}

export const nonEmpty = <T>(list: readonly T[] | undefined): list is readonly T[] =>
  list !== undefined && list.length > 0;

/** Whether the scope narrows at all; an absent or empty scope does not. */
export function scopeNarrows(scope: Scope | undefined): boolean {
  if (!scope) return false;
  return (
    scope.allowPlatformCli === true ||
    nonEmpty(scope.roles) ||
    nonEmpty(scope.projects) ||
    nonEmpty(scope.spaces) ||
    nonEmpty(scope.virtualClusters) ||
    nonEmpty(scope.clusters) ||
    nonEmpty(scope.rules)
  );
}

/** Whether holding `held` satisfies an endpoint that needs `required`. */
function roleSatisfies(held: CanonicalScopeRoleName, required: CanonicalScopeRoleName): boolean {
  if (held === required) return true;
  return required === 'network-peer' && (held === 'vcluster' || held === 'agent' || held === 'runner');
}

const listed = (names: readonly string[], name: string) => names.includes('*') || names.includes(name);

function roleEntryRestrictionsAllow(
  entry: { projects?: readonly string[] | undefined; virtualClusters?: readonly string[] | undefined },
  request: RequestAttributes,
): boolean {
  if (nonEmpty(entry.projects) && request.project !== undefined && !listed(entry.projects, request.project)) {
    return false;
  }
  if (
    nonEmpty(entry.virtualClusters) &&
    request.virtualCluster !== undefined &&
    !listed(entry.virtualClusters, request.virtualCluster.name)
  ) {
    return false;
  }
  return true;
}

function rolesAllow(scope: Scope, request: RequestAttributes): boolean {
  const entries: {
    role: ScopeRoleName;
    projects?: string[] | undefined;
    virtualClusters?: string[] | undefined;
  }[] = [...(scope.roles ?? [])];
  if (scope.allowPlatformCli === true) entries.push({ role: 'platform-cli' });
  const required = request.requiredRole === undefined ? undefined : canonicalScopeRole(request.requiredRole);
  const cliRequest = required === undefined && isPlatformCliRequest(request);
  return entries.some((entry) => {
    // Unknown names (only possible when the object skipped validation) grant nothing.
    if (!(SCOPE_ROLE_NAMES as readonly string[]).includes(entry.role)) return false;
    const held = canonicalScopeRole(entry.role);
    const covers =
      required !== undefined ? roleSatisfies(held, required) : cliRequest && held === 'platform-cli';
    return covers && roleEntryRestrictionsAllow(entry, request);
  });
}

function objectsAllow(scope: Scope, request: RequestAttributes): boolean {
  const { project, space, virtualCluster, cluster } = request;
  if (project !== undefined) {
    if ((scope.projects ?? []).some((entry) => entry.project === '*' || entry.project === project))
      return true;
    if (
      space !== undefined &&
      (scope.spaces ?? []).some(
        (entry) => entry.project === project && (entry.space === '*' || entry.space === space),
      )
    ) {
      return true;
    }
    if (
      virtualCluster !== undefined &&
      (scope.virtualClusters ?? []).some(
        (entry) =>
          entry.project === project &&
          (entry.virtualCluster === '*' || entry.virtualCluster === virtualCluster.name),
      )
    ) {
      return true;
    }
  }
  return (
    cluster !== undefined &&
    (scope.clusters ?? []).some((entry) => entry.cluster === '*' || entry.cluster === cluster)
  );
}

/**
 * Kubernetes' non-resource path matching (`k8s.io/apiserver/pkg/authorization/...` and the audit
 * checker): `*` matches every path, a spec ending in `*` matches by prefix, anything else exactly.
 */
export function nonResourcePathMatches(path: string, spec: string): boolean {
  if (spec === '*' || spec === path) return true;
  return spec.endsWith('*') && path.startsWith(spec.replace(/\*+$/, ''));
}

/**
 * Kubernetes' audit `ruleMatchesResource` resource matching for one `group/resources/resourceNames`
 * list: an empty `resources` matches every resource of the group (whatever `resourceNames` says);
 * `*` matches everything, `r` only the resource itself, `r/s` that subresource, `r/*` the resource
 * and all its subresources, `*\/s` that subresource of any resource; `resourceNames`, when
 * non-empty, must contain the request's name.
 */
export function groupResourcesMatch(
  entries: readonly {
    group?: string | undefined;
    resources?: string[] | undefined;
    resourceNames?: string[] | undefined;
  }[],
  request: Pick<RequestAttributes, 'apiGroup' | 'resource' | 'subresource' | 'name'>,
): boolean {
  const { apiGroup, resource, subresource, name } = request;
  const combined = subresource === '' ? resource : `${resource}/${subresource}`;
  return entries.some((entry) => {
    if ((entry.group ?? '') !== apiGroup) return false;
    const resources = entry.resources ?? [];
    if (resources.length === 0) return true;
    const names = entry.resourceNames ?? [];
    if (names.length > 0 && !names.includes(name)) return false;
    return resources.some(
      (pattern) =>
        pattern === '*' ||
        pattern === combined ||
        (subresource !== '' && pattern.startsWith('*/') && pattern.slice(2) === subresource) ||
        (pattern.endsWith('/*') && pattern.slice(0, -2) === resource),
    );
  });
}

function isVirtualClusterRequest(request: RequestAttributes): boolean {
  return request.target === 'ProjectVirtualCluster' || request.target === 'VirtualCluster';
}

/**
 * Whether a deprecated scope rule matches. Every set field must match ("empty means all"):
 *
 * - `requestTargets`: empty = every target; `VirtualCluster` (legacy path) is in no list.
 * - `cluster`: when set, only cluster requests (target `Cluster`) to that cluster match.
 * - `virtualClusters`: applies only to virtual-cluster requests, which must match an entry
 *   (`name`/`namespace` empty = any); other requests are not restricted by it.
 * - `verbs`: empty = every verb; `*` (the API's VerbAll) also means every verb.
 * - then exactly Kubernetes' audit `ruleMatches`: with `namespaces` or `resources` set, only
 *   resource requests match, in a listed namespace (`""` = cluster-scoped) and of a listed
 *   resource ({@link groupResourcesMatch}); otherwise with `nonResourceURLs` set, only non-resource
 *   requests on a listed path match; otherwise every request matches.
 */
export function scopeRuleMatches(rule: ScopeRule, request: RequestAttributes): boolean {
  if (nonEmpty(rule.requestTargets) && !(rule.requestTargets as readonly string[]).includes(request.target)) {
    return false;
  }
  if (rule.cluster !== undefined && rule.cluster !== '') {
    if (request.target !== 'Cluster' || request.cluster !== rule.cluster) return false;
  }
  if (nonEmpty(rule.virtualClusters) && isVirtualClusterRequest(request)) {
    const vc = request.virtualCluster;
    const matched =
      vc !== undefined &&
      rule.virtualClusters.some(
        (entry) =>
          (!entry.name || entry.name === vc.name) && (!entry.namespace || entry.namespace === vc.namespace),
      );
    if (!matched) return false;
  }
  if (nonEmpty(rule.verbs) && !rule.verbs.includes(request.verb) && !rule.verbs.includes('*')) return false;
  return ruleTargetMatches(rule, request);
}

/**
 * The object part of a Kubernetes-style rule (as audit policy rules and scope rules share it):
 * `namespaces`/`resources` restrict resource requests, `nonResourceURLs` non-resource requests,
 * and a rule with none of them matches every request.
 */
export function ruleTargetMatches(
  rule: {
    namespaces?: readonly string[] | undefined;
    resources?: Parameters<typeof groupResourcesMatch>[0] | undefined;
    nonResourceURLs?: readonly string[] | undefined;
  },
  request: RequestAttributes,
): boolean {
  if (nonEmpty(rule.namespaces) || nonEmpty(rule.resources)) {
    if (!request.resourceRequest) return false;
    if (nonEmpty(rule.namespaces) && !rule.namespaces.includes(request.namespace)) return false;
    return !nonEmpty(rule.resources) || groupResourcesMatch(rule.resources, request);
  }
  if (nonEmpty(rule.nonResourceURLs)) {
    if (request.resourceRequest) return false;
    return rule.nonResourceURLs.some((spec) => nonResourcePathMatches(request.path, spec));
  }
  return true;
}

function describeRequest(request: RequestAttributes): string {
  if (!request.resourceRequest) return `${request.verb} ${request.path}`;
  const resource = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  const group = request.apiGroup ? `.${request.apiGroup}` : '';
  return `${request.verb} ${resource}${group}`;
}

/**
 * Why each part the scope has did not let the request through (the parts are a union: every one
 * of them refused). Names only what the request concerns, never an entry of the scope: the
 * holder knows the scope; an audit event or log line carrying the message shows nothing of it.
 */
function refusingParts(scope: Scope, request: RequestAttributes): string[] {
  const { project, space, virtualCluster, cluster } = request;
  const names = (part: string, noun: string, concerned: string | undefined) =>
    concerned === undefined
      ? `${part}: the request concerns no ${noun}`
      : `${part} does not name ${noun} "${concerned}"`;
  const parts: string[] = [];
  if ((scope.roles ?? []).length > 0 || scope.allowPlatformCli === true)
    parts.push('scope.roles grant no such request');
  if ((scope.projects ?? []).length > 0) parts.push(names('scope.projects', 'project', project));
  if ((scope.spaces ?? []).length > 0)
    parts.push(names('scope.spaces', 'space', space === undefined ? undefined : `${project}/${space}`));
  if ((scope.virtualClusters ?? []).length > 0) {
    const named = virtualCluster === undefined ? undefined : `${project}/${virtualCluster.name}`;
    parts.push(names('scope.virtualClusters', 'virtual cluster', named));
  }
  if ((scope.clusters ?? []).length > 0) parts.push(names('scope.clusters', 'cluster', cluster));
  if ((scope.rules ?? []).length > 0) parts.push('no entry of scope.rules matches it');
  return parts;
}

/**
 * Whether the key's scope lets `request` through to RBAC. Pure; see the module comment for the
 * exact semantics. The denial reason names the request (which the caller sent) and which parts
 * of the scope refused it, never the key or the scope's entries.
 */
export function checkScope(scope: Scope | undefined, request: RequestAttributes): ScopeDecision {
  if (!scope || !scopeNarrows(scope)) return NOT_NARROWED;
  if (rolesAllow(scope, request)) return NOT_NARROWED;
  if (request.requiredRole !== undefined) {
    return {
      allowed: false,
      reason: `the access key's scope lacks the role ${canonicalScopeRole(request.requiredRole)} this endpoint needs`,
    };
  }
  if (objectsAllow(scope, request)) return NOT_NARROWED;
  if ((scope.rules ?? []).some((rule) => scopeRuleMatches(rule, request))) return NOT_NARROWED;
  return {
    allowed: false,
    reason: `the access key's scope does not allow ${describeRequest(request)} (target ${request.target}): ${refusingParts(scope, request).join('; ')}`,
  };
}
