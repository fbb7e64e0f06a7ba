import {
  type ConfigStatus,
  PLATFORM_CONFIG_KEY,
  PLATFORM_CONFIG_SECRET,
  safeParseConfig,
} from '../../api/config.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import {
  badRequest,
  forbidden,
  invalid,
  type Status,
  StatusError,
  sanitize,
  serviceUnavailable,
} from '../../api/status.ts';
import type { PlatformConfigSource } from '../../config/platform-config.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import { type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import type { GatewayAnswer, GatewayEndpoint } from './endpoint.ts';
import { rbacForbidden } from './rbac.ts';

/**
 * `configs/<name>` (also spelled `config`): the platform configuration, read (`get`) and set
 * (`create`, or `update` by PUT to a name: the same whole replacement, answered 200; a Config has
 * no resourceVersion to make it conditional) by those RBAC allows (`configs` in
 * `management.platform`: platform admins). The
 * text lives in the Secret `platform-config`; an answer carries the text and, when it is valid,
 * the parsed configuration as `status`. Never audited beyond `Metadata` (client secrets).
 *
 * Setting it is a write of that Secret, and the answer is that write's: the `Warning` headers the
 * apiserver returned (the platform-config admission names every field that has no effect, one
 * source of truth for both ways of setting the config), its refusals as its `Status`, and
 * `?dryRun` passed on to it, so a dry run is admitted exactly like a real write and stores nothing.
 */

export interface ConfigsDeps {
  readonly upstream: Upstream;
  readonly config: PlatformConfigSource;
  readonly platformNamespace: string;
}

export function configsEndpoint(deps: ConfigsDeps): GatewayEndpoint {
  return {
    name: 'configs',
    route: { kind: 'resource', resource: 'configs', verbs: ['get', 'create', 'update'] },
    authentication: 'key',
    sensitive: true,
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      const { attributes, signal } = request;
      if (!(await subjectAccessAllowed(deps.upstream, identity, attributes, signal))) {
        throw rbacForbidden(identity.username, attributes);
      }
      if (attributes.verb === 'get') return storedConfig(deps, attributes.name);
      if (deps.config.current().disableConfigEndpoint === true) {
        throw forbidden('setting the platform config through the API is disabled (disableConfigEndpoint)');
      }
      const isUpdate = attributes.verb === 'update';
      const { name, raw, config } = receivedConfig(request.object(), isUpdate ? attributes.name : undefined);
      const { warnings } = await writeConfigSecret(deps, identity, raw, dryRunSearch(request.query), signal);
      return {
        code: isUpdate ? 200 : 201,
        object: {
          apiVersion: GROUP_VERSION,
          kind: 'Config',
          metadata: { name },
          spec: { raw },
          status: config,
        },
        ...(warnings.length > 0 ? { headers: { warning: warnings } } : {}),
      };
    },
  };
}

/** The answer to a `get`: the stored text, and the parsed configuration when the text is valid. */
function storedConfig(deps: ConfigsDeps, name: string): GatewayAnswer {
  const stored = deps.config.stored();
  const parsed = safeParseConfig(stored.raw ?? '');
  return {
    code: 200,
    object: {
      apiVersion: GROUP_VERSION,
      kind: 'Config',
      metadata: { name },
      spec: { raw: stored.raw ?? '' },
      ...(parsed.ok ? { status: parsed.config } : {}),
    },
  };
}

/**
 * The Config a `create` or `update` sends: its name (the URL's for an update, `urlName`, which
 * the object's own must match; else the object's, or `config`), its text and that text parsed.
 * Throws the apiserver's refusals (400 for a wrong name or kind, 422 for a missing or invalid text).
 */
