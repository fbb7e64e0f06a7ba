import { API_GROUP } from '../api/meta.ts';
import {
  type CanonicalScopeRoleName,
  canonicalScopeRole,
  NON_RESOURCE_URL_PATTERN,
  SCOPE_REQUEST_TARGETS,
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

const nonEmpty = <T>(list: readonly T[] | undefined): list is readonly T[] =>
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
 * Whether the key's scope lets `request` through to RBAC. Pure; see the module comment for the
 * exact semantics. The denial reason names the request (which the caller sent) and never the
 * key or its scope.
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
    reason: `the access key's scope does not allow ${describeRequest(request)} (target ${request.target})`,
  };
}

// ---------------------------------------------------------------------------------------------
// Validation (admission)

interface ScopeIssue {
  /** Path inside the scope, e.g. `rules[0].resources[1].resources[2]`. */
  readonly path: string;
  readonly message: string;
}

interface ScopeValidation {
  readonly errors: ScopeIssue[];
  readonly warnings: string[];
}

/** A `resources` entry as the set of (resource, subresource) pairs it matches. */
interface ResourcePattern {
  /** `undefined` = any resource. */
  readonly resource: string | undefined;
  /** `any` = the resource itself and every subresource; `none` = only the resource itself. */
  readonly subresource: { kind: 'any' } | { kind: 'none' } | { kind: 'named'; name: string };
}

const NAME_PART = /^[^/*]+$/;

function parseResourcePattern(text: string): ResourcePattern | undefined {
  if (text === '*') return { resource: undefined, subresource: { kind: 'any' } };
  const parts = text.split('/');
  if (parts.length === 1)
    return NAME_PART.test(text) ? { resource: text, subresource: { kind: 'none' } } : undefined;
  if (parts.length !== 2) return undefined;
  const [resource = '', subresource = ''] = parts;
  if (resource === '*' && NAME_PART.test(subresource)) {
    return { resource: undefined, subresource: { kind: 'named', name: subresource } };
  }
  if (!NAME_PART.test(resource)) return undefined;
  if (subresource === '*') return { resource, subresource: { kind: 'any' } };
  return NAME_PART.test(subresource)
    ? { resource, subresource: { kind: 'named', name: subresource } }
    : undefined;
}

function patternsOverlap(a: ResourcePattern, b: ResourcePattern): boolean {
  if (a.resource !== undefined && b.resource !== undefined && a.resource !== b.resource) return false;
  const x = a.subresource;
  const y = b.subresource;
  if (x.kind === 'any' || y.kind === 'any') return true;
  if (x.kind === 'none' || y.kind === 'none') return x.kind === y.kind;
  return x.name === y.name;
}

const hasWildcard = (text: string) => text.includes('*');

function validateRule(rule: ScopeRule, at: string, errors: ScopeIssue[]): void {
  (rule.resources ?? []).forEach((entry, j) => {
    const base = `${at}.resources[${j}]`;
    const resources = entry.resources ?? [];
    if (nonEmpty(entry.resourceNames) && resources.length === 0) {
      errors.push({ path: `${base}.resourceNames`, message: '`resourceNames` requires `resources`' });
    }
    const parsed = resources.map(parseResourcePattern);
    resources.forEach((text, k) => {
      const pattern = parsed[k];
      if (pattern === undefined) {
        errors.push({
          path: `${base}.resources[${k}]`,
          message: `\`${text}\` is not a resource, resource/subresource, \`*\`, \`resource/*\` or \`*/subresource\``,
        });
        return;
      }
      for (let earlier = 0; earlier < k; earlier++) {
        const other = parsed[earlier];
        const otherText = resources[earlier] ?? '';
        if (other === undefined || !(hasWildcard(text) || hasWildcard(otherText))) continue;
        if (patternsOverlap(pattern, other)) {
          errors.push({
            path: `${base}.resources[${k}]`,
            message: `\`${text}\` overlaps with \`${otherText}\`; with wildcards, entries must not overlap`,
          });
        }
      }
    });
  });
  (rule.nonResourceURLs ?? []).forEach((url, k) => {
    if (!NON_RESOURCE_URL_PATTERN.test(url)) {
      errors.push({
        path: `${at}.nonResourceURLs[${k}]`,
        message: `\`${url}\`: a wildcard is allowed only as the full, final path step (\`/apis/*\`)`,
      });
    }
  });
  if (nonEmpty(rule.nonResourceURLs) && (nonEmpty(rule.resources) || nonEmpty(rule.namespaces))) {
    errors.push({
      path: `${at}.nonResourceURLs`,
      message: 'a rule matches either resources and namespaces or non-resource URLs, not both',
    });
  }
  (rule.requestTargets ?? []).forEach((target, k) => {
    if (!(SCOPE_REQUEST_TARGETS as readonly string[]).includes(target)) {
      errors.push({
        path: `${at}.requestTargets[${k}]`,
        message: `unknown request target \`${target}\`; allowed: ${SCOPE_REQUEST_TARGETS.join(', ')}`,
      });
    }
  });
}

