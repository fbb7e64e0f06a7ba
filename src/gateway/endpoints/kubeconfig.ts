import { ApiException } from '@kubernetes/client-node';
import { HTTP_URL_PATTERN } from '../../api/common.ts';
import { GROUP_VERSION } from '../../api/meta.ts';
import {
  badRequest,
  forbidden,
  gatewayTimeout,
  invalid,
  invalidFromIssues,
  notFound,
  StatusError,
  sanitize,
  serviceUnavailable,
} from '../../api/status.ts';
import {
  type VirtualClusterInstance,
  VirtualClusterInstanceKubeConfigSchema,
} from '../../api/virtualclusterinstance.ts';
import { clientForConnection, readCredentialsSecret } from '../../clusters/access.ts';
import {
  CertificateSigningFailed,
  CertificateSigningTimeout,
  DEFAULT_CERTIFICATE_TTL_SECONDS,
  requestClientCertificate,
} from '../../clusters/client-certificate.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { type KubeConfigCredentials, kubeConfigYaml } from '../../clusters/kubeconfig.ts';
import { directTokenScope, ScopeWidens } from '../../identity/direct-token.ts';
import { type Clock, formatTime } from '../../runtime/clock.ts';
import type { KubeApi } from '../../runtime/kube-client.ts';
import { type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import type { VirtualHandler, VirtualRequest } from '../virtual/extension.ts';

/**
 * `POST namespaces/<ns>/virtualclusterinstances/<name>/kubeconfig`: a kubeconfig for a virtual
 * cluster's ingress endpoint, with either a new access key of the caller scoped to that virtual
 * cluster alone (the virtual cluster trusts it through the gateway's TokenReview endpoint) or a
 * client certificate its own signer issued. The answer is the only copy: nothing of it is
 * stored, and the gateway never audits these requests beyond `Metadata`.
 */

export interface KubeConfigDeps {
  /** The host apiserver as the operator (reads the instance's credentials Secret). */
  readonly api: KubeApi;
  readonly clock: Clock;
  /** How long to wait for the virtual cluster's signer. Default 30 s. */
  readonly signingTimeoutMs?: number;
}

export const DEFAULT_SIGNING_TIMEOUT_MS = 30_000;

export function kubeConfigHandler(deps: KubeConfigDeps): VirtualHandler {
  return async (request) => {
    const { namespace, name } = request.attributes;
    const reviewed = {
      verb: 'create',
      resource: 'virtualclusterinstances',
      subresource: 'kubeconfig',
      name,
      namespace,
    } as const;
    if (!(await request.authorize(reviewed))) {
      throw forbidden(
        `virtualclusterinstances.management.platform "${name}" is forbidden: User "${sanitize(request.identity.username)}" cannot create resource "virtualclusterinstances/kubeconfig" in API group "management.platform" in the namespace "${namespace}"`,
        { name, group: 'management.platform', kind: 'virtualclusterinstances' },
      );
    }
    const parsed = VirtualClusterInstanceKubeConfigSchema.safeParse({
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterInstanceKubeConfig',
      ...request.body,
    });
    if (!parsed.success)
      throw invalidFromIssues('VirtualClusterInstanceKubeConfig', name, parsed.error.issues);
    const spec = parsed.data.spec ?? {};
    if (spec.server && !HTTP_URL_PATTERN.test(spec.server)) {
      throw invalid('VirtualClusterInstanceKubeConfig', name, [
        { field: 'spec.server', reason: 'FieldValueInvalid', message: 'must be an http(s) URL' },
      ]);
    }

    const instance = await readInstance(request.upstream, namespace, name, request.signal);
    const endpoint = ingressEndpoint(instance);
    if (typeof endpoint !== 'string') throw badRequest(endpoint.problem);
    const caPem = instance.spec.caData
      ? Buffer.from(instance.spec.caData, 'base64').toString('utf8')
      : undefined;

    const credentials: KubeConfigCredentials = spec.clientCert
      ? await clientCertificate(request, instance, spec.certificateTTL, deps)
      : await scopedKey(request, spec.certificateTTL);
    const kubeConfig = kubeConfigYaml({
      name: `${namespace}-${name}`,
      server: spec.server || endpoint,
      ...(caPem ? { caPem } : {}),
      credentials,
    });
    return {
      code: 201,
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterInstanceKubeConfig',
        metadata: { name, namespace, creationTimestamp: formatTime(deps.clock.now()) },
        spec,
        status: { kubeConfig },
      },
    };
  };
}

/** The endpoint clients reach the virtual cluster at, or why there is none. */
export function ingressEndpoint(instance: VirtualClusterInstance): string | { problem: string } {
  const name = `${instance.metadata.namespace}/${instance.metadata.name}`;
  if (instance.spec.accessPoint?.ingress?.enabled !== true)
    return {
      problem: `virtual cluster ${name} has no ingress endpoint: spec.accessPoint.ingress.enabled is not true`,
    };
  if (!instance.spec.endpoint)
    return { problem: `virtual cluster ${name} has no ingress endpoint: spec.endpoint is not known yet` };
  return instance.spec.endpoint;
}

