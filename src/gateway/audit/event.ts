import type { RequestAttributes } from '../../authz/attributes.ts';
import { isJsonObject } from '../../runtime/json.ts';
import { type AuditLevel, type AuditStage, auditRequestTarget } from './policy.ts';

/**
 * `audit.k8s.io/v1` `Event`s, pure: building them, and keeping secrets out of them.
 *
 * Whatever the policy says, these are never written:
 * - an access key's secret (`spec.key`, and any text shaped like a platform access key anywhere
 *   in a line: it is cut to its public id), `spec.identity.connectorData`, the OIDC login tokens;
 * - bodies of access key and shared secret creates, kubeconfig retrievals, direct cluster endpoint
 *   token creations, the platform config and token reviews: these requests are logged at
 *   `Metadata` at most ({@link capLevel});
 * - the values of a shared secret's `spec.data` in any other body;
 * - any body of a request through the access proxy (to a connected cluster, a virtual cluster or
 *   a space), and of a core `secrets` request wherever it goes: these are logged at `Metadata` at
 *   most. The proxy passes bodies through undecoded (JSON, YAML, protobuf, CBOR; streams and
 *   upgraded connections) and never holds them whole, so there is no body to log without decoding
 *   every one on its way, and a target's bodies carry secrets of its own (Secrets, tokens,
 *   kubeconfigs) that no redaction of ours knows in every encoding.
 *
 * An event of a request through the access proxy names where it went in its annotations
 * ({@link targetAnnotations}): the target as audit policies spell it and the cluster, project,
 * space or virtual cluster, the attributes a policy's `requestTargets` and `clusters` match on.
 */

export const AUDIT_API_VERSION = 'audit.k8s.io/v1';

