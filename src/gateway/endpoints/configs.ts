import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET, safeParseConfig } from '../../api/config.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import { badRequest, forbidden, invalid, StatusError, serviceUnavailable } from '../../api/status.ts';
import type { PlatformConfigSource } from '../../config/platform-config.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import { type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import type { GatewayEndpoint } from './endpoint.ts';
import { rbacForbidden } from './rbac.ts';

/**
 * `configs/<name>` (also spelled `config`): the platform configuration, read (`get`) and set
 * (`create`) by those RBAC allows (`configs` in `management.platform`: platform admins). The
 * text lives in the Secret `platform-config`; an answer carries the text and, when it is valid,
 * the parsed configuration as `status`. Never audited beyond `Metadata` (client secrets).
 */

export interface ConfigsDeps {
  readonly upstream: Upstream;
  readonly config: PlatformConfigSource;
  readonly platformNamespace: string;
}

export function configsEndpoint(deps: ConfigsDeps): GatewayEndpoint {
  return {
    name: 'configs',
    route: { kind: 'resource', resource: 'configs', verbs: ['get', 'create'] },
    authentication: 'key',
    sensitive: true,
    handle: async (request) => {
      const identity = request.identity as AuthenticatedIdentity;
      const { attributes, signal } = request;
      if (!(await subjectAccessAllowed(deps.upstream, identity, attributes, signal))) {
        throw rbacForbidden(identity.username, attributes);
      }
      if (attributes.verb === 'get') {
        const stored = deps.config.stored();
        const parsed = safeParseConfig(stored.raw ?? '');
        return {
          code: 200,
          object: {
            apiVersion: GROUP_VERSION,
            kind: 'Config',
            metadata: { name: attributes.name },
            spec: { raw: stored.raw ?? '' },
            ...(parsed.ok ? { status: parsed.config } : {}),
          },
        };
      }
      if (deps.config.current().disableConfigEndpoint === true) {
        throw forbidden('setting the platform config through the API is disabled (disableConfigEndpoint)');
      }
      const object = request.object();
      const metadata = (object.metadata ?? {}) as { name?: unknown };
      const name = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : 'config';
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
      if (!request.query.has('dryRun')) await writeConfigSecret(deps, identity, spec.raw, signal);
      return {
        code: 201,
        object: {
          apiVersion: GROUP_VERSION,
          kind: 'Config',
          metadata: { name },
          spec: { raw: spec.raw },
          status: parsed.config,
        },
      };
    },
  };
}

/**
 * Stores the text in the Secret `platform-config` (created when missing) as the caller, whom
 * RBAC must allow to write that Secret: the configuration holds client secrets and decides who may
 * sign in, so the gateway's own identity may not write it (docs/security.md).
 */
async function writeConfigSecret(
  deps: ConfigsDeps,
  identity: AuthenticatedIdentity,
  raw: string,
  signal: AbortSignal,
): Promise<void> {
  const collection = `/api/v1/namespaces/${encodeURIComponent(deps.platformNamespace)}/secrets`;
  const data = { [PLATFORM_CONFIG_KEY]: Buffer.from(raw, 'utf8').toString('base64') };
  const asCaller = impersonationHeaders(identity);
  if (asCaller instanceof StatusError) throw asCaller;
  const call = async (request: Parameters<Upstream['json']>[0]) => {
    const answer = await deps.upstream
      .json({ ...request, headers: { ...request.headers, ...asCaller } })
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
  if (patch.statusCode === 200) return;
  if (patch.statusCode === 404) {
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
    if (created.statusCode === 201) return;
  }
  throw serviceUnavailable('the platform config could not be stored');
}
