import type { Status } from '../api/status.ts';
import { isJsonObject, setOwnValue } from '../runtime/json.ts';
import type { AdmissionDecision } from './decision.ts';

/**
 * The AdmissionReview v1 wire format (admission.k8s.io/v1) and the single adapter between it and
 * the rules' {@link AdmissionDecision}.
 */

const ADMISSION_REVIEW_API_VERSION = 'admission.k8s.io/v1';

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

/** The requester as the apiserver authenticated them; passed unchanged to SubjectAccessReviews. */
export interface UserInfo {
  readonly username?: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

export interface GroupVersionKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
}

export interface GroupVersionResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

/** A Kubernetes object as the webhook receives it: JSON, only `metadata` assumed. */
export interface AdmittedObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: AdmittedMetadata;
  readonly [field: string]: unknown;
}

export interface AdmittedOwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller?: boolean;
  readonly blockOwnerDeletion?: boolean;
}

export interface AdmittedMetadata {
  readonly name?: string;
  readonly generateName?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly creationTimestamp?: string | null;
  readonly deletionTimestamp?: string;
  readonly deletionGracePeriodSeconds?: number;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly ownerReferences?: readonly AdmittedOwnerReference[];
  readonly finalizers?: readonly string[];
}

export interface AdmissionRequest {
  readonly uid: string;
  readonly kind: GroupVersionKind;
  readonly resource: GroupVersionResource;
  readonly subResource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly operation: Operation;
  readonly userInfo: UserInfo;
  readonly object?: AdmittedObject | null;
  readonly oldObject?: AdmittedObject | null;
  readonly dryRun?: boolean;
}

/** The body could not be read as an AdmissionReview v1 request. The message quotes no input. */
export class MalformedAdmissionReview extends Error {
  override readonly name = 'MalformedAdmissionReview';
}

const OPERATIONS: readonly string[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];

function optionalObject(value: unknown, field: string): AdmittedObject | null | undefined {
  if (value === undefined || value === null) return value;
  if (!isJsonObject(value)) throw new MalformedAdmissionReview(`request.${field} must be an object`);
  if (value.metadata !== undefined && !isJsonObject(value.metadata)) {
    throw new MalformedAdmissionReview(`request.${field}.metadata must be an object`);
  }
  return value as AdmittedObject;
}

function groupVersionKind(value: unknown, field: string): GroupVersionKind {
  if (!isJsonObject(value) || typeof value.kind !== 'string' || typeof value.version !== 'string') {
    throw new MalformedAdmissionReview(`request.${field} must have group, version and kind`);
  }
  return {
    group: typeof value.group === 'string' ? value.group : '',
    version: value.version,
    kind: value.kind,
  };
}

function groupVersionResource(value: unknown): GroupVersionResource {
  if (!isJsonObject(value) || typeof value.resource !== 'string' || typeof value.version !== 'string') {
    throw new MalformedAdmissionReview('request.resource must have group, version and resource');
  }
  return {
    group: typeof value.group === 'string' ? value.group : '',
    version: value.version,
    resource: value.resource,
  };
}

function userInfo(value: unknown): UserInfo {
  if (value === undefined) return {};
  if (!isJsonObject(value)) throw new MalformedAdmissionReview('request.userInfo must be an object');
  const groups = Array.isArray(value.groups) ? value.groups.filter((g) => typeof g === 'string') : undefined;
  const extra: Record<string, string[]> = {};
  if (isJsonObject(value.extra)) {
    for (const [key, values] of Object.entries(value.extra)) {
      if (Array.isArray(values))
        setOwnValue(
          extra,
          key,
          values.filter((v) => typeof v === 'string'),
        );
    }
  }
  return {
    ...(typeof value.username === 'string' ? { username: value.username } : {}),
    ...(typeof value.uid === 'string' ? { uid: value.uid } : {}),
    ...(groups ? { groups } : {}),
    ...(Object.keys(extra).length > 0 ? { extra } : {}),
  };
}

