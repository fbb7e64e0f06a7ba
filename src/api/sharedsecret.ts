import { z } from 'zod';
import { base64Schema, OwnerSchema } from './common.ts';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

/** A key of `spec.data`: alphanumeric characters, '-', '_' or '.' (as a core Secret's keys). */
const SECRET_DATA_KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;
/** Upper bounds that keep the CRD's CEL cost estimate low; a core Secret is capped at 1 MiB anyway. */
const MAX_SECRET_DATA_KEYS = 256;
const MAX_SECRET_DATA_KEY_LENGTH = 253;

const SharedSecretAccessSchema = z
  .object({
    name: z.string().optional().describe('Optional name of the access rule.'),
    verbs: z
      .array(z.string().min(1))
      .min(1)
      .describe(
        'Verbs applying to all resource kinds and attribute restrictions of the rule. The value VerbAll (`*`) represents all.',
      ),
    subresources: z.array(z.string()).optional().describe('Subresources allowed by the rule.'),
    users: z.array(z.string()).optional().describe('Users that get the verbs on this secret.'),
    teams: z.array(z.string()).optional().describe('Teams that get the verbs on this secret.'),
  })
  .describe('Access rights for users and teams, transformed into Roles and RoleBindings.');

const SharedSecretSpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    description: z.string().optional().describe('Description of the shared secret.'),
    owner: OwnerSchema.optional(),
    data: z
      .record(
        z.string().max(MAX_SECRET_DATA_KEY_LENGTH).regex(SECRET_DATA_KEY_PATTERN),
        base64Schema().describe('Base64 text of the value.'),
      )
      .refine((data) => Object.keys(data).length <= MAX_SECRET_DATA_KEYS, {
        message: `at most ${MAX_SECRET_DATA_KEYS} keys`,
      })
      .optional()
      .meta({
        maxProperties: MAX_SECRET_DATA_KEYS,
        // `__proto__` is refused by the apiserver: every JavaScript reader of the object (zod,
        // the controllers) would drop that key silently and lose its value.
        'x-kubernetes-validations': [
          {
            rule: `self.all(k, size(k) <= ${MAX_SECRET_DATA_KEY_LENGTH} && k.matches('^[-._a-zA-Z0-9]+$') && k != '__proto__')`,
            message:
              "each key must consist of alphanumeric characters, '-', '_' or '.' (and not be `__proto__`)",
            reason: 'FieldValueInvalid',
          },
        ],
      })
      .describe(
        "Secret data. Each key consists of alphanumeric characters, '-', '_' or '.'. Each value is base64 text (RFC 4648 section 4 alphabet) of arbitrary, possibly non-string, data.",
      ),
    access: z
      .array(SharedSecretAccessSchema)
      .optional()
      .describe('Access rights for users and teams, transformed into Roles and RoleBindings.'),
  })
  .describe('Desired state of the shared secret.');

const SharedSecretStatusSchema = z
  .object({
    observedGeneration: observedGenerationSchema(),
    conditions: conditionsSchema().optional(),
    dataKeys: z
      .array(z.string())
      .optional()
      .describe(
        'Names of the keys in `spec.data`, sorted, never the values. Set by the controller so that listings can show the keys without reading secret data.',
      ),
  })
  .describe('Observed state of the shared secret.');

export const SharedSecretSchema = z
  .object({
    ...typeMetaShape('SharedSecret'),
    metadata: ObjectMetaSchema,
    spec: SharedSecretSpecSchema,
    status: SharedSecretStatusSchema.optional(),
  })
  .describe(
    'Global Secret: secret data shared across users, teams and connected clusters. Read through the command line client or synced to a project secret.',
  );

export type SharedSecret = z.infer<typeof SharedSecretSchema>;
export type SharedSecretStatus = z.infer<typeof SharedSecretStatusSchema>;
export type SharedSecretAccess = z.infer<typeof SharedSecretAccessSchema>;
