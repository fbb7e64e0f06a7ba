import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET, safeParseConfig } from '../../api/config.ts';
import { configWarnings } from '../../api/config-warnings.ts';
import {
  SOURCE_NAME_LABEL,
  SOURCE_NAMESPACE_LABEL,
  SYNCER_SERVICE_ACCOUNT_PREFIX,
} from '../../api/labels.ts';
import { type AdmissionDecision, allow, type Cause, forbidden, invalid } from '../decision.ts';
import type { AdmittedObject, UserInfo } from '../review.ts';

export { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET };

export interface SharedSecretRef {
  readonly namespace: string;
  readonly name: string;
}

function syncSource(object: AdmittedObject | null | undefined): SharedSecretRef | undefined {
  const labels = object?.metadata?.labels ?? {};
  const name = labels[SOURCE_NAME_LABEL];
  const namespace = labels[SOURCE_NAMESPACE_LABEL];
  return name && namespace ? { namespace, name } : undefined;
}

/**
 * The SharedSecret whose `get` permission the requester needs: the one the Secret's labels name,
 * when they are new (create) or point somewhere else than before (update). Unchanged labels need
 * no check, so the sync controller can keep writing data.
 */
export function syncSourceToAuthorize(
  oldObject: AdmittedObject | null | undefined,
  object: AdmittedObject,
): SharedSecretRef | undefined {
  const wanted = syncSource(object);
  if (wanted === undefined) return undefined;
  const before = syncSource(oldObject);
  return before && before.name === wanted.name && before.namespace === wanted.namespace ? undefined : wanted;
}

/**
 * Whether the requester is one of the platform's own identities: a ServiceAccount of the platform
 * namespace (controller, webhook, gateway) or a virtual cluster's syncer. They act on others'
 * behalf, so whatever they may read must not be what decides: such a requester never passes the
 * secret-sync check, however much it may read (the controller may read every SharedSecret).
 */
export function isPlatformComponent(user: UserInfo, platformNamespace: string): boolean {
  const match = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(user.username ?? '');
  if (!match) return false;
  return match[1] === platformNamespace || match[2]!.startsWith(SYNCER_SERVICE_ACCOUNT_PREFIX);
}

/** The platform's own identities may not set the sync labels, whatever they may read. */
export function refuseComponentSecretSync(source: SharedSecretRef, user: UserInfo): AdmissionDecision {
  return forbidden(
    `secrets labelled ${SOURCE_NAME_LABEL}=${source.name}, ${SOURCE_NAMESPACE_LABEL}=${source.namespace} are filled from that SharedSecret; ${user.username} is an identity of the platform itself, which never sets these labels on anyone's behalf: a user who may get the SharedSecret must`,
  );
}

export function decideSecretSync(source: SharedSecretRef, mayGet: boolean): AdmissionDecision {
  if (mayGet) return allow();
  return forbidden(
    `secrets labelled ${SOURCE_NAME_LABEL}=${source.name}, ${SOURCE_NAMESPACE_LABEL}=${source.namespace} are filled from that SharedSecret; the requester may not get sharedsecrets.management.platform "${source.name}" in namespace "${source.namespace}", so cannot create such a Secret`,
  );
}

/** The configuration text of a platform-config Secret (`data` is base64; `stringData` is merged by the apiserver). */
function configText(object: AdmittedObject): string | undefined {
  const stringData = object.stringData as Record<string, unknown> | undefined;
  if (typeof stringData?.[PLATFORM_CONFIG_KEY] === 'string') return stringData[PLATFORM_CONFIG_KEY] as string;
  const data = object.data as Record<string, unknown> | undefined;
  const encoded = data?.[PLATFORM_CONFIG_KEY];
  return typeof encoded === 'string' ? Buffer.from(encoded, 'base64').toString('utf8') : undefined;
}

/**
 * The platform-config Secret must hold a configuration that parses with every cross-field rule
 * of the Config schema. Causes point into the document (`data[config].audit.path`); messages
 * never quote values (they may be client secrets).
 */
export function validatePlatformConfigSecret(object: AdmittedObject): AdmissionDecision {
  const subject = { kind: 'Secret', name: object.metadata?.name ?? PLATFORM_CONFIG_SECRET };
  const text = configText(object);
  if (text === undefined) {
    return invalid(subject, [
      {
        field: `data[${PLATFORM_CONFIG_KEY}]`,
        reason: 'FieldValueRequired',
        message: 'the platform configuration is required',
      },
    ]);
  }
  const result = safeParseConfig(text);
  if (result.ok) return allow({ warnings: configWarnings(text) });
  const causes: Cause[] = result.error.issues.map((issue) => ({
    field: issue.path ? `data[${PLATFORM_CONFIG_KEY}].${issue.path}` : `data[${PLATFORM_CONFIG_KEY}]`,
    reason: 'FieldValueInvalid',
    message: issue.message,
  }));
  return invalid(subject, causes);
}