async function readInstance(
  upstream: Upstream,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<VirtualClusterInstance> {
  const answer = await upstream
    .json<VirtualClusterInstance>({
      method: 'GET',
      path: `/apis/${GROUP_VERSION}/namespaces/${encodeURIComponent(namespace)}/virtualclusterinstances/${encodeURIComponent(name)}`,
      signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, signal);
    });
  if (answer.statusCode === 404) {
    throw notFound(`virtualclusterinstances.management.platform "${name}" not found`, {
      name,
      group: 'management.platform',
      kind: 'virtualclusterinstances',
    });
  }
  if (answer.statusCode !== 200) throw serviceUnavailable('the virtual cluster could not be read');
  return answer.body;
}

/** Token mode: a new key of the caller's, of type `Other`, scoped to this virtual cluster alone. */
async function scopedKey(
  request: VirtualRequest,
  ttlSeconds: number | undefined,
): Promise<KubeConfigCredentials> {
  const { namespace, name } = request.attributes;
  const project = request.projectOfNamespace(namespace);
  if (project === undefined) {
    throw badRequest(
      `namespace ${namespace} belongs to no project, so no key can be scoped to virtual cluster ${name}`,
    );
  }
  let scope: ReturnType<typeof directTokenScope>;
  try {
    // A key issued for a kubeconfig may only narrow the caller's own key.
    scope = directTokenScope(request.identity.accessKey.scope, {
      virtualClusters: [{ project, virtualCluster: name }],
    });
  } catch (err) {
    if (err instanceof ScopeWidens) throw forbidden(err.message);
    throw err;
  }
  const issued = await request.issueKey({
    metadata: { generateName: 'kubeconfig-' },
    spec: {
      type: 'Other',
      displayName: `kubeconfig for virtual cluster ${name} in project ${project}`,
      scope,
      ...(ttlSeconds ? { ttl: ttlSeconds } : {}),
    },
  });
  return { token: issued.plaintext };
}

/**
 * Certificate mode: a CertificateSigningRequest in the virtual cluster, approved by the platform
 * with the credentials it reaches the virtual cluster with, and deleted afterwards.
 */
async function clientCertificate(
  request: VirtualRequest,
  instance: VirtualClusterInstance,
  ttlSeconds: number | undefined,
  deps: KubeConfigDeps,
): Promise<KubeConfigCredentials> {
  const { namespace, name } = request.attributes;
  const secretName = instance.spec.credentialsSecretRef?.name;
  if (!secretName) {
    throw badRequest(
      `virtual cluster ${namespace}/${name} has no spec.credentialsSecretRef, so the platform cannot have a client certificate signed there`,
    );
  }
  let secretData: Record<string, string> | null;
  try {
    secretData = await readCredentialsSecret(deps.api, namespace, secretName);
  } catch {
    throw serviceUnavailable(`the credentials of virtual cluster ${namespace}/${name} could not be read`);
  }
  let connection: Connection;
  try {
    connection = connectionFor(instance.spec, secretName, secretData);
  } catch (err) {
    if (err instanceof CredentialsMissing || err instanceof InvalidCredentials)
      throw badRequest(
        `the credentials of virtual cluster ${namespace}/${name} cannot be used: ${err.message}`,
      );
    throw err;
  }
  const client = clientForConnection(connection);
  try {
    const issued = await requestClientCertificate(client, deps.clock, {
      username: request.identity.username,
      groups: request.identity.groups,
      // 0: no duration asked for, so the virtual cluster's own signing duration applies.
      expirationSeconds: ttlSeconds === 0 ? undefined : (ttlSeconds ?? DEFAULT_CERTIFICATE_TTL_SECONDS),
      timeoutMs: deps.signingTimeoutMs ?? DEFAULT_SIGNING_TIMEOUT_MS,
    });
    return { clientCertificatePem: issued.certPem, clientKeyPem: issued.keyPem };
  } catch (err) {
    if (err instanceof CertificateSigningTimeout)
      throw gatewayTimeout(`virtual cluster ${namespace}/${name}: ${err.message}`);
    if (err instanceof CertificateSigningFailed)
      throw new StatusError(502, 'BadGateway', `virtual cluster ${namespace}/${name}: ${err.message}`);
    if (err instanceof ApiException) {
      // Only the code: the virtual cluster's answer is not ours to relay.
      throw new StatusError(
        502,
        'BadGateway',
        `virtual cluster ${namespace}/${name} refused the certificate signing request (HTTP ${err.code})`,
      );
    }
    throw serviceUnavailable(`virtual cluster ${namespace}/${name} could not be reached`);
  } finally {
    client.close();
  }
}
