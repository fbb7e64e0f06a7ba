import { z } from 'zod';
import { base64Schema, HTTP_URL_PATTERN, SecretReferenceSchema } from './common.ts';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

const ClusterSpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    endpoint: z
      .string()
      .regex(HTTP_URL_PATTERN)
      .optional()
      .describe("URL of the cluster's API server, for example `https://10.0.0.1:6443`."),
    caData: base64Schema()
      .optional()
      .describe("Base64 PEM CA bundle that signed the API server's certificate."),
    credentialsSecretRef: SecretReferenceSchema.optional().describe(
      'Secret holding the credentials the platform uses to reach the cluster.',
    ),
    directEndpoint: z
      .string()
      .regex(HTTP_URL_PATTERN)
      .optional()
      .describe(
        'URL where clients reach the cluster directly with a DirectClusterEndpointToken, bypassing the central instance.',
      ),
  })
  .describe('Desired state of the connected cluster.');

const ClusterStatusSchema = z
  .object({ observedGeneration: observedGenerationSchema(), conditions: conditionsSchema().optional() })
  .describe('Observed state of the connected cluster.');

export const ClusterSchema = z
  .object({
    ...typeMetaShape('Cluster'),
    metadata: ObjectMetaSchema,
    spec: ClusterSpecSchema,
    status: ClusterStatusSchema.optional(),
  })
  .describe('A connected cluster.');

export type Cluster = z.infer<typeof ClusterSchema>;
export type ClusterStatus = z.infer<typeof ClusterStatusSchema>;
