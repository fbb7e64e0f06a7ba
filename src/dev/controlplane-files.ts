import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import {
  type CertificateAndKey,
  createCertificateAuthority,
  createRsaKeyPair,
  issueCertificate,
} from '../pki/certificates.ts';

/**
 * The files a local control plane (controlplane.ts) keeps under its state directory, each made
 * on the first start and read back on later ones (so `platform dev` restarts with the same CA,
 * keys and tokens): the CA and service-account keys in `pki/`, and per cluster its serving
 * certificate, admin token and admin.kubeconfig.
 */

export const DAY = 24 * 3600;

/** The admin's bearer token, in the apiserver's static token file (created on first start). */
export function loadOrCreateAdminToken(tokenFile: string): string {
  if (!existsSync(tokenFile)) {
    writeFileSync(tokenFile, `${randomBytes(24).toString('hex')},admin,admin,"system:masters"\n`, {
      mode: 0o600,
    });
  }
  return readFileSync(tokenFile, 'utf8').split(',')[0]!;
}

export function adminKubeconfig(name: string, server: string, caPem: string, token: string): string {
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } },
    ],
    users: [{ name: `${name}-admin`, user: { token } }],
    contexts: [{ name, context: { cluster: name, user: `${name}-admin` } }],
    'current-context': name,
  });
}

export async function loadOrCreatePki(dir: string): Promise<{
  ca: CertificateAndKey;
  serviceAccountKeys: { publicPath: string; privatePath: string };
}> {
  const caCert = join(dir, 'ca.crt');
  const caKey = join(dir, 'ca.key');
  let ca: CertificateAndKey;
  if (existsSync(caCert) && existsSync(caKey)) {
    ca = { certPem: readFileSync(caCert, 'utf8'), keyPem: readFileSync(caKey, 'utf8') };
  } else {
    ca = await createCertificateAuthority('platform-dev-ca', 10 * 365 * DAY);
    writeFileSync(caCert, ca.certPem);
    writeFileSync(caKey, ca.keyPem, { mode: 0o600 });
  }
  const publicPath = join(dir, 'sa.pub');
  const privatePath = join(dir, 'sa.key');
  if (!existsSync(publicPath) || !existsSync(privatePath)) {
    const keys = await createRsaKeyPair();
    writeFileSync(publicPath, keys.publicKeyPem);
    writeFileSync(privatePath, keys.privateKeyPem, { mode: 0o600 });
  }
  return { ca, serviceAccountKeys: { publicPath, privatePath } };
}

export async function loadOrIssue(
  dir: string,
  base: string,
  ca: CertificateAndKey,
  request: Parameters<typeof issueCertificate>[1],
): Promise<{ certPath: string; keyPath: string }> {
  const certPath = join(dir, `${base}.crt`);
  const keyPath = join(dir, `${base}.key`);
  if (!existsSync(certPath) || !existsSync(keyPath)) {
    const issued = await issueCertificate(ca, request);
    writeFileSync(certPath, issued.certPem);
    writeFileSync(keyPath, issued.keyPem, { mode: 0o600 });
  }
  return { certPath, keyPath };
}
