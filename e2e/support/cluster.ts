import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, inject } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { type Cluster, type ClusterOptions, ControlPlane } from '../../src/dev/controlplane.ts';

/** Admin kubeconfig path of the test run's host cluster. */
export function hostKubeconfigPath(): string {
  return inject('hostKubeconfig');
}

/** A client-node KubeConfig for the host cluster, as cluster admin. */
export function hostKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(hostKubeconfigPath());
  return kc;
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the control plane's own kubectl (the host cluster's admin kubeconfig by default). */
export function kubectl(
  args: string[],
  opts: { kubeconfig?: string; stdin?: string } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      inject('kubectl'),
      ['--kubeconfig', opts.kubeconfig ?? hostKubeconfigPath(), ...args],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(opts.stdin ?? '');
  });
}

/** A DNS-label name unique to this run, e.g. `uniqueName('ns')` -> `ns-3f9a1c`. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}

/**
 * Gives the calling describe block its own namespace: created before its tests, deleted after
 * (namespace deletion is asynchronous; the controller manager finishes it). Returns a getter.
 */
export function useNamespace(prefix = 'e2e'): () => string {
  const name = uniqueName(prefix);
  const core = () => hostKubeConfig().makeApiClient(CoreV1Api);
  beforeAll(async () => {
    await core().createNamespace({ body: { metadata: { name, labels: { 'e2e.platform/test': 'true' } } } });
  });
  afterAll(async () => {
    await core()
      .deleteNamespace({ name })
      .catch(() => {});
  });
  return () => name;
}

/**
 * Starts extra kube-apiservers on the run's etcd, each under its own prefix (a virtual or
 * connected cluster in later tests), stopped after the calling describe block.
 * Returns a function that starts one.
 */
export function useExtraClusters(): (options: ClusterOptions) => Promise<Cluster> {
  // The start itself is kept, not its result: two first calls at once share one control plane
  // (one CA) instead of making two, the first never stopped.
  let plane: Promise<ControlPlane> | undefined;
  let stateDir: string | undefined;
  afterAll(async () => {
    await (await plane?.catch(() => undefined))?.stop();
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });
  return async (options) => {
    if (!plane) {
      stateDir = mkdtempSync(join(tmpdir(), 'platform-e2e-extra-'));
      plane = ControlPlane.start({
        stateDir,
        binary: inject('controlPlaneBinary'),
        etcdUrl: inject('etcdUrl'),
      });
    }
    return (await plane).startCluster(options);
  };
}

/** A KubeConfig for a cluster started by `useExtraClusters`. */
export function kubeConfigFor(cluster: Cluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  return kc;
}

/**
 * The kubeconfig of a token webhook (`--authentication-token-webhook-config-file`) that sends
 * TokenReviews to `url`, trusting `caPem` when given, authenticating with the reviewer
 * credential `token` (a platform access key with the role `agent` or `vcluster`) when given.
 */
export function tokenWebhookConfig(url: string, caPem?: string, token?: string): string {
  return stringifyYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'platform',
        cluster: {
          server: url,
          ...(caPem ? { 'certificate-authority-data': Buffer.from(caPem).toString('base64') } : {}),
        },
      },
    ],
    users: [{ name: 'apiserver', user: token ? { token } : {} }],
    contexts: [{ name: 'platform', context: { cluster: 'platform', user: 'apiserver' } }],
    'current-context': 'platform',
  });
}

/** Writes a kubeconfig for `cluster` whose only credential is `token`; returns its path. */
export function tokenKubeconfig(cluster: Cluster, token: string): string {
  const path = join(dirname(cluster.kubeconfigPath), `${uniqueName('token')}.kubeconfig`);
  writeFileSync(
    path,
    kubeConfigYaml({
      name: cluster.name,
      server: cluster.server,
      caPem: cluster.caPem,
      credentials: { token },
    }),
    { mode: 0o600 },
  );
  return path;
}

/** Lets `group` get and list namespaces in `cluster` (what `kubectl get ns` needs). */
export async function grantNamespaceRead(cluster: Cluster, group: string): Promise<void> {
  const rbac = kubeConfigFor(cluster).makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: 'namespace-reader' },
      rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list'] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'namespace-readers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'namespace-reader' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
    },
  });
}

/**
 * A structured `AuthenticationConfiguration` with one JWT authenticator: tokens of `issuer` (its
 * TLS trusted through `caPem`) for `audience`, username from `sub`, groups from `groups`.
 */
export function jwtAuthenticationConfig(issuer: string, audience: string, caPem: string): string {
  return stringifyYaml({
    apiVersion: 'apiserver.config.k8s.io/v1',
    kind: 'AuthenticationConfiguration',
    jwt: [
      {
        issuer: { url: issuer, audiences: [audience], certificateAuthority: caPem },
        claimMappings: { username: { claim: 'sub', prefix: '' }, groups: { claim: 'groups', prefix: '' } },
      },
    ],
  });
}
