import { stringify } from 'yaml';

/** How the kubeconfig's user authenticates. */
export type KubeConfigCredentials =
  | { readonly token: string }
  | { readonly clientCertificatePem: string; readonly clientKeyPem: string };

interface KubeConfigInput {
  /** Name of the cluster, user and context. */
  readonly name: string;
  readonly server: string;
  /** PEM CA bundle of the server, if it is not publicly trusted. */
  readonly caPem?: string;
  readonly credentials: KubeConfigCredentials;
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

/**
 * A kubeconfig document (YAML): `apiVersion: v1`, `kind: Config`, one cluster, one user, one
 * context, and that context current. Credentials are inlined (no file references), so the text
 * alone is the whole credential.
 */
export function kubeConfigYaml(input: KubeConfigInput): string {
  const user =
    'token' in input.credentials
      ? { token: input.credentials.token }
      : {
          'client-certificate-data': b64(input.credentials.clientCertificatePem),
          'client-key-data': b64(input.credentials.clientKeyPem),
        };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: input.name,
        cluster: {
          server: input.server,
          ...(input.caPem ? { 'certificate-authority-data': b64(input.caPem) } : {}),
        },
      },
    ],
    users: [{ name: input.name, user }],
    contexts: [{ name: input.name, context: { cluster: input.name, user: input.name } }],
    'current-context': input.name,
    preferences: {},
  });
}

/**
 * The targets a kubeconfig reaches through the access proxy: a connected cluster or a project's
 * virtual cluster (the same shapes as the gateway's `ProxyTarget`, which this layer may not import).
 */
export type KubeConfigProxyTarget =
  | { readonly kind: 'Cluster'; readonly cluster: string }
  | { readonly kind: 'ProjectVirtualCluster'; readonly project: string; readonly virtualCluster: string };

/**
 * A target's path on the gateway's access proxy, the paths the established product uses:
 * `/kubernetes/cluster/<cluster>`, `/kubernetes/project/<project>/virtualcluster/<name>`.
 */
export function accessProxyPath(target: KubeConfigProxyTarget): string {
  const segment = encodeURIComponent;
  return target.kind === 'Cluster'
    ? `/kubernetes/cluster/${segment(target.cluster)}`
    : `/kubernetes/project/${segment(target.project)}/virtualcluster/${segment(target.virtualCluster)}`;
}

/** The kubeconfig server of a target: its access-proxy path under the gateway's base URL (where `/kubernetes/...` is served). */
export function accessProxyServer(gatewayBase: string, target: KubeConfigProxyTarget): string {
  return `${gatewayBase.replace(/\/+$/, '')}${accessProxyPath(target)}`;
}