function receivedConfig(
  object: Record<string, unknown>,
  urlName: string | undefined,
): { name: string; raw: string; config: ConfigStatus } {
  const metadata = (object.metadata ?? {}) as { name?: unknown };
  const given = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : undefined;
  if (urlName !== undefined && given !== undefined && given !== urlName) {
    throw badRequest(
      `the name of the object (${sanitize(given)}) does not match the name on the URL (${sanitize(urlName)})`,
    );
  }
  const name = urlName ?? given ?? 'config';
  const spec = object.spec as { raw?: unknown } | undefined;
  if (object.kind !== undefined && object.kind !== 'Config')
    throw badRequest('the kind in the data does not match the expected kind Config');
  if (typeof spec?.raw !== 'string') {
    throw invalid('Config', name, [
      {
        field: 'spec.raw',
        reason: 'FieldValueRequired',
        message: 'the raw configuration text is required',
      },
    ]);
  }
  const parsed = safeParseConfig(spec.raw);
  if (!parsed.ok) {
    throw invalid(
      'Config',
      name,
      parsed.error.issues.map((issue) => ({
        field: issue.path ? `spec.raw: ${issue.path}` : 'spec.raw',
        reason: 'FieldValueInvalid',
        message: issue.message,
      })),
    );
  }
  return { name, raw: spec.raw, config: parsed.config };
}

/**
 * The caller's `dryRun` values as the query of the Secret write, so that the apiserver decides
 * what they mean (refusing a value it does not know) and runs admission without storing anything.
 */
export function dryRunSearch(query: URLSearchParams): string {
  const values = query.getAll('dryRun');
  if (values.length === 0) return '';
  const search = new URLSearchParams();
  for (const value of values) search.append('dryRun', value);
  return `?${search.toString()}`;
}

/**
 * Stores the text in the Secret `platform-config` (created when missing) as the caller, whom
 * RBAC must allow to write that Secret: the configuration holds client secrets and decides who may
 * sign in, so the gateway's own identity may not write it (docs/security.md). Answers the
 * apiserver's `Warning` header values (`299 - "<text>"`, as kube-apiserver formats them), to be
 * passed on unchanged; a refusal other than RBAC's is thrown as the apiserver's own `Status`.
 */
async function writeConfigSecret(
  deps: ConfigsDeps,
  identity: AuthenticatedIdentity,
  raw: string,
  search: string,
  signal: AbortSignal,
): Promise<{ warnings: string[] }> {
  const collection = `/api/v1/namespaces/${encodeURIComponent(deps.platformNamespace)}/secrets`;
  const data = { [PLATFORM_CONFIG_KEY]: Buffer.from(raw, 'utf8').toString('base64') };
  const asCaller = impersonationHeaders(identity);
  if (asCaller instanceof StatusError) throw asCaller;
  const call = async (request: Parameters<Upstream['json']>[0]) => {
    const answer = await deps.upstream
      .json({ ...request, search, headers: { ...request.headers, ...asCaller } })
      .catch((error: unknown) => {
        throw upstreamFailure(error, signal);
      });
    if (answer.statusCode === 403) {
      throw forbidden(
        `${identity.username} may not write the Secret ${PLATFORM_CONFIG_SECRET} in ${deps.platformNamespace}, where the platform config is stored`,
      );
    }
    return answer;
  };
  const patch = await call({
    method: 'PATCH',
    path: `${collection}/${PLATFORM_CONFIG_SECRET}`,
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ data }),
    signal,
  });
  if (patch.statusCode === 200) return { warnings: patch.warnings };
  if (patch.statusCode !== 404) throw secretWriteRefusal(patch);
  const created = await call({
    method: 'POST',
    path: collection,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: PLATFORM_CONFIG_SECRET, namespace: deps.platformNamespace },
      type: 'Opaque',
      data,
    }),
    signal,
  });
  if (created.statusCode === 201) return { warnings: created.warnings };
  throw secretWriteRefusal(created);
}

/**
 * The apiserver's refusal of the Secret write (admission, a bad `dryRun` value), as its `Status`
 * says it: the caller sees what a write of the Secret itself would have answered. Anything else
 * (no `Status`, a server error) is the gateway's 503. Admission messages never quote the text.
 */
export function secretWriteRefusal(answer: { statusCode: number; body: unknown }): StatusError {
  const status = answer.body as Partial<Status> | undefined;
  if (
    answer.statusCode >= 400 &&
    answer.statusCode < 500 &&
    status?.kind === 'Status' &&
    typeof status.reason === 'string' &&
    typeof status.message === 'string'
  ) {
    return new StatusError(answer.statusCode, status.reason, status.message, status.details);
  }
  return serviceUnavailable('the platform config could not be stored');
}
