import { z } from 'zod';

/**
 * Roles a key's scope can carry. `platform-cli` is the canonical spelling (the established
 * product's constant value); the spec's `platformCLI` is accepted as the same role, see
 * {@link canonicalScopeRole}.
 */
export const SCOPE_ROLE_NAMES = [
  'agent',
  'vcluster',
  'network-peer',
  'platform-cli',
  'platformCLI',
  'runner',
  'workspace',
] as const;
export type ScopeRoleName = (typeof SCOPE_ROLE_NAMES)[number];
/** A role name with the `platformCLI` alias folded into `platform-cli`. */
export type CanonicalScopeRoleName = Exclude<ScopeRoleName, 'platformCLI'>;

/** Kinds of request a deprecated scope rule can be restricted to. */
export const SCOPE_REQUEST_TARGETS = [
  'Management',
  'Cluster',
  'ProjectSpace',
  'ProjectVirtualCluster',
] as const;

/**
 * A non-resource URL: either `*` or a path whose only wildcard is a whole, final path step
 * (`/apis/*` is allowed, `/api*` and `/a/*\/b` are not).
 */
export const NON_RESOURCE_URL_PATTERN = /^(\*|(\/[^/*]*)*(\/\*)?)$/;

/** Bounds on the deprecated rules, keeping the CRD's CEL cost estimate within budget. */
const MAX_SCOPE_RULES = 64;
const MAX_SCOPE_RULE_RESOURCES = 64;

const names = (description: string) => z.array(z.string()).optional().describe(description);

const ScopeRoleSchema = z
  .object({
    role: z
      .enum(SCOPE_ROLE_NAMES)
      .describe(
        'Name of the role: `agent`, `vcluster`, `network-peer`, `platform-cli` (also spelled `platformCLI`), `runner` or `workspace`.',
      ),
    projects: names('Projects the key may access.'),
    virtualClusters: names('Virtual clusters the key may access.'),
  })
  .describe('A managed permission applied to the key.');

const ScopeProjectSchema = z.object({
  project: z.string().min(1).describe('Project name; `*` selects all projects.'),
});

const ScopeSpaceSchema = z.object({
  project: z.string().min(1).describe('Project of the space.'),
  space: z.string().min(1).describe('Space name; `*` selects all spaces.'),
});

const ScopeVirtualClusterSchema = z.object({
  project: z.string().min(1).describe('Project of the virtual cluster.'),
  virtualCluster: z.string().min(1).describe('Virtual cluster name; `*` selects all virtual clusters.'),
});

const ScopeClusterSchema = z.object({
  cluster: z.string().min(1).describe('Cluster name; `*` selects all clusters.'),
});

/** Group and resources of an access or audit rule (the shape of Kubernetes' GroupResources). */
const GroupResourcesSchema = z
  .object({
    group: z.string().optional().describe('API group; the empty string is the core group.'),
    resources: names(
      'Names such as a resource, a resource/subresource, a wildcard for all, a wildcard for all subresources of a resource, or a wildcard prefix for a subresource; with wildcards, entries must not overlap; empty list means all resources and subresources of the group.',
    ),
    resourceNames: names('Requires `resources`; empty means every instance.'),
  })
  .refine((g) => !g.resourceNames?.length || !!g.resources?.length, {
    message: '`resourceNames` requires `resources`',
    path: ['resourceNames'],
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: '!has(self.resourceNames) || size(self.resourceNames) == 0 || (has(self.resources) && size(self.resources) > 0)',
        message: '`resourceNames` requires `resources`',
        fieldPath: '.resourceNames',
      },
    ],
  })
  .describe('Resources of one API group.');

const ScopeRuleSchema = z
  .object({
    verbs: names('Matching verbs. Empty list means every verb.'),
    resources: z
      .array(GroupResourcesSchema)
      .max(MAX_SCOPE_RULE_RESOURCES)
      .optional()
      .describe('Resources the rule matches. An empty list means all kinds in all groups.'),
    namespaces: names(
      'Matching namespaces. The empty string matches non-namespaced resources. Empty list means every namespace.',
    ),
    nonResourceURLs: z
      .array(z.string().regex(NON_RESOURCE_URL_PATTERN))
      .optional()
      .describe('URL paths checked; a wildcard is allowed only as the full, final path step.'),
    requestTargets: z
      .array(z.enum(SCOPE_REQUEST_TARGETS))
      .optional()
      .describe(
        'Allowed request targets (`Management`, `Cluster`, `ProjectSpace`, `ProjectVirtualCluster`). Empty list means every request.',
      ),
    cluster: z
      .string()
      .optional()
      .describe(
        'Only applies to cluster requests; when set, non-cluster requests are not allowed. Empty means no restriction.',
      ),
    virtualClusters: z
      .array(
        z.object({
          name: z.string().optional().describe('Virtual cluster name; empty means all virtual clusters.'),
          namespace: z.string().optional().describe('Namespace; empty means all namespaces.'),
        }),
      )
      .optional()
      .describe(
        'Only applies to virtual cluster requests. Each entry: `name` (empty means all virtual clusters), `namespace` (empty means all namespaces). Empty list means no restriction.',
      ),
  })
  .describe('Deprecated: a fine-grained scope rule; use projects, spaces and virtualClusters instead.');

/**
 * What an access key (or a direct cluster endpoint token) may reach. A scope only narrows what
 * the key's identity may do through RBAC; it never grants more. An absent or empty scope means
 * no narrowing.
 */
export const ScopeSchema = z
  .object({
    roles: z
      .array(ScopeRoleSchema)
      .optional()
      .describe(
        'Managed permissions applied to the key. Each entry: `role` (string, name of the role), `projects` (array of string, projects the key may access), `virtualClusters` (array of string, virtual clusters the key may access).',
      ),
    projects: z
      .array(ScopeProjectSchema)
      .optional()
      .describe('Each entry: `project` (string; `*` selects all projects).'),
    spaces: z
      .array(ScopeSpaceSchema)
      .optional()
      .describe('Each entry: `project` (string), `space` (string; `*` selects all spaces).'),
    virtualClusters: z
      .array(ScopeVirtualClusterSchema)
      .optional()
      .describe(
        'Each entry: `project` (string), `virtualCluster` (string; `*` selects all virtual clusters).',
      ),
    clusters: z
      .array(ScopeClusterSchema)
      .optional()
      .describe('Each entry: `cluster` (string; `*` selects all clusters).'),
    rules: z
      .array(ScopeRuleSchema)
      .max(MAX_SCOPE_RULES)
      .optional()
      .describe('Deprecated; use projects, spaces and virtualClusters instead.'),
    allowPlatformCli: z
      .boolean()
      .optional()
      .describe(
        'Deprecated; lets certain read-only management requests work so the command line client works with this key. Use roles with the role `platformCLI` instead.',
      ),
  })
  .describe('Scope of the key: what it may access, narrowing (never widening) its identity.');

/** Folds the spec's `platformCLI` spelling into the canonical `platform-cli`. */
export function canonicalScopeRole(role: ScopeRoleName): CanonicalScopeRoleName {
  return role === 'platformCLI' ? 'platform-cli' : role;
}

export type Scope = z.infer<typeof ScopeSchema>;
export type ScopeRule = z.infer<typeof ScopeRuleSchema>;
