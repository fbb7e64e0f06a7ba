import { z } from 'zod';
import { OwnerSchema } from './common.ts';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

const ProjectMemberSchema = z
  .object({
    kind: z.enum(['User', 'Team']).describe('`User` or `Team`.'),
    name: z.string().min(1).describe('Name of the user or team; `*` means every user.'),
    clusterRole: z.string().min(1).describe('Cluster role the member gets in the project.'),
  })
  .describe('A member of the project.');

const ProjectQuotasSchema = z
  .object({
    virtualClusterInstances: z
      .int()
      .min(0)
      .max(2_147_483_647)
      .optional()
      .describe(
        "Most VirtualClusterInstances the project's namespace may hold (registered and provisioned alike); absent: no limit. Enforced by the apiserver's own quota admission (a ResourceQuota the platform keeps in the namespace), so it holds under concurrent creates: one more is refused 403 Forbidden, `exceeded quota`. Lowering it below what exists removes nothing; only new instances are refused.",
      ),
  })
  .describe("Limits on what the project's members create in its namespace.");

const ProjectSpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    description: z.string().optional().describe('Description of the project.'),
    owner: OwnerSchema.optional(),
    members: z
      .array(ProjectMemberSchema)
      .optional()
      .describe('Users and teams that are members of the project.'),
    quotas: ProjectQuotasSchema.optional(),
  })
  .describe('Desired state of the project.');

const ProjectStatusSchema = z
  .object({
    namespace: z
      .string()
      .optional()
      .describe(
        "The project's namespace, `<projectNamespacePrefix><name>`, set once the controller created it.",
      ),
    observedGeneration: observedGenerationSchema(),
    conditions: conditionsSchema().optional(),
  })
  .describe('Observed state of the project.');

export const ProjectSchema = z
  .object({
    ...typeMetaShape('Project'),
    metadata: ObjectMetaSchema,
    spec: ProjectSpecSchema,
    status: ProjectStatusSchema.optional(),
  })
  .describe('A project: owner and members, with a namespace of its own.');

const EntityInfoSchema = z
  .object({
    name: z.string().describe('The cluster-API name of the object.'),
    displayName: z.string().optional().describe('Shown in the UI.'),
    icon: z.string().optional().describe('Icon URL.'),
    username: z.string().optional().describe('Used to log in.'),
    email: z.string().optional().describe('Email.'),
    subject: z.string().optional().describe('User subject.'),
  })
  .describe('Who the member is.');

const ProjectMembersEntrySchema = z.object({ info: EntityInfoSchema });

export const ProjectMembersSchema = z
  .object({
    ...typeMetaShape('ProjectMembers'),
    metadata: ObjectMetaSchema.optional(),
    teams: z
      .array(ProjectMembersEntrySchema)
      .optional()
      .describe('Teams that have access. Each entry has `info`.'),
    users: z
      .array(ProjectMembersEntrySchema)
      .optional()
      .describe('Users that have access. Each entry has `info`.'),
  })
  .describe(
    'Read-only listing of the users and teams that are members of a project. Platform-wide admins are not included.',
  );

export type Project = z.infer<typeof ProjectSchema>;
export type ProjectSpec = z.infer<typeof ProjectSpecSchema>;
export type ProjectQuotas = z.infer<typeof ProjectQuotasSchema>;
export type ProjectMember = z.infer<typeof ProjectMemberSchema>;
export type ProjectMembers = z.infer<typeof ProjectMembersSchema>;
export type EntityInfo = z.infer<typeof EntityInfoSchema>;
export type ProjectStatus = z.infer<typeof ProjectStatusSchema>;
