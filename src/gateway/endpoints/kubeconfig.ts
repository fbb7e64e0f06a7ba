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
  refusePrototypeKeys,
  StatusError,
  sanitize,
  serviceUnavailable,
} from '../../api/status.ts';
import {
  type VirtualClusterInstance,
  VirtualClusterInstanceKubeConfigSchema,
} from '../../api/virtualclusterinstance.ts';
import { clientForConnection } from '../../clusters/access.ts';
import {
  CertificateSigningFailed,
  CertificateSigningTimeout,
  DEFAULT_CERTIFICATE_TTL_SECONDS,
  requestClientCertificate,
} from '../../clusters/client-certificate.ts';
import type { Connection } from '../../clusters/connection.ts';
import { accessProxyServer, type KubeConfigCredentials, kubeConfigYaml } from '../../clusters/kubeconfig.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { directTokenScope, ScopeWidens } from '../../identity/direct-token.ts';
import { type Clock, formatTime } from '../../runtime/clock.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { isProvisioned } from '../access-proxy/managed-targets.ts';
import { subjectAccessAllowed } from '../proxy/sar.ts';
import { type Upstream, upstreamFailure } from '../proxy/upstream.ts';
import { secondsLeft } from './direct-tokens.ts';
import type { GatewayEndpoint } from './endpoint.ts';
import { provisionedInstanceConnection, registeredInstanceConnection } from './kubeconfig-connection.ts';

/**
 * `POST namespaces/<ns>/virtualclusterinstances/<name>/kubeconfig`: a kubeconfig for a virtual
 * cluster, in one of two modes.
 *
 * - Token mode (the default): the server is the virtual cluster's access-proxy path on the
 *   gateway, `<gateway external URL>/kubernetes/project/<project>/virtualcluster/<name>`, trusting
 *   the CA of the gateway's serving certificate (`ca.crt` beside it, when it serves TLS), with a
 *   new access key of the caller scoped to that virtual cluster alone. This holds whether or not
 *   the instance has an ingress endpoint, as the established product's default server is the
 *   proxy path: only there are the key's scope rules enforced and the caller impersonated with
 *   the credentials the platform holds, so the virtual cluster needs no TokenReview webhook.
 *   Someone who wants the ingress endpoint with a token names it in `spec.server`.
 * - Certificate mode (`clientCert`): the virtual cluster's ingress endpoint (required) with its
 *   CA, and a client certificate its own signer issued; this talks to the virtual cluster
 *   directly, not through the platform. For a virtual cluster the platform provisioned (no
 *   `spec.endpoint`) the server and CA are its apiserver's own, as its admin Secret names them
 *   (`https://127.0.0.1:<port>` under `platform dev`, the instance's Service in a cluster: reached
 *   from where the platform runs), and the certificate is signed by the instance's own CA (its
 *   kube-controller-manager's `--cluster-signing-*`), the CSR made with that admin credential.
 *
 * `spec.server` replaces the server in either mode; the CA stays the mode's. The answer is the
 * only copy: nothing of it is stored, and the gateway never audits these requests beyond `Metadata`.
 */

export interface KubeConfigDeps {
  /** The host apiserver as the gateway (reads the instance's credentials Secret). */
  readonly api: KubeApi;
  /** The host apiserver as the gateway, for the instance and the authorization check. */
  readonly upstream: Upstream;
  readonly clock: Clock;
  /** The Project whose namespace `namespace` is, if any. */
  readonly projectOfNamespace: (namespace: string) => string | undefined;
  /** Creates an access key of the caller's (the key is generated); the plaintext goes to the caller only. */
  readonly issueKey: (
    identity: AuthenticatedIdentity,
    body: Record<string, unknown>,
    signal: AbortSignal,
  ) => Promise<{ plaintext: string }>;
  /** How long to wait for the virtual cluster's signer. Default 30 s. */
  readonly signingTimeoutMs?: number;
  /** The gateway's external URL (`--issuer-url`, else where it listens): its origin serves the access proxy. */
  readonly externalUrl: () => string;
  /** The PEM CA of the gateway's serving certificate, when clients need one to trust it (`ServingCa`). */
  readonly servingCaPem: () => string | undefined;
}

