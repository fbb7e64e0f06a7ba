import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../api/labels.ts';
import { API_GROUP, API_VERSION } from '../api/meta.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { MUTATE_PATH, VALIDATE_PATH, VALIDATE_SECRETS_PATH } from './admission.ts';
import { MUTATING_POLICIES, type PolicyTable, VALIDATING_POLICIES } from './policies.ts';
import { PLATFORM_CONFIG_SECRET } from './rules/secret.ts';

/**
 * The ValidatingWebhookConfiguration and MutatingWebhookConfiguration of the platform, built by a
 * pure function. Narrow on purpose, so unrelated writes never wait for (or fail on) us:
 *  - our kinds: every stored kind of `management.platform`, CREATE and UPDATE, fail closed;
 *  - core Secrets only when labelled for sync (objectSelector) or when they are the platform
 *    configuration Secret (namespaceSelector on the platform namespace + matchCondition on the name);
 *  - the mutation only for OwnedAccessKey CREATE;
 *  - `kube-system` never (namespaceSelector), so a broken webhook cannot wedge the control plane.
 */

export const VALIDATING_CONFIGURATION_NAME = 'platform-validating-webhooks';
export const MUTATING_CONFIGURATION_NAME = 'platform-mutating-webhooks';
const WEBHOOK_TIMEOUT_SECONDS = 5;
export const FIELD_MANAGER = fieldManagers.admission;

/** Where the apiserver reaches the webhook server: a URL (local runs, tests) or a Service. */
export type WebhookEndpoint =
  | { readonly url: string }
  | { readonly service: { readonly namespace: string; readonly name: string; readonly port?: number } };

export interface WebhookConfigurationInput {
  readonly endpoint: WebhookEndpoint;
  /** PEM; every CA that may have signed the serving certificate. */
  readonly caBundlePem: string;
  readonly platformNamespace: string;
  /** Namespaces never sent to us besides `kube-system`. */
  readonly excludedNamespaces?: readonly string[];
  /** Prepended to configuration names (tests running several sets in one cluster). */
  readonly namePrefix?: string;
}

const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

function clientConfig(endpoint: WebhookEndpoint, path: string, caBundle: string) {
  if ('url' in endpoint) return { url: `${endpoint.url.replace(/\/$/, '')}${path}`, caBundle };
  return {
    service: {
      namespace: endpoint.service.namespace,
      name: endpoint.service.name,
      port: endpoint.service.port ?? 443,
      path,
    },
    caBundle,
  };
}

export interface WebhookConfigurations {
  readonly validating: Record<string, unknown> & {
    metadata: { name: string; labels?: Record<string, string> };
  };
  readonly mutating: Record<string, unknown> & {
    metadata: { name: string; labels?: Record<string, string> };
  };
}

/** What every webhook entry shares: where to call, how to fail, and the namespaces never sent. */
interface WebhookContext {
  readonly endpoint: WebhookEndpoint;
  /** Base64 of the PEM bundle, as `clientConfig.caBundle` wants it. */
  readonly caBundle: string;
  readonly platformNamespace: string;
  readonly notExcluded: Record<string, unknown>;
}

const COMMON_WEBHOOK_FIELDS = {
  admissionReviewVersions: ['v1'],
  failurePolicy: 'Fail',
  matchPolicy: 'Equivalent',
  timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
} as const;

const CONFIGURATION_LABELS = {
  'app.kubernetes.io/part-of': 'platform',
  'app.kubernetes.io/component': 'admission-webhook',
} as const;

/**
 * The webhook `rules` of a policy table: one rule per set of operations, naming every resource
 * of `group` whose chains cover exactly those operations, so adding a chain to the table
 * registers it.
 */
export function rulesOfTable(table: PolicyTable, group: string, version: string, scope: string) {
  const resourcesByOperations = new Map<string, string[]>();
  for (const [key, chains] of Object.entries(table)) {
    const dot = key.indexOf('.');
    if (dot < 0 || key.slice(dot + 1) !== group) continue;
    const operations = (['CREATE', 'UPDATE', 'DELETE'] as const).filter((op) => chains[op]).join(',');
    if (operations === '') continue;
    resourcesByOperations.set(operations, [
      ...(resourcesByOperations.get(operations) ?? []),
      key.slice(0, dot),
    ]);
  }
  return [...resourcesByOperations].map(([operations, resources]) => ({
    apiGroups: [group],
    apiVersions: [version],
    operations: operations.split(','),
    resources,
    scope,
  }));
}

const CORE_SECRET_WRITES = [
  {
    apiGroups: [''],
    apiVersions: ['v1'],
    operations: ['CREATE', 'UPDATE'],
    resources: ['secrets'],
    scope: 'Namespaced',
  },
];

