import { GROUP_VERSION } from '../../api/meta.ts';
import {
  conflict,
  failureStatus,
  forbidden,
  notFound,
  reasonForCode,
  StatusError,
} from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { AccessKeyLifetimeLimits } from '../../identity/expiry.ts';
import type { RandomBytes } from '../../identity/keys.ts';
import { forwardedSearch, type ParsedPatch, patchContentType } from '../body.ts';
import { upstreamPath } from '../paths.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import { callerUserAgent, type ProxyDeps, proxy } from '../proxy/proxy.ts';
import { redactAccessKey, redactAccessKeys } from '../proxy/redact.ts';
import { type HeaderMap, type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import {
  capKeyLifetime,
  checkOwnKeyChange,
  checkOwnKeyCreate,
  isPlatformAdmin,
  ownerFieldSelector,
  ownsKey,
  prepareKeyCreate,
} from './access-key-rules.ts';
import type { GatewayAnswer, GatewayEndpoint, GatewayRequest } from './endpoint.ts';

/**
 * `ownedaccesskeys`: create returns the key once (minted here, hashed by admission); platform
 * admins manage every key through the impersonating proxy (RBAC decides); everybody else sees and
 * manages only their own keys, as the gateway, within the rules of `access-key-rules.ts`.
 *
 * A non-admin's update or patch is made safe against concurrent writes: the change is previewed
 * (`dryRun=All`), the preview checked against the stored object it was made from, and exactly
 * the previewed object written with that object's resourceVersion as a precondition. A write that
 * lands is exactly the one that was checked; when the key changed in between, it is previewed
 * and checked again (up to {@link CHECKED_WRITE_ATTEMPTS} times, then 409).
 */

export interface AccessKeysDeps {
  readonly upstream: Upstream;
  readonly proxy: ProxyDeps;
  readonly random: RandomBytes;
  readonly now: () => number;
  readonly limits: () => AccessKeyLifetimeLimits;
}

export const CHECKED_WRITE_ATTEMPTS = 5;

const COLLECTION = `/apis/${GROUP_VERSION}/ownedaccesskeys`;

export function accessKeysEndpoints(deps: AccessKeysDeps): GatewayEndpoint[] {
  const verbs = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
  return [
    {
      name: 'access keys',
      route: { kind: 'resource', resource: 'ownedaccesskeys', verbs },
      authentication: 'key',
      handle: (request) => accessKeys(deps, request),
    },
    {
      name: 'access key status',
      route: {
        kind: 'resource',
        resource: 'ownedaccesskeys',
        subresource: 'status',
        verbs: ['get', 'update', 'patch'],
      },
      authentication: 'key',
      handle: (request) => {
        const identity = request.identity as AuthenticatedIdentity;
        if (isPlatformAdmin(identity)) return proxyAs(deps, request, callerHeaders(identity));
        if (request.attributes.verb !== 'get')
          throw forbidden('only platform admins may write the status of access keys');
        return ownKey(deps, request).then((key) => ({ code: 200, object: redactAccessKey(key) }));
      },
    },
  ];
}

async function accessKeys(deps: AccessKeysDeps, request: GatewayRequest): Promise<GatewayAnswer> {
  const identity = request.identity as AuthenticatedIdentity;
  const admin = isPlatformAdmin(identity);
  const { verb } = request.attributes;
  if (verb === 'create') return createKey(deps, request, admin);
  if (admin) return proxyAs(deps, request, callerHeaders(identity));
  switch (verb) {
    case 'list':
    case 'watch': {
      const query = new URLSearchParams(request.query);
      query.set('fieldSelector', ownerFieldSelector(identity, query.get('fieldSelector')));
      return proxyAs(deps, request, {}, `?${query.toString()}`);
    }
    case 'get':
      return { code: 200, object: redactAccessKey(await ownKey(deps, request)) };
    case 'delete':
      return deleteOwnKey(deps, request);
    case 'update':
    case 'patch':
      return checkedWrite(deps, request);
    default:
      throw forbidden('only platform admins may delete access keys in bulk');
  }
}

function callerHeaders(identity: AuthenticatedIdentity): HeaderMap {
  const headers = impersonationHeaders(identity);
  if (headers instanceof StatusError) throw headers;
  return headers;
}

/** The request as the proxy sends it, with `headers` (impersonation, or none: as the gateway). */
function proxyAs(
  deps: AccessKeysDeps,
  request: GatewayRequest,
  headers: HeaderMap,
  search = searchOf(request),
): Promise<GatewayAnswer> {
  if (!request.resource)
    throw new StatusError(500, 'InternalError', 'an access key request without a resource');
  return proxy(
    deps.proxy,
    {
      method: request.method,
      attributes: request.attributes,
      resource: request.resource,
      search,
      body: request.decoded,
      accept: request.upstreamAccept,
      userAgent: request.headers['user-agent'],
      signal: request.signal,
    },
    headers,
    redactAccessKeys,
  );
}

const searchOf = (request: GatewayRequest) => {
  const text = request.query.toString();
  return text === '' ? '' : `?${text}`;
};

/** The caller's key by name (as the gateway), or 404 as if it did not exist when it is someone else's. */
async function ownKey(deps: AccessKeysDeps, request: GatewayRequest): Promise<Record<string, unknown>> {
  const identity = request.identity as AuthenticatedIdentity;
  const { attributes, signal } = request;
  const current = await deps.upstream
    .json<Record<string, unknown>>({
      method: 'GET',
      path: upstreamPath({ ...attributes, subresource: '' }),
      signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, signal);
    });
  if (current.statusCode !== 200 || !ownsKey(identity, current.body as { spec?: Record<string, unknown> })) {
    throw notFound(`ownedaccesskeys.management.platform "${attributes.name}" not found`, {
      name: attributes.name,
      group: 'management.platform',
      kind: 'ownedaccesskeys',
    });
  }
  return current.body;
}