/**
 * Reads an AdmissionReview v1 body (already JSON-decoded). Throws only
 * {@link MalformedAdmissionReview}; never trusts a field's type.
 */
export function parseAdmissionReview(body: unknown): AdmissionRequest {
  if (!isJsonObject(body)) throw new MalformedAdmissionReview('the body is not a JSON object');
  if (body.apiVersion !== ADMISSION_REVIEW_API_VERSION || body.kind !== 'AdmissionReview') {
    throw new MalformedAdmissionReview(
      `expected kind AdmissionReview, apiVersion ${ADMISSION_REVIEW_API_VERSION}`,
    );
  }
  const request = body.request;
  if (!isJsonObject(request)) throw new MalformedAdmissionReview('the review has no request');
  if (typeof request.uid !== 'string' || request.uid === '') {
    throw new MalformedAdmissionReview('request.uid must be a non-empty string');
  }
  if (typeof request.operation !== 'string' || !OPERATIONS.includes(request.operation)) {
    throw new MalformedAdmissionReview('request.operation must be CREATE, UPDATE, DELETE or CONNECT');
  }
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const subResource = str(request.subResource);
  const name = str(request.name);
  const namespace = str(request.namespace);
  return {
    uid: request.uid,
    kind: groupVersionKind(request.kind, 'kind'),
    resource: groupVersionResource(request.resource),
    ...(subResource ? { subResource } : {}),
    ...(name ? { name } : {}),
    ...(namespace ? { namespace } : {}),
    operation: request.operation as Operation,
    userInfo: userInfo(request.userInfo),
    object: optionalObject(request.object, 'object'),
    oldObject: optionalObject(request.oldObject, 'oldObject'),
    dryRun: request.dryRun === true,
  };
}

export interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_REVIEW_API_VERSION;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    status?: Status;
    patchType?: 'JSONPatch';
    patch?: string;
    warnings?: string[];
  };
}

/** kube-apiserver truncates longer warnings; keep ours readable and single-line. */
const MAX_WARNING_LENGTH = 256;

function cleanWarning(text: string): string {
  const oneLine = text.replace(/[\r\n]+/g, ' ');
  return oneLine.length > MAX_WARNING_LENGTH ? `${oneLine.slice(0, MAX_WARNING_LENGTH - 3)}...` : oneLine;
}

/**
 * The AdmissionReview response for `decision`: echoes the request `uid`; a denial carries a v1
 * `Status` with code, reason, message and `details.causes`; mutations are a base64 JSON patch.
 */
export function admissionResponse(
  request: AdmissionRequest,
  decision: AdmissionDecision,
): AdmissionReviewResponse {
  const response: AdmissionReviewResponse['response'] = { uid: request.uid, allowed: decision.allowed };
  if (decision.warnings.length > 0) response.warnings = [...new Set(decision.warnings.map(cleanWarning))];
  if (decision.allowed) {
    if (decision.patches.length > 0) {
      response.patchType = 'JSONPatch';
      response.patch = Buffer.from(JSON.stringify(decision.patches), 'utf8').toString('base64');
    }
  } else {
    const name = request.name ?? request.object?.metadata?.name ?? request.object?.metadata?.generateName;
    response.status = {
      apiVersion: 'v1',
      kind: 'Status',
      metadata: {},
      status: 'Failure',
      code: decision.code ?? 400,
      reason: decision.reason ?? 'BadRequest',
      message: decision.message ?? 'denied',
      details: {
        ...(name ? { name } : {}),
        group: request.kind.group,
        kind: request.kind.kind,
        causes: decision.causes.map((c) => ({ field: c.field, message: c.message, reason: c.reason })),
      },
    };
  }
  return { apiVersion: ADMISSION_REVIEW_API_VERSION, kind: 'AdmissionReview', response };
}
