import { z } from 'zod';
import {
  base64Schema,
  HTTP_URL_PATTERN,
  immutableOnceSet,
  LocalSecretReferenceSchema,
  OwnerSchema,
} from './common.ts';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

const VirtualClusterInstanceSpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    owner: OwnerSchema.optional(),
    clusterRef: z
      .object({
        cluster: z.string().min(1).describe('Name of the connected cluster hosting the virtual cluster.'),
        namespace: z.string().min(1).describe('Namespace of the host cluster the virtual cluster runs in.'),
        virtualCluster: z.string().min(1).describe('Name of the virtual cluster in that namespace.'),
      })
      .optional()
      .describe(
        'Where the virtual cluster runs. Cannot be changed once set: moving it would orphan the running virtual cluster and its synced objects.',
      ),
    accessPoint: z
      .object({
        ingress: z
          .object({
            enabled: z
              .boolean()
              .optional()
              .describe('Whether the virtual cluster is reachable through an ingress.'),
          })
          .optional()
          .describe('Ingress access.'),
      })
      .optional()
      .describe('How clients reach the virtual cluster; the kubeconfig endpoint requires the ingress.'),
    endpoint: z
      .string()
      .regex(HTTP_URL_PATTERN)
      .optional()
      .describe("URL of the virtual cluster's API server."),
    caData: base64Schema().optional().describe("Base64 PEM CA bundle of the virtual cluster's API server."),
    credentialsSecretRef: LocalSecretReferenceSchema.optional().describe(
      "Secret in this object's namespace holding the credentials the platform uses to reach the virtual cluster.",
    ),
    config: z
      .string()
      .optional()
      .describe(
        "The virtual cluster's configuration as YAML text (for example `sync.toHost.endpoints`); validated by the syncer's configuration rules.",
      ),
  })
  .meta({
    'x-kubernetes-validations': [
      immutableOnceSet('clusterRef', 'move a virtual cluster by creating a new one'),
    ],
  })
  .describe('Desired state of the virtual cluster.');

const VirtualClusterInstanceStatusSchema = z
  .object({ observedGeneration: observedGenerationSchema(), conditions: conditionsSchema().optional() })
  .describe('Observed state of the virtual cluster.');

export const VirtualClusterInstanceSchema = z
  .object({
    ...typeMetaShape('VirtualClusterInstance'),
    metadata: ObjectMetaSchema,
    spec: VirtualClusterInstanceSpecSchema,
    status: VirtualClusterInstanceStatusSchema.optional(),
  })
  .describe('A virtual cluster in a project namespace.');

export const VirtualClusterInstanceKubeConfigSchema = z
  .object({
    ...typeMetaShape('VirtualClusterInstanceKubeConfig'),
    metadata: ObjectMetaSchema.optional(),
    spec: z
      .object({
        certificateTTL: z
          .int()
          .min(0)
          .max(2_147_483_647)
          .optional()
          .describe(
            "Seconds the credentials in the returned kubeconfig are valid. Token mode (the default): the lifetime (`spec.ttl`) of the new access key; absent or zero means one day. Client certificate mode (`clientCert: true`): the certificate's validity (Kubernetes signs none shorter than 600 seconds); absent means one day, and zero means the signing request carries no duration, so the cluster's signing duration applies (typically one year). In both modes the credentials end no later than the caller's access key: a longer lifetime is cut to that key's expiry.",
          ),
        server: z.string().optional().describe('Overrides the server in the kubeconfig.'),
        clientCert: z
          .boolean()
          .optional()
          .describe(
            'When true the kubeconfig contains generated client certificates instead of a platform token.',
          ),
      })
      .optional()
      .describe('What kubeconfig to issue.'),
    status: z
      .object({
        kubeConfig: z
          .string()
          .optional()
          .describe('The kubeconfig document as YAML text (`apiVersion`, `kind: Config`, `clusters`, ...).'),
      })
      .optional()
      .describe('The issued kubeconfig.'),
  })
  .describe(
    'Retrieval of a kubeconfig for a virtual cluster through its ingress endpoint, if an ingress endpoint is configured for that virtual cluster.',
  );

export type VirtualClusterInstance = z.infer<typeof VirtualClusterInstanceSchema>;
export type VirtualClusterInstanceStatus = z.infer<typeof VirtualClusterInstanceStatusSchema>;
export type VirtualClusterInstanceKubeConfig = z.infer<typeof VirtualClusterInstanceKubeConfigSchema>;