async function createKey(
  deps: AccessKeysDeps,
  request: GatewayRequest,
  admin: boolean,
): Promise<GatewayAnswer> {
  const identity = request.identity as AuthenticatedIdentity;
  const prepared = prepareKeyCreate(request.object(), identity, deps.random);
  if (prepared instanceof StatusError) throw prepared;
  // A key of the caller's own ends no later than the key that mints it; a platform admin creating
  // a key for someone else manages that account and is not bound by its own key's life.
  const own = ownsKey(identity, prepared.object as { spec?: Record<string, unknown> });
  const spec = prepared.object.spec as Record<string, unknown>;
  const capped = own
    ? capKeyLifetime(spec, identity.accessKey.expiresAt, deps.now())
    : { spec, warning: undefined };
  const object = { ...prepared.object, spec: capped.spec };
  if (!admin) {
    const refusal = checkOwnKeyCreate(identity, object);
    if (refusal) throw refusal;
  }
  const answer = await deps.upstream
    .json<Record<string, unknown>>({
      method: 'POST',
      path: COLLECTION,
      search: forwardedSearch(searchOf(request)),
      headers: {
        ...(admin ? callerHeaders(identity) : {}),
        ...callerUserAgent(request.headers['user-agent']),
        'content-type': 'application/json',
      },
      body: JSON.stringify(object),
      signal: request.signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, request.signal);
    });
  if (answer.statusCode !== 201 && answer.statusCode !== 200) {
    return {
      code: answer.statusCode,
      object: answer.body ?? failed(answer.statusCode, 'the access key could not be created'),
    };
  }
  const created = redactAccessKey(answer.body) as { spec?: Record<string, unknown> };
  // Admission's warnings (a scope that can match nothing) reach the caller, with the gateway's own.
  const warnings = [...answer.warnings, ...(capped.warning ? [`299 - "${capped.warning}"`] : [])];
  return {
    code: answer.statusCode,
    // The plaintext, this once.
    object: { ...created, spec: { ...created.spec, key: prepared.plaintext } },
    ...(warnings.length > 0 ? { headers: { warning: warnings } } : {}),
  };
}

const failed = (code: number, message: string) => failureStatus(code, reasonForCode(code), message);

/** Deletes the caller's key (as the gateway), exactly the one checked: its uid is the precondition. */
async function deleteOwnKey(deps: AccessKeysDeps, request: GatewayRequest): Promise<GatewayAnswer> {
  const key = await ownKey(deps, request);
  const uid = (key.metadata as { uid?: string } | undefined)?.uid;
  const options = (request.decoded as Record<string, unknown> | undefined) ?? {};
  const answer = await deps.upstream
    .json<Record<string, unknown>>({
      method: 'DELETE',
      path: upstreamPath(request.attributes),
      search: forwardedSearch(searchOf(request)),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        ...options,
        preconditions: { ...(options.preconditions as object | undefined), uid },
      }),
      signal: request.signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, request.signal);
    });
  return {
    code: answer.statusCode,
    object: redactAccessKeys(answer.body ?? failed(answer.statusCode, 'the access key could not be deleted')),
  };
}

