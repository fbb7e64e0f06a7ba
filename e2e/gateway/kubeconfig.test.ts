import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import {
  grantNamespaceRead,
  kubeConfigFor,
  kubectl,
  tokenWebhookConfig,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * Kubeconfigs for virtual clusters through the gateway, end to end: the virtual cluster is one
 * more real kube-apiserver (with kube-controller-manager, whose signer issues client
 * certificates) that trusts platform keys through the gateway's TokenReview endpoint for
 * `project/web/virtualcluster/dev`. The platform reaches it with the admin kubeconfig in the
 * instance's credentials Secret.
 */
describe('gateway: virtualclusterinstances/<name>/kubeconfig', () => {
  const env = useGatewayEnv({
    https: true,
    controllers: ['sharedsecret', 'project', 'virtualcluster'],
    gateway: { signingTimeoutMs: 3000 },
  });
  const startCluster = useExtraClusters();
  const PROJECT = 'web';
  const NAMESPACE = `p-${PROJECT}`;
  let virtual: Cluster;
  let alice: string;
  let bob: string;
  let dir: string;

  const url = (instance: string) =>
    `${env().api}/namespaces/${NAMESPACE}/virtualclusterinstances/${instance}/kubeconfig`;
  const retrieve = (instance: string, body: string, token = alice, contentType = 'application/yaml') =>
    call(url(instance), {
      method: 'POST',
      token,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': contentType },
      body,
    });
  const instance = (name: string, spec: Record<string, unknown>) =>
    env().custom.createNamespacedCustomObject({
      group: 'management.platform',
      version: 'v1',
      namespace: NAMESPACE,
      plural: 'virtualclusterinstances',
      body: { apiVersion: GROUP_VERSION, kind: 'VirtualClusterInstance', metadata: { name }, spec },
    });
  const readInstance = async (name: string) =>
    (await env().custom.getNamespacedCustomObject({
      group: 'management.platform',
      version: 'v1',
      namespace: NAMESPACE,
      plural: 'virtualclusterinstances',
      name,
    })) as {
      status?: {
        conditions?: { type: string; status: string; reason: string; observedGeneration?: number }[];
      };
    };
  const write = (name: string, kubeConfig: string) => {
    const path = join(dir, `${name}.kubeconfig`);
    writeFileSync(path, kubeConfig, { mode: 0o600 });
    return path;
  };
  const b64 = (text: string) => Buffer.from(text).toString('base64');

  beforeAll(async () => {
    alice = await env().user('alice');
    bob = await env().user('bob');
    // The chart's project roles (installed with the CRDs) let project admins retrieve kubeconfigs,
    // through ClusterRole aggregation; this apiserver runs no kube-controller-manager (the `silent`
    // instance below needs one without a signer), so the aggregated rule is set here.
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles/platform-project-admin',
      contentType: 'application/merge-patch+json',
      body: {
        rules: [
          {
            apiGroups: ['management.platform'],
            resources: ['virtualclusterinstances/kubeconfig'],
            verbs: ['create'],
          },
        ],
      },
    });
    // The project makes p-web; alice owns it (so administers it), bob is nobody there.
    await env().custom.createClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: PROJECT },
        spec: { owner: { user: 'alice' } },
      },
    });
    await eventually(
      async () =>
        (await env()
          .core.readNamespace({ name: NAMESPACE })
          .catch(() => undefined)) !== undefined,
      30_000,
      'the project namespace',
    );
    virtual = await startCluster({
      name: uniqueName('vc'),
      controllerManager: true,
      tokenWebhookConfig: tokenWebhookConfig(
        `${env().server.url}/kubernetes/tokenreview/project/${PROJECT}/virtualcluster/dev`,
        env().caPem,
        await env().reviewer({ project: PROJECT, virtualCluster: 'dev' }),
      ),
    });
    dir = join(virtual.kubeconfigPath, '..');
    // In the virtual cluster, alice's platform group may list namespaces.
    await grantNamespaceRead(virtual, 'platform:user:alice');
    await env().core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'dev-credentials' },
        stringData: { kubeconfig: readFileSync(virtual.kubeconfigPath, 'utf8') },
      },
    });
    const reachable = {
      accessPoint: { ingress: { enabled: true } },
      endpoint: virtual.server,
      caData: b64(virtual.caPem),
      credentialsSecretRef: { name: 'dev-credentials' },
    };
    await instance('dev', reachable);
    await instance('other', reachable);
    await instance('private', { ...reachable, accessPoint: { ingress: { enabled: false } } });
    // Reachable, but it has no signer: certificates are never issued there.
    const silentCredentials = readFileSync(env().cluster!.kubeconfigPath, 'utf8');
    await env().core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name: 'silent-credentials' }, stringData: { kubeconfig: silentCredentials } },
    });
    await instance('silent', {
      accessPoint: { ingress: { enabled: true } },
      endpoint: env().cluster!.server,
      caData: b64(env().cluster!.caPem),
      credentialsSecretRef: { name: 'silent-credentials' },
    });
  });

  /** The same kubeconfig pointed straight at the virtual cluster (which trusts keys through the TokenReview endpoint). */
  const atVirtualCluster = (kubeConfig: string) => {
    const document = parseYaml(kubeConfig);
    document.clusters[0].cluster = {
      server: virtual.server,
      'certificate-authority-data': b64(virtual.caPem),
    };
    return stringifyYaml(document);
  };
  const proxyServer = (instance: string) =>
    `${new URL(env().server.url).origin}/kubernetes/project/${PROJECT}/virtualcluster/${instance}`;

  test('token mode: the access-proxy path on the gateway, trusting its CA, with a key of the caller scoped to this virtual cluster', async () => {
    const answer = await retrieve(
      'dev',
      'apiVersion: management.platform/v1\nkind: VirtualClusterInstanceKubeConfig\nspec:\n  certificateTTL: 3600\n',
    );
    expect(answer.status, answer.text).toBe(201);
    expect(answer.json).toMatchObject({
      kind: 'VirtualClusterInstanceKubeConfig',
      spec: { certificateTTL: 3600 },
    });
    const kubeConfig = parseYaml(answer.json.status.kubeConfig);
    expect(kubeConfig).toMatchObject({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': expect.any(String),
    });
    expect(kubeConfig.clusters).toEqual([
      {
        name: expect.any(String),
        cluster: { server: proxyServer('dev'), 'certificate-authority-data': b64(env().caPem!) },
      },
    ]);
    expect(kubeConfig.users).toHaveLength(1);
    expect(kubeConfig.contexts).toHaveLength(1);
    const token: string = kubeConfig.users[0].user.token;

    // The key: alice's, type Other, scoped to web/dev and nothing else, expiring with certificateTTL.
    const keys = (await env().custom.listClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
    })) as { items: { metadata: { name: string }; spec: Record<string, unknown> }[] };
    const issued = keys.items.filter((key) => key.metadata.name.startsWith('kubeconfig-'));
    expect(issued).toHaveLength(1);
    expect(issued[0]!.spec).toMatchObject({ user: 'alice', type: 'Other', ttl: 3600 });
    expect(issued[0]!.spec.scope).toEqual({ virtualClusters: [{ project: PROJECT, virtualCluster: 'dev' }] });
    expect(JSON.stringify(issued[0])).not.toContain(token);

    // The key is alice's: the virtual cluster, asked directly, knows her by it.
    const path = write('alice-token', atVirtualCluster(answer.json.status.kubeConfig));
    await eventually(
      async () => (await kubectl(['get', 'ns', '-o', 'name'], { kubeconfig: path })).code === 0,
      30_000,
      'kubectl with the issued key',
    );
    const whoami = await kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: path });
    expect(JSON.parse(whoami.stdout).status.userInfo).toMatchObject({ username: 'alice' });
  });

  test('token mode: an instance without an ingress endpoint gets the proxy path too; spec.server replaces it, the CA stays', async () => {
    const privateInstance = await retrieve('private', '{}', alice, 'application/json');
    expect(privateInstance.status, privateInstance.text).toBe(201);
    expect(parseYaml(privateInstance.json.status.kubeConfig).clusters[0].cluster).toEqual({
      server: proxyServer('private'),
      'certificate-authority-data': b64(env().caPem!),
    });
    const named = await retrieve(
      'dev',
      'spec:\n  server: https://platform.example.com/kubernetes/project/web/virtualcluster/dev\n',
    );
    expect(named.status, named.text).toBe(201);
    expect(parseYaml(named.json.status.kubeConfig).clusters[0].cluster).toEqual({
      server: 'https://platform.example.com/kubernetes/project/web/virtualcluster/dev',
      'certificate-authority-data': b64(env().caPem!),
    });
  });

  test('token mode: a key issued for another virtual cluster is refused there', async () => {
    const answer = await retrieve('other', '{}', alice, 'application/json');
    expect(answer.status, answer.text).toBe(201);
    expect(parseYaml(answer.json.status.kubeConfig).clusters[0].cluster.server).toBe(proxyServer('other'));
    // Used at `dev` directly: once the gateway knows the key (its review for `other` says so), `dev` must refuse it.
    const path = write('alice-other', atVirtualCluster(answer.json.status.kubeConfig));
    const token: string = parseYaml(answer.json.status.kubeConfig).users[0].user.token;
    const otherReviewer = await env().reviewer({ project: PROJECT, virtualCluster: 'other' });
    await eventually(
      async () => {
        const review = await call(
          `${env().server.url}/kubernetes/tokenreview/project/${PROJECT}/virtualcluster/other`,
          {
            method: 'POST',
            token: otherReviewer,
            dispatcher: env().dispatcher,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenReview',
              spec: { token },
            }),
          },
        );
        return review.json?.status?.authenticated === true;
      },
      30_000,
      'the gateway to know the key',
    );
    const refused = await kubectl(['get', 'ns'], { kubeconfig: path });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Unauthorized|must be logged in/);
  });

  const endsAfterSeconds = (certPem: string, requestedAt: number) =>
    (Date.parse(new X509Certificate(certPem).validTo) - requestedAt) / 1000;
  const lifetimeSeconds = (certPem: string) => {
    const certificate = new X509Certificate(certPem);
    return (Date.parse(certificate.validTo) - Date.parse(certificate.validFrom)) / 1000;
  };
  const certificateOf = (kubeConfig: string) =>
    Buffer.from(parseYaml(kubeConfig).users[0].user['client-certificate-data'], 'base64').toString('utf8');

  test('certificate mode: a certificate from the virtual cluster signer, certificateTTL long; the CSR is gone', async () => {
    const requestedAt = Date.now();
    const answer = await retrieve('dev', 'spec:\n  clientCert: true\n  certificateTTL: 600\n');
    expect(answer.status, answer.text).toBe(201);
    const certPem = certificateOf(answer.json.status.kubeConfig);
    const certificate = new X509Certificate(certPem);
    expect(certificate.subject).toContain('CN=alice');
    expect(certificate.subject).toContain('O=platform:user:alice');
    // Short-lived: ends ttl after issuance (the signer backdates only notBefore).
    expect(Math.abs(endsAfterSeconds(certPem, requestedAt) - 600)).toBeLessThan(30);
    const csrs = await new KubeClient(kubeConfigFor(virtual)).request<{ items: unknown[] }>({
      method: 'GET',
      path: '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    });
    expect(csrs.items).toEqual([]);

    const path = write('alice-cert', answer.json.status.kubeConfig);
    const namespaces = await kubectl(['get', 'ns', '-o', 'name'], { kubeconfig: path });
    expect(namespaces.code, namespaces.stderr).toBe(0);
    expect(namespaces.stdout).toContain('namespace/default');
  });

  test("certificate mode: a day by default, the signer's own duration for 0", async () => {
    const day = await retrieve('dev', 'spec:\n  clientCert: true\n');
    expect(day.status, day.text).toBe(201);
    expect(lifetimeSeconds(certificateOf(day.json.status.kubeConfig))).toBe(86_400);
    const signerDefault = await retrieve('dev', 'spec:\n  clientCert: true\n  certificateTTL: 0\n');
    expect(signerDefault.status, signerDefault.text).toBe(201);
    // kube-controller-manager's --cluster-signing-duration: one year.
    expect(lifetimeSeconds(certificateOf(signerDefault.json.status.kubeConfig))).toBe(365 * 86_400);
  });

  test("certificate mode: ends no later than the caller's key; a key with less than 600 s left gets none", async () => {
    const hourKey = await env().key({ user: 'alice', displayName: 'for 50 minutes', ttl: 3000 });
    // The key was created before this moment, so it ends before this moment + its ttl.
    const keyEndsBy = Date.now() + 3000_000;
    const week = await retrieve('dev', 'spec:\n  clientCert: true\n  certificateTTL: 604800\n', hourKey);
    expect(week.status, week.text).toBe(201);
    const certificate = new X509Certificate(certificateOf(week.json.status.kubeConfig));
    // The certificate's notAfter is whole seconds: at most one second past the key's end.
    expect(Date.parse(certificate.validTo)).toBeLessThanOrEqual(keyEndsBy + 1000);

    const shortKey = await env().key({ user: 'alice', displayName: 'for 5 minutes', ttl: 300 });
    const none = await retrieve('dev', 'spec:\n  clientCert: true\n', shortKey);
    expect(none.status, none.text).toBe(403);
    expect(none.json.message).toContain('less than 600 seconds');
  });

  test("certificate mode: spec.server overrides the server; the virtual cluster's CA stays", async () => {
    const answer = await retrieve('dev', 'spec:\n  clientCert: true\n  server: https://vc.example.com\n');
    expect(answer.status, answer.text).toBe(201);
    expect(parseYaml(answer.json.status.kubeConfig).clusters[0].cluster).toEqual({
      server: 'https://vc.example.com',
      'certificate-authority-data': b64(virtual.caPem),
    });
  });

  test('errors: unknown instance, a certificate without ingress, no permission, bad bodies, a signer that never answers', async () => {
    const missing = await retrieve('nope', '{}', alice, 'application/json');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ kind: 'Status', reason: 'NotFound' });

    // A certificate is for the ingress endpoint: without one there is nothing to sign it for.
    const privateInstance = await retrieve('private', 'spec:\n  clientCert: true\n');
    expect(privateInstance.status).toBe(400);
    expect(privateInstance.json.message).toMatch(/no ingress endpoint/);

    const forbidden = await retrieve('dev', '{}', bob, 'application/json');
    expect(forbidden.status).toBe(403);
    expect(forbidden.json).toMatchObject({ kind: 'Status', reason: 'Forbidden' });
    expect(forbidden.json.message).toContain('virtualclusterinstances/kubeconfig');

    const negative = await retrieve('dev', 'spec:\n  certificateTTL: -5\n');
    expect(negative.status).toBe(422);
    expect(negative.json.details.causes[0]).toMatchObject({ field: 'spec.certificateTTL' });
    const malformed = await retrieve('dev', 'spec: [unclosed');
    expect(malformed.status).toBe(400);
    const wrongKind = await retrieve('dev', 'kind: Secret\n');
    expect(wrongKind.status).toBe(422);
    const badServer = await retrieve('dev', 'spec:\n  server: not a url\n');
    expect(badServer.status).toBe(422);
    expect(badServer.json.details.causes[0]).toMatchObject({ field: 'spec.server' });

    const timeout = await retrieve('silent', 'spec:\n  clientCert: true\n');
    expect(timeout.status, timeout.text).toBe(504);
    expect(timeout.json).toMatchObject({ kind: 'Status', reason: 'Timeout' });
  });

  test('instances report Ready: reachable with their credentials, or why not', async () => {
    await eventually(
      async () =>
        (await readInstance('dev')).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
      30_000,
      'dev Ready',
    );
    const ready = (await readInstance('dev')).status!.conditions!.find((c) => c.type === 'Ready')!;
    expect(ready).toMatchObject({ reason: 'Reachable', observedGeneration: 1 });
    await instance('no-credentials', { endpoint: virtual.server });
    await instance('gone', {
      endpoint: 'https://127.0.0.1:1',
      credentialsSecretRef: { name: 'wrong-token' },
    });
    await env().core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name: 'wrong-token' }, stringData: { token: 'not-a-token' } },
    });
    await instance('refused', {
      endpoint: virtual.server,
      caData: b64(virtual.caPem),
      credentialsSecretRef: { name: 'wrong-token' },
    });
    for (const [name, reason] of [
      ['no-credentials', 'CredentialsMissing'],
      ['refused', 'Unauthorized'],
      ['gone', 'Unreachable'],
    ] as const) {
      await eventually(
        async () =>
          (await readInstance(name)).status?.conditions?.find((c) => c.type === 'Ready')?.reason === reason,
        30_000,
        `${name} Ready reason ${reason}`,
      );
    }
  });
});