/** Every stored kind of ours, as `VALIDATING_POLICIES` lists them. */
function ourKindsWebhook(context: WebhookContext) {
  return {
    ...COMMON_WEBHOOK_FIELDS,
    name: `resources.validate.${API_GROUP}`,
    clientConfig: clientConfig(context.endpoint, VALIDATE_PATH, context.caBundle),
    sideEffects: 'None',
    namespaceSelector: context.notExcluded,
    rules: rulesOfTable(VALIDATING_POLICIES, API_GROUP, API_VERSION, '*'),
  };
}

/** Core Secrets labelled for sync from a SharedSecret. */
function secretSyncWebhook(context: WebhookContext) {
  return {
    ...COMMON_WEBHOOK_FIELDS,
    name: `secret-sync.validate.${API_GROUP}`,
    clientConfig: clientConfig(context.endpoint, VALIDATE_SECRETS_PATH, context.caBundle),
    sideEffects: 'None',
    namespaceSelector: context.notExcluded,
    // On UPDATE the selector matches when the old or the new object matches; removing the
    // labels needs no permission, and the webhook only checks new or changed sources.
    objectSelector: {
      matchExpressions: [
        { key: SOURCE_NAME_LABEL, operator: 'Exists' },
        { key: SOURCE_NAMESPACE_LABEL, operator: 'Exists' },
      ],
    },
    rules: CORE_SECRET_WRITES,
  };
}

/** The platform configuration Secret, by namespace and (a match condition) name. */
function platformConfigWebhook(context: WebhookContext) {
  return {
    ...COMMON_WEBHOOK_FIELDS,
    name: `platform-config.validate.${API_GROUP}`,
    clientConfig: clientConfig(context.endpoint, VALIDATE_SECRETS_PATH, context.caBundle),
    sideEffects: 'None',
    namespaceSelector: {
      matchExpressions: [{ key: NAMESPACE_NAME_LABEL, operator: 'In', values: [context.platformNamespace] }],
    },
    matchConditions: [
      {
        name: 'is-platform-config',
        expression: `has(object.metadata.name) && object.metadata.name == '${PLATFORM_CONFIG_SECRET}'`,
      },
    ],
    rules: CORE_SECRET_WRITES,
  };
}

/** The OwnedAccessKey mutation, as `MUTATING_POLICIES` lists it. */
function accessKeyMutationWebhook(context: WebhookContext) {
  return {
    ...COMMON_WEBHOOK_FIELDS,
    name: `ownedaccesskeys.mutate.${API_GROUP}`,
    clientConfig: clientConfig(context.endpoint, MUTATE_PATH, context.caBundle),
    // The first real (not dry-run) create of a key may create the pepper Secret.
    sideEffects: 'NoneOnDryRun',
    reinvocationPolicy: 'Never',
    rules: rulesOfTable(MUTATING_POLICIES, API_GROUP, API_VERSION, 'Cluster'),
    // Keys already hashed (the management API stores only keyHash) need nothing from us.
    matchConditions: [
      {
        name: 'not-already-hashed',
        expression: '!has(object.spec) || has(object.spec.key) || !has(object.spec.keyHash)',
      },
    ],
  };
}

export function buildWebhookConfigurations(input: WebhookConfigurationInput): WebhookConfigurations {
  const excluded = ['kube-system', ...(input.excludedNamespaces ?? [])];
  const context: WebhookContext = {
    endpoint: input.endpoint,
    caBundle: Buffer.from(input.caBundlePem, 'utf8').toString('base64'),
    platformNamespace: input.platformNamespace,
    notExcluded: { matchExpressions: [{ key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: excluded }] },
  };
  const prefix = input.namePrefix ?? '';
  return {
    validating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: `${prefix}${VALIDATING_CONFIGURATION_NAME}`, labels: { ...CONFIGURATION_LABELS } },
      webhooks: [ourKindsWebhook(context), secretSyncWebhook(context), platformConfigWebhook(context)],
    },
    mutating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: `${prefix}${MUTATING_CONFIGURATION_NAME}`, labels: { ...CONFIGURATION_LABELS } },
      webhooks: [accessKeyMutationWebhook(context)],
    },
  };
}

/** Creates or updates both configurations (server-side apply, forced: this component owns them). */
export async function applyWebhookConfigurations(
  api: KubeApi,
  configurations: WebhookConfigurations,
): Promise<void> {
  for (const [plural, object] of [
    ['validatingwebhookconfigurations', configurations.validating],
    ['mutatingwebhookconfigurations', configurations.mutating],
  ] as const) {
    await api.request({
      method: 'PATCH',
      path: `/apis/admissionregistration.k8s.io/v1/${plural}/${encodeURIComponent(object.metadata.name)}`,
      query: { fieldManager: FIELD_MANAGER, force: true },
      body: object,
      contentType: 'application/apply-patch+yaml',
    });
  }
}