/**
 * A non-admin's update or patch: preview, check the preview against the stored object it came
 * from, write exactly the preview with that object's resourceVersion as the precondition.
 */
async function checkedWrite(deps: AccessKeysDeps, request: GatewayRequest): Promise<GatewayAnswer> {
  const identity = request.identity as AuthenticatedIdentity;
  const { attributes, signal } = request;
  const body = request.decoded;
  if (body === undefined) throw new StatusError(500, 'InternalError', 'an access key write without a body');
  const path = upstreamPath(attributes);
  const clientDryRun = request.query.has('dryRun');
  const call = (input: Parameters<Upstream['json']>[0]) =>
    deps.upstream.json<Record<string, unknown>>(input).catch((error: unknown) => {
      throw upstreamFailure(error, signal);
    });
  for (let attempt = 0; attempt < CHECKED_WRITE_ATTEMPTS; attempt++) {
    const current = await ownKey(deps, request);
    const preview = new URLSearchParams(request.query);
    preview.set('dryRun', 'All');
    const patch = attributes.verb === 'patch' ? (body as ParsedPatch) : undefined;
    const previewed = await call({
      method: patch ? 'PATCH' : 'PUT',
      path,
      search: `?${preview.toString()}`,
      headers: { 'content-type': patch ? patchContentType(patch) : 'application/json' },
      body: JSON.stringify(
        patch ? patch.value : { apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey', ...body },
      ),
      signal,
    });
    if (previewed.statusCode !== 200 && previewed.statusCode !== 201) {
      return {
        code: previewed.statusCode,
        object: redactAccessKeys(previewed.body ?? failed(previewed.statusCode, 'the change was refused')),
      };
    }
    const version = (object: Record<string, unknown>) =>
      (object.metadata as { resourceVersion?: string } | undefined)?.resourceVersion;
    // The preview was made from another version than the one read: read and preview again.
    if (version(previewed.body) !== version(current)) continue;
    const refusal = checkOwnKeyChange(identity, current, previewed.body, deps.limits());
    if (refusal) throw refusal;
    if (clientDryRun) return { code: previewed.statusCode, object: redactAccessKey(previewed.body) };
    const write = new URLSearchParams();
    for (const name of ['fieldManager', 'fieldValidation']) {
      const value = request.query.get(name);
      if (value !== null) write.set(name, value);
    }
    const written = await call({
      method: 'PUT',
      path,
      search: write.size > 0 ? `?${write.toString()}` : '',
      headers: { ...callerUserAgent(request.headers['user-agent']), 'content-type': 'application/json' },
      body: JSON.stringify(previewed.body),
      signal,
    });
    if (written.statusCode === 409) continue;
    return {
      code: written.statusCode,
      object: redactAccessKeys(written.body ?? failed(written.statusCode, 'the change could not be stored')),
    };
  }
  throw conflict(
    `ownedaccesskeys.management.platform "${attributes.name}" kept changing while it was being written; try again`,
    { name: attributes.name, group: 'management.platform', kind: 'ownedaccesskeys' },
  );
}

/**
 * A key the platform issues to the caller for one of its own endpoints (a kubeconfig), created
 * as the gateway (the endpoint's own authorization decided), ending no later than the caller's
 * key. Throws a `StatusError` when it cannot be created.
 */
export async function issueKey(
  deps: Pick<AccessKeysDeps, 'upstream' | 'random' | 'now'>,
  identity: AuthenticatedIdentity,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<{ plaintext: string }> {
  const prepared = prepareKeyCreate(body, identity, deps.random);
  if (prepared instanceof StatusError) throw prepared;
  const capped = capKeyLifetime(
    prepared.object.spec as Record<string, unknown>,
    identity.accessKey.expiresAt,
    deps.now(),
  );
  const answer = await deps.upstream
    .json<{ message?: string }>({
      method: 'POST',
      path: COLLECTION,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...prepared.object, spec: capped.spec }),
      signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, signal);
    });
  if (answer.statusCode !== 201 && answer.statusCode !== 200) {
    const code = answer.statusCode >= 500 ? 503 : answer.statusCode;
    throw new StatusError(
      code,
      reasonForCode(code),
      `the access key could not be created: ${answer.body?.message ?? 'unknown error'}`,
    );
  }
  return { plaintext: prepared.plaintext };
}
