import { z } from 'zod';
import { ClusterRoleRefSchema } from './common.ts';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

/**
 * The single-sign-on account a User is (issue 32): the connector and the provider's stable
 * subject, named as `OwnedAccessKey.spec.identity` names them. In `spec`, since an admin binds a
 * User made by hand (or one from before subjects were recorded) by setting it; the login writes it
 * only when it creates the User.
 */
const UserSsoIdentitySchema = z
  .object({
    connector: z.string().min(1).describe('Id of the connector (`identity.connector` of its Login keys).'),
    userId: z
      .string()
      .min(1)
      .describe("The provider's stable subject of the account (`identity.userId` of its Login keys)."),
  })
  .describe(
    'The single-sign-on account this user is: set when a sign-in creates the user, or by an admin; a sign-in through another connector, or for another subject whatever its username, is refused.',
  );

const UserSpecSchema = z
  .object({
    username: z.string().optional().describe('Name used to log in.'),
    displayName: z.string().optional().describe('Name shown in the UI.'),
    email: z.string().optional().describe('Email address of the user.'),
    icon: z.string().optional().describe('URL of the icon of the user.'),
    subject: z
      .string()
      .optional()
      .describe('Subject of the user: the Kubernetes username the platform acts as for this user.'),
    clusterRoles: z
      .array(ClusterRoleRefSchema)
      .optional()
      .describe('Cluster roles of the user; `platform-admin` marks a platform-wide admin.'),
    disabled: z.boolean().optional().describe('When true the user cannot log in and their keys do not work.'),
    tokenGeneration: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        "Generation of the user's direct cluster endpoint tokens (default 0): every token carries the generation it was minted at (claim `gen`) and the platform refuses it once this differs. Raise it to revoke every token the user holds: `POST users/<name>/tokenrevocation` through the gateway (the user or a platform admin), or an edit by whoever may update Users; never lower it (tokens of an earlier generation would work again).",
      ),
    ssoIdentity: UserSsoIdentitySchema.optional(),
    groups: z
      .array(z.string())
      .optional()
      .describe(
        'Single-sign-on groups of the user as of the last sign-in (after `auth.groupsFilters`); set by the platform at login.',
      ),
  })
  .describe('Desired state of the user.');

const UserStatusSchema = z
  .object({
    teams: z
      .array(z.string())
      .optional()
      .describe(
        "Read-only: names of the teams the user belongs to, filled by the platform from every Team's `users`, so authentication never scans all teams. In status because users do not declare it: the status subresource keeps anyone who may edit a User from adding themselves to a team.",
      ),
    observedGeneration: observedGenerationSchema(),
    conditions: conditionsSchema().optional(),
  })
  .describe('Observed state of the user.');

export const UserSchema = z
  .object({
    ...typeMetaShape('User'),
    metadata: ObjectMetaSchema,
    spec: UserSpecSchema,
    status: UserStatusSchema.optional(),
  })
  .describe('A user of the platform.');

const TeamSpecSchema = z
  .object({
    username: z
      .string()
      .optional()
      .describe('Name of the team as used in groups and by the command line client.'),
    displayName: z.string().optional().describe('Name shown in the UI.'),
    users: z.array(z.string()).optional().describe('Names of the users that are members of the team.'),
    groups: z
      .array(z.string())
      .optional()
      .describe('Single-sign-on groups whose members are members of the team.'),
    clusterRoles: z
      .array(ClusterRoleRefSchema)
      .optional()
      .describe("Cluster roles of the team's members; `platform-admin` marks platform-wide admins."),
  })
  .describe('Desired state of the team.');

const TeamStatusSchema = z
  .object({ observedGeneration: observedGenerationSchema(), conditions: conditionsSchema().optional() })
  .describe('Observed state of the team.');

export const TeamSchema = z
  .object({
    ...typeMetaShape('Team'),
    metadata: ObjectMetaSchema,
    spec: TeamSpecSchema,
    status: TeamStatusSchema.optional(),
  })
  .describe('A team: a group of users.');

export type User = z.infer<typeof UserSchema>;
export type Team = z.infer<typeof TeamSchema>;
export type UserStatus = z.infer<typeof UserStatusSchema>;
