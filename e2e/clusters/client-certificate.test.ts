import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  CertificateSigningTimeout,
  DEFAULT_CERTIFICATE_TTL_SECONDS,
  requestClientCertificate,
} from '../../src/clusters/client-certificate.ts';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { systemClock } from '../../src/runtime/clock.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import {
  grantNamespaceRead,
  kubeConfigFor,
  kubectl,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

// Client certificates for kubeconfigs come from the cluster's own signer (kube-controller-manager).
describe('client certificates through a CertificateSigningRequest', () => {
  const startCluster = useExtraClusters();
  let signing: Cluster;
  let api: KubeClient;
  beforeAll(async () => {
    signing = await startCluster({ name: uniqueName('csr'), controllerManager: true });
    const kc = kubeConfigFor(signing);
    api = new KubeClient(kc);
    await grantNamespaceRead(signing, 'platform:user:alice');
  });

  // kube-controller-manager's signer backdates notBefore by 5 minutes. A short-lived certificate
  // (under its `Short` threshold) ends ttl after issuance; a long-lived one has notAfter - notBefore
  // equal to the ttl.
  const endsAfterSeconds = (certPem: string, requestedAt: number) =>
    (Date.parse(new X509Certificate(certPem).validTo) - requestedAt) / 1000;
  const lifetimeSeconds = (certPem: string) => {
    const certificate = new X509Certificate(certPem);
    return (Date.parse(certificate.validTo) - Date.parse(certificate.validFrom)) / 1000;
  };
  const remainingCsrs = async () =>
    (
      await api.request<{ items: { metadata: { name: string } }[] }>({ method: 'GET', path: CSR_PATH })
    ).items.map((csr) => csr.metadata.name);

  test('the issued certificate works in a kubeconfig, carries the groups, lives certificateTTL, and the CSR is gone', async () => {
    const requestedAt = Date.now();
    const { certPem, keyPem } = await requestClientCertificate(api, systemClock, {
      username: 'alice',
      groups: ['platform:authenticated', 'platform:user:alice'],
      expirationSeconds: 600,
      timeoutMs: 60_000,
    });
    const certificate = new X509Certificate(certPem);
    expect(certificate.subject).toContain('CN=alice');
    expect(certificate.subject).toContain('O=platform:user:alice');
    // Issued "now" (the signer backdates notBefore, not notAfter): allow the test's own latency.
    expect(Math.abs(endsAfterSeconds(certPem, requestedAt) - 600)).toBeLessThan(30);
    expect(await remainingCsrs()).toEqual([]);

    const path = join(signing.kubeconfigPath, '..', 'alice-cert.kubeconfig');
    writeFileSync(
      path,
      kubeConfigYaml({
        name: 'virtual',
        server: signing.server,
        caPem: signing.caPem,
        credentials: { clientCertificatePem: certPem, clientKeyPem: keyPem },
      }),
      { mode: 0o600 },
    );
    const whoami = await kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: path });
    expect(JSON.parse(whoami.stdout).status.userInfo).toMatchObject({
      username: 'alice',
      groups: expect.arrayContaining(['platform:user:alice']),
    });
    const namespaces = await kubectl(['get', 'ns', '-o', 'name'], { kubeconfig: path });
    expect(namespaces.code).toBe(0);
    expect(namespaces.stdout).toContain('namespace/default');
  });

  test("a day by default, and the signer's own duration when the field is left out", async () => {
    const day = await requestClientCertificate(api, systemClock, {
      username: 'bob',
      groups: [],
      expirationSeconds: DEFAULT_CERTIFICATE_TTL_SECONDS,
      timeoutMs: 60_000,
    });
    expect(lifetimeSeconds(day.certPem)).toBe(86_400);
    const signerDefault = await requestClientCertificate(api, systemClock, {
      username: 'bob',
      groups: [],
      expirationSeconds: undefined,
      timeoutMs: 60_000,
    });
    // kube-controller-manager's --cluster-signing-duration defaults to one year.
    expect(lifetimeSeconds(signerDefault.certPem)).toBe(365 * 86_400);
  });

  test('a cluster whose signer never answers gives a bounded timeout and leaves no CSR behind', async () => {
    const silent = await startCluster({ name: uniqueName('nosigner') });
    const silentApi = new KubeClient(kubeConfigFor(silent));
    await expect(
      requestClientCertificate(silentApi, systemClock, {
        username: 'alice',
        groups: [],
        expirationSeconds: 600,
        timeoutMs: 1500,
      }),
    ).rejects.toBeInstanceOf(CertificateSigningTimeout);
    const left = await silentApi.request<{ items: unknown[] }>({ method: 'GET', path: CSR_PATH });
    expect(left.items).toHaveLength(0);
  });
});
