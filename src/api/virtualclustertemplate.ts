import { z } from 'zod';
import { conditionsSchema, ObjectMetaSchema, observedGenerationSchema, typeMetaShape } from './meta.ts';

/**
 * The Kubernetes version the project's control-plane binary serves (hack/controlplane/go.mod's
 * `k8s.io/kubernetes`; a unit test keeps the two equal). A template can only name this version:
 * the platform ships one control plane, so any other value would be a promise it cannot keep.
 */
export const CONTROL_PLANE_KUBERNETES_VERSION = 'v1.36.3';

/**
 * A Kubernetes quantity (`500m`, `2`, `1.5Gi`, `1e3`) as the apiserver's `resource.Quantity`
 * parses it, without a sign: resources and sizes are never negative. Text only (quote plain
 * numbers in YAML: `cpu: "2"`), so the CRD stays a plain string field.
 */
export const QUANTITY_PATTERN =
  /^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;

const quantitySchema = () =>
  z.string().regex(QUANTITY_PATTERN, 'must be a Kubernetes quantity such as `500m`, `2`, `512Mi` or `10Gi`');

const ComputeSchema = z
  .object({
    cpu: quantitySchema().optional().describe('CPU, for example `500m` or `2`.'),
    memory: quantitySchema().optional().describe('Memory, for example `512Mi` or `2Gi`.'),
  })
  .describe('CPU and memory.');

const VirtualClusterTemplateSpecSchema = z
  .object({
    displayName: z.string().optional().describe('Name shown in the UI.'),
    description: z.string().optional().describe('What the template is for, shown to tenants choosing one.'),
    kubernetesVersion: z
      .enum([CONTROL_PLANE_KUBERNETES_VERSION])
      .optional()
      .describe(
        `Kubernetes version of the virtual control plane. Informational: it must equal the version of the control-plane binary the platform ships (\`${CONTROL_PLANE_KUBERNETES_VERSION}\`), which is also what an absent value means.`,
      ),
    resources: z
      .object({
        requests: ComputeSchema.optional().describe('What the control plane is guaranteed.'),
        limits: ComputeSchema.optional().describe('The most the control plane may use.'),
      })
      .optional()
      .describe('Compute resources of the virtual control plane (its pod, when provisioned in the cluster).'),
    storage: z
      .object({
        size: quantitySchema().describe(
          'Size of the storage of the virtual control plane, for example `5Gi`.',
        ),
        storageClassName: z
          .string()
          .min(1)
          .optional()
          .describe(
            "StorageClass of the control plane's PersistentVolumeClaim; absent means the cluster's default. Chosen by the admin who writes the template: an instance cannot name another.",
          ),
      })
      .optional()
      .describe('Persistent storage of the virtual control plane (its etcd data).'),
    config: z
      .string()
      .optional()
      .describe(
        "Default `spec.config` (YAML text, the syncer's configuration) of instances made from this template that set none.",
      ),
  })
  .describe(
    'How the platform makes a virtual cluster. Tenants choose a template by name (`spec.templateRef` of a VirtualClusterInstance) and set none of these fields themselves.',
  );

const VirtualClusterTemplateStatusSchema = z
  .object({ observedGeneration: observedGenerationSchema(), conditions: conditionsSchema().optional() })
  .describe('Observed state of the template.');

export const VirtualClusterTemplateSchema = z
  .object({
    ...typeMetaShape('VirtualClusterTemplate'),
    metadata: ObjectMetaSchema,
    spec: VirtualClusterTemplateSpecSchema,
    status: VirtualClusterTemplateStatusSchema.optional(),
  })
  .describe(
    'A kind of virtual cluster the platform provisions: control-plane resources, storage, Kubernetes version and default configuration. Written by platform admins; readable by every authenticated user.',
  );

export type VirtualClusterTemplate = z.infer<typeof VirtualClusterTemplateSchema>;
export type VirtualClusterTemplateSpec = z.infer<typeof VirtualClusterTemplateSpecSchema>;