/**
 * The roles that mean something here: `platform-cli` (also `platformCLI`: the read-only requests
 * of a command-line client), `agent` (a connected cluster's reviewer credential for the
 * TokenReview endpoint of the clusters in `clusters`) and `vcluster` (a virtual cluster's reviewer
 * credential for the virtual clusters its entry lists). The schema also knows `network-peer`,
 * `runner` and `workspace` (the established product's), which open nothing in this platform, so
 * admission refuses them rather than storing a key that is 403 everywhere.
 */
const SUPPORTED_SCOPE_ROLES: readonly ScopeRoleName[] = ['platform-cli', 'platformCLI', 'agent', 'vcluster'];

/** A name with a `*` that is not the whole name: names are matched exactly, so it matches nothing. */
const partialWildcard = (name: string) => name !== '*' && name.includes('*');

/**
 * Checks a scope for the admission webhook, beyond its schema: roles are known and mean something
 * here ({@link SUPPORTED_SCOPE_ROLES}); names are whole names or `*` (never `x*`); in the
 * deprecated rules, `resources` entries are well-formed and, where wildcards are involved, do not
 * overlap; `resourceNames` come with `resources`; a non-resource URL wildcard is only a whole final
 * path step; a rule does not mix resources with non-resource URLs (Kubernetes' audit policy
 * forbids it too, and the resource part would silently win). Warns about deprecated fields and
 * about parts that can match nothing.
 */
export function validateScope(scope: Scope | undefined): ScopeValidation {
  const errors: ScopeIssue[] = [];
  const warnings: string[] = [];
  if (!scope) return { errors, warnings };
  const wholeNames = (path: string, names: readonly string[] | undefined) => {
    for (const [k, name] of (names ?? []).entries()) {
      if (partialWildcard(name)) {
        errors.push({
          path: `${path}[${k}]`,
          message: `\`${name}\`: a wildcard may only stand for a whole name (\`*\`); names are matched exactly`,
        });
      }
    }
  };
  const wholeName = (path: string, name: string) => {
    if (partialWildcard(name)) {
      errors.push({
        path,
        message: `\`${name}\`: a wildcard may only stand for a whole name (\`*\`); names are matched exactly`,
      });
    }
  };
  (scope.roles ?? []).forEach((entry, i) => {
    if (!(SCOPE_ROLE_NAMES as readonly string[]).includes(entry.role)) {
      errors.push({
        path: `roles[${i}].role`,
        message: `unknown role \`${entry.role}\`; allowed: ${SUPPORTED_SCOPE_ROLES.join(', ')}`,
      });
    } else if (!SUPPORTED_SCOPE_ROLES.includes(entry.role)) {
      errors.push({
        path: `roles[${i}].role`,
        message: `the role \`${entry.role}\` opens nothing in this platform; supported: ${SUPPORTED_SCOPE_ROLES.join(', ')}`,
      });
    }
    wholeNames(`roles[${i}].projects`, entry.projects);
    wholeNames(`roles[${i}].virtualClusters`, entry.virtualClusters);
    if (canonicalScopeRole(entry.role) === 'agent' && !nonEmpty(scope.clusters)) {
      warnings.push(
        `scope.roles[${i}]: the role agent reviews tokens for the clusters in scope.clusters, and there are none: it matches nothing`,
      );
    }
  });
  for (const [i, entry] of (scope.projects ?? []).entries())
    wholeName(`projects[${i}].project`, entry.project);
  for (const [i, entry] of (scope.clusters ?? []).entries())
    wholeName(`clusters[${i}].cluster`, entry.cluster);
  (scope.spaces ?? []).forEach((entry, i) => {
    if (entry.project === '*') {
      errors.push({ path: `spaces[${i}].project`, message: 'only `space` may be `*`; name the project' });
    }
    wholeName(`spaces[${i}].project`, entry.project);
    wholeName(`spaces[${i}].space`, entry.space);
  });
  (scope.virtualClusters ?? []).forEach((entry, i) => {
    if (entry.project === '*') {
      errors.push({
        path: `virtualClusters[${i}].project`,
        message: 'only `virtualCluster` may be `*`; name the project',
      });
    }
    wholeName(`virtualClusters[${i}].project`, entry.project);
    wholeName(`virtualClusters[${i}].virtualCluster`, entry.virtualCluster);
  });
  (scope.rules ?? []).forEach((rule, i) => {
    validateRule(rule, `rules[${i}]`, errors);
    const targets = rule.requestTargets ?? [];
    if (rule.cluster && targets.length > 0 && !(targets as readonly string[]).includes('Cluster')) {
      warnings.push(
        `scope.rules[${i}]: \`cluster\` applies to Cluster requests only, which its requestTargets leave out: it matches nothing`,
      );
    }
  });
  if (nonEmpty(scope.rules)) {
    warnings.push(
      'scope.rules is deprecated; use scope.projects, scope.spaces and scope.virtualClusters instead',
    );
  }
  if (scope.allowPlatformCli === true) {
    warnings.push('scope.allowPlatformCli is deprecated; use scope.roles with the role platform-cli instead');
  }
  return { errors, warnings };
}

