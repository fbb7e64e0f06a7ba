import { z } from 'zod';
import { ObjectMetaSchema, typeMetaShape } from './meta.ts';
import { ScopeSchema } from './scope.ts';

export const DirectClusterEndpointTokenSchema = z
  .object({
    ...typeMetaShape('DirectClusterEndpointToken'),
    metadata: ObjectMetaSchema.optional(),
    spec: z
      .object({
        ttl: z
          .int()
          .min(0)
          .optional()
          .describe(
            'Time to live of the access token, in seconds. Zero or unset means one hour; capped by `auth.accessKeyMaxTTLSeconds` when that is set, and at 90 days (7776000).',
          ),
        scope: ScopeSchema.optional().describe(
          "Optional scope of the direct cluster endpoint; shape as in 'Access scope'.",
        ),
      })
      .optional()
      .describe('What token to issue.'),
    status: z
      .object({
        token: z.string().optional().describe('The issued token (a JWT), set by the server: `<JWT>`.'),
      })
      .optional()
      .describe('The issued token.'),
  })
  .describe(
    'A token for connecting directly to a connected cluster, bypassing the central instance. Never stored.',
  );

export type DirectClusterEndpointToken = z.infer<typeof DirectClusterEndpointTokenSchema>;
