import { z } from 'zod';
import {
  base64Schema,
  HTTP_URL_PATTERN,
  immutableOnceSet,
  LocalSecretReferenceSchema,
  OwnerSchema,
} from './common.ts';
import {
  conditionsSchema,
  ObjectMetaSchema,
  observedGenerationSchema,
  timestampSchema,
  typeMetaShape,
} from './meta.ts';

/** Seconds of inactivity (`spec.sleepAfter`, `spec.deleteAfter`); 0 means never. */
const inactivitySecondsSchema = () => z.int().min(0).max(2_147_483_647);

const ENDPOINT_OR_TEMPLATE =
  'set exactly one of spec.endpoint (register a virtual cluster made elsewhere) and spec.templateRef (the platform provisions one)';
const CREDENTIALS_ONLY_WITH_ENDPOINT =
  'spec.credentialsSecretRef is only for a registered virtual cluster (spec.endpoint); the platform makes the credentials of one it provisions';

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
      .describe(
        "URL of the virtual cluster's API server. Set: the instance registers a virtual cluster made elsewhere. Absent: the platform provisions it from `spec.templateRef`. Exactly one of the two is set.",
      ),
    templateRef: z
      .object({
        name: z.string().min(1).describe('Name of the VirtualClusterTemplate.'),
      })
      .optional()
      .describe(
        'The VirtualClusterTemplate the platform provisions this virtual cluster from (control-plane resources, storage, version, default `spec.config`); required when `spec.endpoint` is absent, refused beside it. Cannot be changed once set.',
      ),
    sleepAfter: inactivitySecondsSchema()
      .optional()
      .describe(
        'Seconds without activity (a request through the access proxy or a change the syncer carries) after which a provisioned virtual cluster is put to sleep: its control plane stopped, its storage kept. Absent or 0: never.',
      ),
    deleteAfter: inactivitySecondsSchema()
      .optional()
      .describe(
        'Seconds without activity after which a provisioned virtual cluster is deleted, with its storage. Absent or 0: never.',
      ),
    caData: base64Schema().optional().describe("Base64 PEM CA bundle of the virtual cluster's API server."),
    credentialsSecretRef: LocalSecretReferenceSchema.optional().describe(
      "Secret in this object's namespace holding the credentials the platform uses to reach the virtual cluster. Only with `spec.endpoint`: the platform makes a provisioned virtual cluster's credentials itself.",
    ),
    config: z
      .string()
      .optional()
      .describe(
        "The virtual cluster's configuration as YAML text (for example `sync.toHost.endpoints`); validated by the syncer's configuration rules.",
      ),
  })
  .refine((spec) => (spec.endpoint === undefined) !== (spec.templateRef === undefined), {
    message: ENDPOINT_OR_TEMPLATE,
    path: ['templateRef'],
  })
  .refine((spec) => spec.credentialsSecretRef === undefined || spec.endpoint !== undefined, {
    message: CREDENTIALS_ONLY_WITH_ENDPOINT,
    path: ['credentialsSecretRef'],
  })
  .meta({
    'x-kubernetes-validations': [
      immutableOnceSet('clusterRef', 'move a virtual cluster by creating a new one'),
      {
        // Unlike clusterRef, not even set later: that would turn a registered instance into a provisioned one.
        rule: 'has(self.templateRef) == has(oldSelf.templateRef) && (!has(self.templateRef) || self.templateRef == oldSelf.templateRef)',
        message:
          'templateRef cannot be set, changed or removed after creation: a provisioned virtual cluster keeps the template it was made from, a registered one stays registered',
        fieldPath: '.templateRef',
        reason: 'FieldValueInvalid',
      },
      {
        rule: 'has(self.endpoint) != has(self.templateRef)',
        message: ENDPOINT_OR_TEMPLATE,
        fieldPath: '.templateRef',
        reason: 'FieldValueInvalid',
      },
      {
        rule: '!has(self.credentialsSecretRef) || has(self.endpoint)',
        message: CREDENTIALS_ONLY_WITH_ENDPOINT,
        fieldPath: '.credentialsSecretRef',
        reason: 'FieldValueForbidden',
      },
    ],
  })
  .describe('Desired state of the virtual cluster.');

const VirtualClusterInstanceStatusSchema = z
  .object({
    observedGeneration: observedGenerationSchema(),
    conditions: conditionsSchema()
      .optional()
      .describe(
        'Current state of the virtual cluster, at most one condition per type. `Ready`: the platform reaches its API server (a provisioned one: its API server answers `/readyz` and its syncer runs). `Syncing`: how its syncer does. `Provisioned` (provisioned instances only): whether its control plane, storage and credentials exist. `Sleeping` (provisioned instances only): `True` while its control plane is stopped for inactivity, `lastTransitionTime` being when it fell asleep.',
      ),
    sleepingSince: timestampSchema()
      .optional()
      .describe(
        "When the virtual cluster last fell asleep (RFC 3339, UTC); absent while it is awake. The same time as the `Sleeping` condition's `lastTransitionTime`.",
      ),
    lastActivity: timestampSchema()
      .optional()
      .describe(
        'The latest activity the controller saw (RFC 3339, UTC, provisioned instances only): the latest of the creation, the `sleepmode.platform/last-activity` annotation (requests through the access proxy), the last change its syncer carried and the last wake. `spec.sleepAfter` and `spec.deleteAfter` count from it. Written at most once a minute unless the instance falls asleep, wakes or is deleted, so it may lag the activity by up to a minute.',
      ),
  })
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
