import { z } from 'zod';
import { bool, int, str, strings } from './config-fields.ts';

// The `audit` section of the platform configuration: where the audit log goes and the policy
// that decides which requests are recorded, at which level and stage.

const DEFAULT_AUDIT_MAX_SIZE_MB = 100;

export const AUDIT_LEVELS = ['None', 'Metadata', 'Request', 'RequestResponse'] as const;
export const AUDIT_STAGES = ['RequestReceived', 'ResponseStarted', 'ResponseComplete', 'Panic'] as const;
export const AUDIT_REQUEST_TARGETS = [
  'Management',
  'Cluster',
  'VCluster',
  'ProjectSpace',
  'ProjectVCluster',
] as const;

const AuditPolicyRuleSchema = z
  .object({
    level: z.enum(AUDIT_LEVELS).describe('`None`, `Metadata`, `Request` or `RequestResponse`.'),
    users: strings('By authenticated name; empty means all.'),
    userGroups: strings('Empty means all.'),
    verbs: strings('Empty means all.'),
    resources: z
      .array(
        z.object({
          group: str('API group; the empty string is the core group.'),
          resources: strings('Resources as in access rules.'),
          resourceNames: strings('Resource names as in access rules.'),
        }),
      )
      .optional()
      .describe('Resources as in access rules (`group`, `resources`, `resourceNames`).'),
    namespaces: strings('Matching namespaces.'),
    nonResourceURLs: strings('Matching non-resource URLs.'),
    omitStages: z.array(z.enum(AUDIT_STAGES)).optional().describe('Stages without events.'),
    requestTargets: z.array(z.enum(AUDIT_REQUEST_TARGETS)).optional().describe('Empty means every request.'),
    clusters: strings('When set, no events for non-cluster requests; empty means no restriction.'),
  })
  .describe('One audit policy rule; the first matching rule applies.');

const AuditPolicySchema = z
  .object({
    rules: z
      .array(AuditPolicyRuleSchema)
      .optional()
      .describe(
        'Strictly ordered, first matching rule applies, default level None, may be overridden by a final catch-all.',
      ),
    omitStages: z
      .array(z.enum(AUDIT_STAGES))
      .optional()
      .describe('Stages without events; union with per-rule lists.'),
  })
  .describe('Default: nothing is logged.');

export const AuditSchema = z
  .object({
    enabled: bool('When true, incoming API requests are logged per the policy.'),
    disableAgentSyncBack: bool('When true the agent sends no audit logs back.'),
    level: z
      .int()
      .min(1)
      .max(4)
      .optional()
      .describe('Optional log level (1-4); cannot be used together with `policy`.'),
    policy: AuditPolicySchema.optional(),
    dataStoreEndpoint: str('Endpoint where events are stored.'),
    dataStoreTTL: int('Maximum hours to retain events in the datastore.'),
    path: str(
      'Directory/path for audit log files; required when audit is enabled. Backups stay in the same directory.',
    ),
    maxAge: int('Maximum days to retain old log files (24-hour days); default is no age-based removal.'),
    maxBackups: int('Maximum old log files retained; default retains all.'),
    maxSize: z
      .int()
      .min(1)
      .default(DEFAULT_AUDIT_MAX_SIZE_MB)
      .describe('Megabytes before rotation; default 100.'),
    compress: bool('Gzip rotated files; default false.'),
  })
  .superRefine((audit, ctx) => {
    if (audit.level !== undefined && audit.policy !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['level'], message: 'cannot be used together with `policy`' });
    }
    if (audit.enabled === true && !audit.path) {
      ctx.addIssue({ code: 'custom', path: ['path'], message: 'required when audit is enabled' });
    }
  })
  .describe('Audit logging.');

export type AuditConfig = z.output<typeof AuditSchema>;
export type AuditPolicy = z.output<typeof AuditPolicySchema>;
export type AuditPolicyRule = z.output<typeof AuditPolicyRuleSchema>;