export const DEFAULT_SIGNING_TIMEOUT_MS = 30_000;
/** The lifetime of a token-mode kubeconfig's key when `certificateTTL` is not given (or 0): a day. */
export const DEFAULT_KUBECONFIG_KEY_TTL_SECONDS = 86_400;
/** The shortest certificate a cluster signs (`CertificateSigningRequest.spec.expirationSeconds`). */
export const MIN_CERTIFICATE_SECONDS = 600;

interface KubeConfigRequest {
  readonly identity: AuthenticatedIdentity;
  readonly namespace: string;
  readonly name: string;
  readonly signal: AbortSignal;
}

/**
 * `POST namespaces/<ns>/virtualclusterinstances/<name>/kubeconfig`. Whatever it mints ends no
 * later than the caller's key: the token mode's key (a day by default), the certificate (the
 * requested ttl, a day by default, the cluster's signing duration for 0) alike.
 */
export function kubeConfigEndpoint(deps: KubeConfigDeps): GatewayEndpoint {
  return {
    name: 'virtual cluster kubeconfig',
    route: {
      kind: 'resource',
      resource: 'virtualclusterinstances',
      subresource: 'kubeconfig',
      verbs: ['create'],
    },
    authentication: 'key',
    sensitive: true,
    handle: async (endpointRequest) => {
      const identity = endpointRequest.identity as AuthenticatedIdentity;
      const { namespace, name } = endpointRequest.attributes;
      const request: KubeConfigRequest = { identity, namespace, name, signal: endpointRequest.signal };
      return { code: 201, object: await kubeConfig(deps, request, endpointRequest.object()) };
    },
  };
}

async function kubeConfig(
  deps: KubeConfigDeps,
  request: KubeConfigRequest,
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const { namespace, name } = request;
  const reviewed = {
    verb: 'create',
    resource: 'virtualclusterinstances',
    subresource: 'kubeconfig',
    name,
    namespace,
  } as const;
  if (!(await subjectAccessAllowed(deps.upstream, request.identity, reviewed, request.signal))) {
    throw forbidden(
      `virtualclusterinstances.management.platform "${name}" is forbidden: User "${sanitize(request.identity.username)}" cannot create resource "virtualclusterinstances/kubeconfig" in API group "management.platform" in the namespace "${namespace}"`,
      { name, group: 'management.platform', kind: 'virtualclusterinstances' },
    );
  }
  refusePrototypeKeys('VirtualClusterInstanceKubeConfig', name, body);
  const parsed = VirtualClusterInstanceKubeConfigSchema.safeParse({
    apiVersion: GROUP_VERSION,
    kind: 'VirtualClusterInstanceKubeConfig',
    ...body,
  });
  if (!parsed.success) throw invalidFromIssues('VirtualClusterInstanceKubeConfig', name, parsed.error.issues);
  const spec = parsed.data.spec ?? {};
  if (spec.server && !HTTP_URL_PATTERN.test(spec.server)) {
    throw invalid('VirtualClusterInstanceKubeConfig', name, [
      { field: 'spec.server', reason: 'FieldValueInvalid', message: 'must be an http(s) URL' },
    ]);
  }

  const instance = await readInstance(deps.upstream, namespace, name, request.signal);
  const { server, caPem, credentials } = spec.clientCert
    ? await certificateKubeConfig(deps, request, instance, spec.certificateTTL)
    : await tokenKubeConfig(deps, request, spec.certificateTTL);
  const kubeConfig = kubeConfigYaml({
    name: `${namespace}-${name}`,
    server: spec.server || server,
    ...(caPem ? { caPem } : {}),
    credentials,
  });
  return {
    apiVersion: GROUP_VERSION,
    kind: 'VirtualClusterInstanceKubeConfig',
    metadata: { name, namespace, creationTimestamp: formatTime(deps.clock.now()) },
    spec,
    status: { kubeConfig },
  };
}

/** What a mode puts in the kubeconfig: its default server, the CA to trust there, the credentials. */
interface ModeKubeConfig {
  readonly server: string;
  readonly caPem: string | undefined;
  readonly credentials: KubeConfigCredentials;
}