export interface AuditUser {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

export interface AuditObjectRef {
  readonly resource?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly apiGroup?: string;
  readonly apiVersion?: string;
  readonly subresource?: string;
}

export interface AuditResponseStatus {
  readonly metadata: Record<string, never>;
  readonly status?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly code: number;
}

export interface AuditEvent {
  readonly kind: 'Event';
  readonly apiVersion: typeof AUDIT_API_VERSION;
  readonly level: AuditLevel;
  readonly auditID: string;
  readonly stage: AuditStage;
  readonly requestURI: string;
  readonly verb: string;
  readonly user: AuditUser;
  readonly sourceIPs: readonly string[];
  readonly userAgent?: string;
  readonly objectRef?: AuditObjectRef;
  readonly responseStatus?: AuditResponseStatus;
  readonly requestObject?: unknown;
  readonly responseObject?: unknown;
  readonly requestReceivedTimestamp: string;
  readonly stageTimestamp: string;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** The request side of an event, known when the request arrives. */
export interface AuditRequestInfo {
  readonly auditID: string;
  readonly requestURI: string;
  readonly attributes: RequestAttributes;
  readonly user: AuditUser;
  readonly sourceIPs: readonly string[];
  readonly userAgent?: string;
  readonly requestReceivedTimestamp: string;
}

export interface AuditOutcome {
  readonly code: number;
  readonly status?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly requestObject?: unknown;
  readonly responseObject?: unknown;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** Who an unauthenticated request is, as kube-apiserver logs it. */
export const ANONYMOUS_USER: AuditUser = { username: 'system:anonymous', groups: ['system:unauthenticated'] };

const LEVEL_ORDER: readonly AuditLevel[] = ['None', 'Metadata', 'Request', 'RequestResponse'];

export const levelAtLeast = (level: AuditLevel, minimum: AuditLevel) =>
  LEVEL_ORDER.indexOf(level) >= LEVEL_ORDER.indexOf(minimum);

const minLevel = (a: AuditLevel, b: AuditLevel): AuditLevel => (levelAtLeast(a, b) ? b : a);

/** Requests whose bodies are never logged, whatever the policy: `Metadata` at most. */
export function bodiesNeverLogged(attributes: RequestAttributes): boolean {
  const { resource, subresource, verb, apiGroup } = attributes;
  // Through the access proxy: bodies pass undecoded (see the module comment).
  if (attributes.target !== 'Management') return true;
  if (!attributes.resourceRequest) return false;
  if (apiGroup === '' && resource === 'secrets') return true;
  if (apiGroup === 'authentication.k8s.io') return true;
  if (
    verb === 'create' &&
    subresource === '' &&
    (resource === 'ownedaccesskeys' || resource === 'sharedsecrets')
  )
    return true;
  if (resource === 'virtualclusterinstances' && subresource === 'kubeconfig') return true;
  return resource === 'directclusterendpointtokens' || resource === 'configs' || resource === 'tokenreviews';
}

/** The level after the never-logged rules. */
export function capLevel(attributes: RequestAttributes, level: AuditLevel): AuditLevel {
  return bodiesNeverLogged(attributes) ? minLevel(level, 'Metadata') : level;
}

export function objectRefOf(attributes: RequestAttributes): AuditObjectRef | undefined {
  if (!attributes.resourceRequest) return undefined;
  return {
    resource: attributes.resource,
    ...(attributes.namespace ? { namespace: attributes.namespace } : {}),
    ...(attributes.name ? { name: attributes.name } : {}),
    apiGroup: attributes.apiGroup,
    apiVersion: 'v1',
    ...(attributes.subresource ? { subresource: attributes.subresource } : {}),
  };
}

/** The annotation keys of a proxied request's target (`audit.platform/...`). */
export const TARGET_ANNOTATIONS = {
  requestTarget: 'audit.platform/request-target',
  cluster: 'audit.platform/cluster',
  project: 'audit.platform/project',
  space: 'audit.platform/space',
  virtualCluster: 'audit.platform/virtual-cluster',
} as const;

/**
 * Where a request through the access proxy went, as event annotations: the request target as
 * audit policies spell it (`Cluster`, `VCluster`, `ProjectSpace`, `ProjectVCluster`), the
 * connected cluster (the name a policy's `clusters` lists), the project, space or virtual cluster.
 * None for the management API's own requests (target `Management`): their events stay as they were.
 */
export function targetAnnotations(attributes: RequestAttributes): Record<string, string> {
  if (attributes.target === 'Management') return {};
  const { cluster, project, space, virtualCluster } = attributes;
  return {
    [TARGET_ANNOTATIONS.requestTarget]: auditRequestTarget(attributes.target),
    ...(cluster !== undefined && attributes.target === 'Cluster'
      ? { [TARGET_ANNOTATIONS.cluster]: cluster }
      : {}),
    ...(project !== undefined ? { [TARGET_ANNOTATIONS.project]: project } : {}),
    ...(space !== undefined ? { [TARGET_ANNOTATIONS.space]: space } : {}),
    ...(virtualCluster !== undefined ? { [TARGET_ANNOTATIONS.virtualCluster]: virtualCluster.name } : {}),
  };
}

/** One event of a request at a stage. Bodies are included by level and redacted. */
export function buildAuditEvent(
  request: AuditRequestInfo,
  level: AuditLevel,
  stage: AuditStage,
  stageTimestamp: string,
  outcome?: AuditOutcome,
): AuditEvent {
  const objectRef = objectRefOf(request.attributes);
  const withRequest = levelAtLeast(level, 'Request') && outcome?.requestObject !== undefined;
  const withResponse =
    levelAtLeast(level, 'RequestResponse') &&
    outcome?.responseObject !== undefined &&
    stage !== 'RequestReceived';
  return {
    kind: 'Event',
    apiVersion: AUDIT_API_VERSION,
    level,
    auditID: request.auditID,
    stage,
    requestURI: request.requestURI,
    verb: request.attributes.verb,
    user: request.user,
    sourceIPs: request.sourceIPs,
    ...(request.userAgent ? { userAgent: request.userAgent } : {}),
    ...(objectRef ? { objectRef } : {}),
    ...(outcome && stage !== 'RequestReceived'
      ? {
          responseStatus: {
            metadata: {},
            ...(outcome.status ? { status: outcome.status } : {}),
            ...(outcome.message ? { message: outcome.message } : {}),
            ...(outcome.reason ? { reason: outcome.reason } : {}),
            code: outcome.code,
          },
        }
      : {}),
    ...(withRequest ? { requestObject: redactBody(request.attributes, outcome?.requestObject) } : {}),
    ...(withResponse ? { responseObject: redactBody(request.attributes, outcome?.responseObject) } : {}),
    requestReceivedTimestamp: request.requestReceivedTimestamp,
    stageTimestamp,
    ...annotationsOf(request.attributes, outcome),
  };
}

/** The event's annotations: where a proxied request went, then the outcome's; none when empty. */
function annotationsOf(
  attributes: RequestAttributes,
  outcome: AuditOutcome | undefined,
): { annotations?: Readonly<Record<string, string>> } {
  const annotations = { ...targetAnnotations(attributes), ...outcome?.annotations };
  return Object.keys(annotations).length > 0 ? { annotations } : {};
}

const REDACTED = '[redacted]';

/** Matches a platform access key (`pak_<id>_<secret><checksum>`), keeping the public id. */
const ACCESS_KEY_TEXT = /(pak_[a-z2-7]{16}_)[0-9A-Za-z]{49}/g;

/** The JSON line of an event, with anything shaped like an access key cut to its public id. */
export function serializeAuditEvent(event: AuditEvent): string {
  return `${JSON.stringify(event).replace(ACCESS_KEY_TEXT, `$1${REDACTED}`)}\n`;
}

function redactAccessKey(object: Record<string, unknown>): Record<string, unknown> {
  const spec = object.spec;
  if (!isJsonObject(spec)) return object;
  const { key: _key, ...rest } = spec;
  const next: Record<string, unknown> = { ...rest };
  if (isJsonObject(spec.identity)) {
    const { connectorData: _data, ...identity } = spec.identity;
    next.identity = identity;
  }
  if (isJsonObject(spec.oidcLogin)) next.oidcLogin = REDACTED;
  return { ...object, spec: next };
}

function redactSharedSecret(object: Record<string, unknown>): Record<string, unknown> {
  const spec = object.spec;
  if (!isJsonObject(spec) || !isJsonObject(spec.data)) return object;
  const data = Object.fromEntries(Object.keys(spec.data).map((key) => [key, REDACTED]));
  return { ...object, spec: { ...spec, data } };
}

function redactObject(object: unknown, resource: string): unknown {
  if (Array.isArray(object)) return object.map((item) => redactObject(item, resource));
  if (!isJsonObject(object)) return object;
  const kind = object.kind;
  if (Array.isArray(object.items))
    return { ...object, items: object.items.map((item) => redactObject(item, resource)) };
  if (Array.isArray(object.accessKeys)) {
    return { ...object, accessKeys: object.accessKeys.map((item) => redactObject(item, 'ownedaccesskeys')) };
  }
  if (kind === 'Table' && Array.isArray(object.rows)) {
    return {
      ...object,
      rows: object.rows.map((row) =>
        isJsonObject(row) && row.object !== undefined
          ? { ...row, object: redactObject(row.object, resource) }
          : row,
      ),
    };
  }
  if (typeof object.type === 'string' && isJsonObject(object.object)) {
    // A watch event.
    return { ...object, object: redactObject(object.object, resource) };
  }
  if (kind === 'OwnedAccessKey' || (kind === undefined && resource === 'ownedaccesskeys'))
    return redactAccessKey(object);
  if (kind === 'SharedSecret' || (kind === undefined && resource === 'sharedsecrets'))
    return redactSharedSecret(object);
  if (kind === 'TokenReview' && isJsonObject(object.spec))
    return { ...object, spec: { ...object.spec, token: REDACTED } };
  return object;
}

/** A body as it may be logged: secrets of our kinds removed (JSON patch values on them too). */
export function redactBody(attributes: RequestAttributes, body: unknown): unknown {
  const { resource } = attributes;
  if (Array.isArray(body) && (resource === 'sharedsecrets' || resource === 'ownedaccesskeys')) {
    // JSON patch operations: keep what was done where, not the values.
    return body.map((operation) =>
      isJsonObject(operation) && 'value' in operation ? { ...operation, value: REDACTED } : operation,
    );
  }
  return redactObject(body, resource);
}
