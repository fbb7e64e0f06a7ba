import { API_GROUP, API_VERSION } from '../api/meta.ts';
import { STORED_KINDS } from '../api/registry.ts';
import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../controllers/secretsync/desired.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-client.ts';
import { MUTATE_PATH, VALIDATE_PATH, VALIDATE_SECRETS_PATH } from './admission.ts';
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
export const WEBHOOK_TIMEOUT_SECONDS = 5;
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

export function buildWebhookConfigurations(input: WebhookConfigurationInput): WebhookConfigurations {
  const caBundle = Buffer.from(input.caBundlePem, 'utf8').toString('base64');
  const excluded = ['kube-system', ...(input.excludedNamespaces ?? [])];
  const notExcluded = {
    matchExpressions: [{ key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: excluded }],
  };
  const common = {
    admissionReviewVersions: ['v1'],
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
  };
  const labels = {
    'app.kubernetes.io/part-of': 'platform',
    'app.kubernetes.io/component': 'admission-webhook',
  };
  const prefix = input.namePrefix ?? '';
  return {
    validating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: `${prefix}${VALIDATING_CONFIGURATION_NAME}`, labels },
      webhooks: [
        {
          ...common,
          name: `resources.validate.${API_GROUP}`,
          clientConfig: clientConfig(input.endpoint, VALIDATE_PATH, caBundle),
          sideEffects: 'None',
          namespaceSelector: notExcluded,
          rules: [
            {
              apiGroups: [API_GROUP],
              apiVersions: [API_VERSION],
              operations: ['CREATE', 'UPDATE'],
              resources: STORED_KINDS.map((k) => k.plural),
              scope: '*',
            },
          ],
        },
        {
          ...common,
          name: `secret-sync.validate.${API_GROUP}`,
          clientConfig: clientConfig(input.endpoint, VALIDATE_SECRETS_PATH, caBundle),
          sideEffects: 'None',
          namespaceSelector: notExcluded,
          // On UPDATE the selector matches when the old or the new object matches; removing the
          // labels needs no permission, and the webhook only checks new or changed sources.
          objectSelector: {
            matchExpressions: [
              { key: SOURCE_NAME_LABEL, operator: 'Exists' },
              { key: SOURCE_NAMESPACE_LABEL, operator: 'Exists' },
            ],
          },
          rules: [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              operations: ['CREATE', 'UPDATE'],
              resources: ['secrets'],
              scope: 'Namespaced',
            },
          ],
        },
        {
          ...common,
          name: `platform-config.validate.${API_GROUP}`,
          clientConfig: clientConfig(input.endpoint, VALIDATE_SECRETS_PATH, caBundle),
          sideEffects: 'None',
          namespaceSelector: {
            matchExpressions: [
              { key: NAMESPACE_NAME_LABEL, operator: 'In', values: [input.platformNamespace] },
            ],
          },
          matchConditions: [
            {
              name: 'is-platform-config',
              expression: `has(object.metadata.name) && object.metadata.name == '${PLATFORM_CONFIG_SECRET}'`,
            },
          ],
          rules: [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              operations: ['CREATE', 'UPDATE'],
              resources: ['secrets'],
              scope: 'Namespaced',
            },
          ],
        },
      ],
    },
    mutating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: `${prefix}${MUTATING_CONFIGURATION_NAME}`, labels },
      webhooks: [
        {
          ...common,
          name: `ownedaccesskeys.mutate.${API_GROUP}`,
          clientConfig: clientConfig(input.endpoint, MUTATE_PATH, caBundle),
          // The first real (not dry-run) create of a key may create the pepper Secret.
          sideEffects: 'NoneOnDryRun',
          reinvocationPolicy: 'Never',
          rules: [
            {
              apiGroups: [API_GROUP],
              apiVersions: [API_VERSION],
              operations: ['CREATE'],
              resources: ['ownedaccesskeys'],
              scope: 'Cluster',
            },
          ],
          // Keys already hashed (the management API stores only keyHash) need nothing from us.
          matchConditions: [
            {
              name: 'not-already-hashed',
              expression: '!has(object.spec) || has(object.spec.key) || !has(object.spec.keyHash)',
            },
          ],
        },
      ],
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

/** Removes both configurations (uninstall, tests); absent ones are fine. */
export async function deleteWebhookConfigurations(
  api: KubeApi,
  configurations: WebhookConfigurations,
): Promise<void> {
  for (const [plural, object] of [
    ['validatingwebhookconfigurations', configurations.validating],
    ['mutatingwebhookconfigurations', configurations.mutating],
  ] as const) {
    await api
      .request({
        method: 'DELETE',
        path: `/apis/admissionregistration.k8s.io/v1/${plural}/${encodeURIComponent(object.metadata.name)}`,
      })
      .catch((err: unknown) => {
        if ((err as { code?: number }).code !== 404) throw err;
      });
  }
}