// ---------------------------------------------------------------------------------------------
// Comparing scopes

const coveredName = (outer: readonly string[] | undefined, name: string) =>
  outer === undefined || outer.length === 0 || outer.includes('*') || outer.includes(name);

/**
 * Whether every request `inner` lets through, `outer` lets through too (so writing `inner` where
 * `outer` was, or minting `inner` from a key scoped `outer`, widens nothing). Conservative: it
 * may answer false for scopes that are in fact narrower (deprecated rules must appear in `outer`
 * as they are), never true for one that is wider.
 */
export function scopeWithin(inner: Scope | undefined, outer: Scope | undefined): boolean {
  if (!scopeNarrows(outer)) return true;
  if (!scopeNarrows(inner)) return false;
  const o = outer as Scope;
  const i = inner as Scope;
  const outerProjects = (o.projects ?? []).map((entry) => entry.project);
  const projectCovered = (project: string) => outerProjects.includes('*') || outerProjects.includes(project);
  const roleEntries = (scope: Scope) => [
    ...(scope.roles ?? []),
    ...(scope.allowPlatformCli === true ? [{ role: 'platform-cli' as const }] : []),
  ];
  const outerRoles = roleEntries(o);
  return (
    (i.projects ?? []).every((entry) =>
      entry.project !== '*' ? projectCovered(entry.project) : outerProjects.includes('*'),
    ) &&
    (i.spaces ?? []).every(
      (entry) =>
        projectCovered(entry.project) ||
        (o.spaces ?? []).some(
          (outerEntry) =>
            outerEntry.project === entry.project &&
            (outerEntry.space === '*' || outerEntry.space === entry.space),
        ),
    ) &&
    (i.virtualClusters ?? []).every(
      (entry) =>
        projectCovered(entry.project) ||
        (o.virtualClusters ?? []).some(
          (outerEntry) =>
            outerEntry.project === entry.project &&
            (outerEntry.virtualCluster === '*' || outerEntry.virtualCluster === entry.virtualCluster),
        ),
    ) &&
    (i.clusters ?? []).every((entry) =>
      (o.clusters ?? []).some(
        (outerEntry) => outerEntry.cluster === '*' || outerEntry.cluster === entry.cluster,
      ),
    ) &&
    roleEntries(i).every((entry) =>
      outerRoles.some(
        (outerEntry) =>
          canonicalScopeRole(outerEntry.role) === canonicalScopeRole(entry.role) &&
          restrictionCovered(outerEntry.projects, entry.projects) &&
          restrictionCovered(outerEntry.virtualClusters, entry.virtualClusters),
      ),
    ) &&
    (i.rules ?? []).every((rule) =>
      (o.rules ?? []).some((outerRule) => JSON.stringify(outerRule) === JSON.stringify(rule)),
    )
  );
}

/** A role entry's restriction list `inner` (empty: none) within `outer` (empty: none). */
function restrictionCovered(
  outer: readonly string[] | undefined,
  inner: readonly string[] | undefined,
): boolean {
  if (outer === undefined || outer.length === 0 || outer.includes('*')) return true;
  if (inner === undefined || inner.length === 0 || inner.includes('*')) return false;
  return inner.every((name) => coveredName(outer, name));
}
