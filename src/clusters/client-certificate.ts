import { createCertificateSigningRequest } from '../pki/certificates.ts';
import { type Clock, sleep } from '../runtime/clock.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';

/**
 * A client certificate from a cluster's own signer: a CertificateSigningRequest with signer
 * `kubernetes.io/kube-apiserver-client`, approved by us (the credentials used must be allowed to
 * approve for that signer), waited for within a bound, and deleted afterwards whatever happened.
 */

const CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client';
const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
/** The default lifetime of an issued certificate when none is asked for (one day). */
export const DEFAULT_CERTIFICATE_TTL_SECONDS = 86_400;

/** The signer did not issue the certificate in time (the gateway answers 504). */
export class CertificateSigningTimeout extends Error {
  override readonly name = 'CertificateSigningTimeout';
}

/** The signer refused or failed the request. */
export class CertificateSigningFailed extends Error {
  override readonly name = 'CertificateSigningFailed';
}

interface ClientCertificateRequest {
  readonly username: string;
  readonly groups: readonly string[];
  /**
   * `expirationSeconds` of the request; `undefined` leaves the field out, so the cluster's own
   * signing duration applies. Kubernetes refuses values under 600.
   */
  readonly expirationSeconds: number | undefined;
  /** How long to wait for the signer. */
  readonly timeoutMs: number;
  /** A name prefix for the CSR object (a random suffix is added by the apiserver). */
  readonly namePrefix?: string;
}

interface CsrStatus {
  certificate?: string;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}
interface Csr {
  metadata: { name: string; resourceVersion?: string };
  status?: CsrStatus;
}

export async function requestClientCertificate(
  api: KubeApi,
  clock: Clock,
  request: ClientCertificateRequest,
): Promise<{ certPem: string; keyPem: string }> {
  const { csrPem, keyPem } = await createCertificateSigningRequest({
    commonName: request.username,
    organizations: [...request.groups],
  });
  const created = await api.request<Csr>({
    method: 'POST',
    path: CSR_PATH,
    body: {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { generateName: `${request.namePrefix ?? 'platform-kubeconfig'}-` },
      spec: {
        request: Buffer.from(csrPem).toString('base64'),
        signerName: CLIENT_SIGNER,
        usages: ['client auth', 'digital signature', 'key encipherment'],
        ...(request.expirationSeconds !== undefined ? { expirationSeconds: request.expirationSeconds } : {}),
      },
    },
  });
  const name = created.metadata.name;
  const path = `${CSR_PATH}/${encodeURIComponent(name)}`;
  try {
    await api.request({
      method: 'PUT',
      path: `${path}/approval`,
      body: {
        ...created,
        status: {
          conditions: [
            {
              type: 'Approved',
              status: 'True',
              reason: 'PlatformKubeConfig',
              message: 'approved by the platform for a kubeconfig it issues',
            },
          ],
        },
      },
    });
    const deadline = clock.now() + request.timeoutMs;
    for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
      const current = await api.request<Csr>({ method: 'GET', path });
      const failed = current.status?.conditions?.find(
        (condition) =>
          (condition.type === 'Failed' || condition.type === 'Denied') && condition.status === 'True',
      );
      if (failed)
        throw new CertificateSigningFailed(
          `the signer did not issue the certificate: ${failed.reason ?? failed.type}`,
        );
      if (current.status?.certificate) {
        return { certPem: Buffer.from(current.status.certificate, 'base64').toString('utf8'), keyPem };
      }
      if (clock.now() >= deadline) {
        throw new CertificateSigningTimeout(
          `the signer did not answer within ${Math.round(request.timeoutMs / 1000)} s`,
        );
      }
      await sleep(clock, delay);
    }
  } finally {
    await api.request({ method: 'DELETE', path }).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
  }
}
