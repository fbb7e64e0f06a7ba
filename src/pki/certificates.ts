import { generateKeyPair as generateKeyPairCb, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

const generateKeyPair = promisify(generateKeyPairCb);

/** A certificate and its private key, both PEM. */
export interface CertificateAndKey {
  certPem: string;
  keyPem: string;
}

interface CertificateRequest {
  commonName: string;
  /** Subject O= entries; for client certificates Kubernetes reads them as groups. */
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client' | 'server-and-client';
  /** Validity from `now` (backdated by one minute for clock skew). */
  validForSeconds: number;
}

/**
 * RSA keys come from Node's native generator (fast); node-forge only assembles and signs the
 * X.509 structures, which Node's crypto cannot create.
 */
async function newRsaKey(): Promise<{ privateKeyPem: string; publicKey: forge.pki.PublicKey }> {
  const { privateKey, publicKey } = await generateKeyPair('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKey: forge.pki.publicKeyFromPem(publicKey) };
}

function serialNumber(): string {
  // Positive 128-bit serial: clear the top bit so DER does not read it as negative.
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

function validity(cert: forge.pki.Certificate, now: Date, seconds: number): void {
  cert.validity.notBefore = new Date(now.getTime() - 60_000);
  cert.validity.notAfter = new Date(now.getTime() + seconds * 1000);
}

export async function createCertificateAuthority(
  commonName: string,
  validForSeconds: number,
  now: Date = new Date(),
): Promise<CertificateAndKey> {
  const { privateKeyPem, publicKey } = await newRsaKey();
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = serialNumber();
  validity(cert, now, validForSeconds);
  const subject = [{ name: 'commonName', value: commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(privateKeyPem), forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: privateKeyPem };
}

export async function issueCertificate(
  ca: CertificateAndKey,
  request: CertificateRequest,
  now: Date = new Date(),
): Promise<CertificateAndKey> {
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const { privateKeyPem, publicKey } = await newRsaKey();
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = serialNumber();
  validity(cert, now, request.validForSeconds);
  cert.setSubject([
    { name: 'commonName', value: request.commonName },
    ...(request.organizations ?? []).map((value) => ({ name: 'organizationName', value })),
  ]);
  cert.setIssuer(caCert.subject.attributes);
  const altNames = [
    ...(request.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(request.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
  ];
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    {
      name: 'extKeyUsage',
      serverAuth: request.usage !== 'client',
      clientAuth: request.usage !== 'server',
    },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
    ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
  ]);
  cert.sign(forge.pki.privateKeyFromPem(ca.keyPem), forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: privateKeyPem };
}

/** An RSA key pair as PEM (for example the service-account token signing key). */
export async function createRsaKeyPair(): Promise<{ publicKeyPem: string; privateKeyPem: string }> {
  const { privateKey, publicKey } = await generateKeyPair('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { publicKeyPem: publicKey, privateKeyPem: privateKey };
}

/**
 * A new key pair and a PKCS#10 request for a client certificate: `commonName` is the Kubernetes
 * username and `organizations` its groups.
 */
export async function createCertificateSigningRequest(request: {
  commonName: string;
  organizations?: string[];
}): Promise<{ csrPem: string; keyPem: string }> {
  const { privateKeyPem, publicKey } = await newRsaKey();
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = publicKey;
  csr.setSubject([
    { name: 'commonName', value: request.commonName },
    ...(request.organizations ?? []).map((value) => ({ name: 'organizationName', value })),
  ]);
  csr.sign(forge.pki.privateKeyFromPem(privateKeyPem), forge.md.sha256.create());
  return { csrPem: forge.pki.certificationRequestToPem(csr), keyPem: privateKeyPem };
}
