import {
  canonicalScopeRole,
  NON_RESOURCE_URL_PATTERN,
  SCOPE_REQUEST_TARGETS,
  SCOPE_ROLE_NAMES,
  type Scope,
  type ScopeRoleName,
  type ScopeRule,
} from '../api/scope.ts';
import { nonEmpty } from './scope.ts';

// Validation of an access key's scope at admission: what the schema cannot say (see
// validateScope). Deciding requests and comparing scopes are in scope.ts.

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

const WILDCARD_IN_NAME = 'a wildcard may only stand for a whole name (`*`); names are matched exactly';

/** Refuses `name` at `path` when it holds a `*` that is not the whole name. */
function checkWholeName(path: string, name: string, errors: ScopeIssue[]): void {
  if (partialWildcard(name)) errors.push({ path, message: `\`${name}\`: ${WILDCARD_IN_NAME}` });
}

function checkWholeNames(path: string, names: readonly string[] | undefined, errors: ScopeIssue[]): void {
  for (const [k, name] of (names ?? []).entries()) checkWholeName(`${path}[${k}]`, name, errors);
}

/** `roles`: known and supported roles, whole names, and an `agent` role with clusters to review for. */
function validateRoleEntries(scope: Scope, errors: ScopeIssue[], warnings: string[]): void {
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
    checkWholeNames(`roles[${i}].projects`, entry.projects, errors);
    checkWholeNames(`roles[${i}].virtualClusters`, entry.virtualClusters, errors);
    if (canonicalScopeRole(entry.role) === 'agent' && !nonEmpty(scope.clusters)) {
      warnings.push(
        `scope.roles[${i}]: the role agent reviews tokens for the clusters in scope.clusters, and there are none: it matches nothing`,
      );
    }
  });
}

/** `projects`, `clusters`, `spaces`, `virtualClusters`: whole names, and a named project where a part of one is meant. */
function validateNamedEntries(scope: Scope, errors: ScopeIssue[]): void {
  for (const [i, entry] of (scope.projects ?? []).entries())
    checkWholeName(`projects[${i}].project`, entry.project, errors);
  for (const [i, entry] of (scope.clusters ?? []).entries())
    checkWholeName(`clusters[${i}].cluster`, entry.cluster, errors);
  (scope.spaces ?? []).forEach((entry, i) => {
    if (entry.project === '*') {
      errors.push({ path: `spaces[${i}].project`, message: 'only `space` may be `*`; name the project' });
    }
    checkWholeName(`spaces[${i}].project`, entry.project, errors);
    checkWholeName(`spaces[${i}].space`, entry.space, errors);
  });
  (scope.virtualClusters ?? []).forEach((entry, i) => {
    if (entry.project === '*') {
      errors.push({
        path: `virtualClusters[${i}].project`,
        message: 'only `virtualCluster` may be `*`; name the project',
      });
    }
    checkWholeName(`virtualClusters[${i}].project`, entry.project, errors);
    checkWholeName(`virtualClusters[${i}].virtualCluster`, entry.virtualCluster, errors);
  });
}

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
  validateRoleEntries(scope, errors, warnings);
  validateNamedEntries(scope, errors);
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