/** Token mode: the access-proxy path on the gateway, the gateway's CA, a key scoped to this virtual cluster. */
async function tokenKubeConfig(
  deps: KubeConfigDeps,
  request: KubeConfigRequest,
  ttlSeconds: number | undefined,
): Promise<ModeKubeConfig> {
  const project = deps.projectOfNamespace(request.namespace);
  if (project === undefined) {
    throw badRequest(
      `namespace ${request.namespace} belongs to no project, so no key can be scoped to virtual cluster ${request.name}`,
    );
  }
  const target = { kind: 'ProjectVirtualCluster', project, virtualCluster: request.name } as const;
  return {
    server: accessProxyServer(new URL(deps.externalUrl()).origin, target),
    caPem: deps.servingCaPem(),
    credentials: await scopedKey(deps, request, project, ttlSeconds),
  };
}

/**
 * Certificate mode: a certificate of the virtual cluster's signer, for the ingress endpoint and its
 * CA (a registered instance) or the provisioned apiserver's own address and CA.
 */
async function certificateKubeConfig(
  deps: KubeConfigDeps,
  request: KubeConfigRequest,
  instance: VirtualClusterInstance,
  ttlSeconds: number | undefined,
): Promise<ModeKubeConfig> {
  if (isProvisioned(instance)) {
    const connection = await provisionedInstanceConnection(deps, request);
    return {
      server: connection.server,
      caPem: connection.caData ? Buffer.from(connection.caData, 'base64').toString('utf8') : undefined,
      credentials: await clientCertificate(request, connection, ttlSeconds, deps),
    };
  }
  const endpoint = ingressEndpoint(instance);
  if (typeof endpoint !== 'string') throw badRequest(endpoint.problem);
  const connection = await registeredInstanceConnection(deps, request, instance);
  return {
    server: endpoint,
    caPem: instance.spec.caData ? Buffer.from(instance.spec.caData, 'base64').toString('utf8') : undefined,
    credentials: await clientCertificate(request, connection, ttlSeconds, deps),
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

/**
 * Token mode's key: a new key of the caller's, of type `Other`, scoped to this virtual cluster
 * alone, for `ttlSeconds` (a day when 0 or not given), never past the caller's key.
 */
async function scopedKey(
  deps: KubeConfigDeps,
  request: KubeConfigRequest,
  project: string,
  ttlSeconds: number | undefined,
): Promise<KubeConfigCredentials> {
  const { name } = request;
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
  const issued = await deps.issueKey(
    request.identity,
    {
      metadata: { generateName: 'kubeconfig-' },
      spec: {
        type: 'Other',
        displayName: `kubeconfig for virtual cluster ${name} in project ${project}`,
        scope,
        ttl: ttlSeconds && ttlSeconds > 0 ? ttlSeconds : DEFAULT_KUBECONFIG_KEY_TTL_SECONDS,
      },
    },
    request.signal,
  );
  return { token: issued.plaintext };
}

/**
 * Certificate mode: a CertificateSigningRequest in the virtual cluster, approved by the platform
 * with the credentials it reaches the virtual cluster with (`connection`), and deleted afterwards.
 */
async function clientCertificate(
  request: KubeConfigRequest,
  connection: Connection,
  ttlSeconds: number | undefined,
  deps: KubeConfigDeps,
): Promise<KubeConfigCredentials> {
  const { namespace, name } = request;
  // 0: no duration asked for (the cluster's own signing duration), unless the caller's key ends.
  const requested = ttlSeconds === 0 ? undefined : (ttlSeconds ?? DEFAULT_CERTIFICATE_TTL_SECONDS);
  const left = secondsLeft(request.identity.accessKey.expiresAt, deps.clock.now());
  if (left < MIN_CERTIFICATE_SECONDS) {
    throw forbidden(
      `the access key ends in less than ${MIN_CERTIFICATE_SECONDS} seconds, the shortest certificate a cluster signs; use a key that lives longer`,
    );
  }
  const expirationSeconds =
    requested === undefined && left === Number.POSITIVE_INFINITY
      ? undefined
      : Math.min(requested ?? left, left);
  const client = clientForConnection(connection, fieldManagers.gateway);
  try {
    const issued = await requestClientCertificate(client, deps.clock, {
      username: request.identity.username,
      groups: request.identity.groups,
      expirationSeconds,
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
