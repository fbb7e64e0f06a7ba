import type { CertificateAndKey } from '../../pki/certificates.ts';
import { certificateWithKey } from '../../pki/planning.ts';
import { ownValue } from '../../runtime/json.ts';

/**
 * The Secret of the self-managed webhook certificates: a CA and a serving certificate shared by
 * every replica, the trust bundle, and a CA staged for promotion. Material that does not parse,
 * or whose key does not match, reads as absent.
 */

export const SERVING_SECRET_NAME = 'platform-webhook-serving';

/** The content of the serving Secret (`data` decoded). */
export interface StoredCertificates {
  readonly ca: CertificateAndKey;
  readonly serving: CertificateAndKey;
  /** Every CA the apiserver must trust, PEM concatenated. */
  readonly caBundlePem: string;
  /** A CA staged for promotion, and since when (ms). */
  readonly nextCa?: CertificateAndKey;
  readonly nextCaStagedAt?: number;
}

const KEYS = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  cert: 'tls.crt',
  key: 'tls.key',
  bundle: 'ca-bundle.crt',
  nextCaCert: 'next-ca.crt',
  nextCaKey: 'next-ca.key',
  nextCaStagedAt: 'next-ca-staged-at',
} as const;

export interface SecretObject {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

export function decodeStoredCertificates(secret: SecretObject): StoredCertificates | undefined {
  const data = secret.data ?? {};
  const text = (key: string) => {
    const value = ownValue(data, key);
    return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
  };
  const caCert = text(KEYS.caCert);
  const caKey = text(KEYS.caKey);
  const cert = text(KEYS.cert);
  const key = text(KEYS.key);
  if (!caCert || !caKey || !cert || !key) return undefined;
  // Material that does not parse is as good as none: it is replaced, never served or crashed on.
  if (!usable(caCert, caKey) || !usable(cert, key)) return undefined;
  let nextCert = text(KEYS.nextCaCert);
  let nextKey = text(KEYS.nextCaKey);
  if (nextCert && nextKey && !usable(nextCert, nextKey)) {
    nextCert = undefined;
    nextKey = undefined;
  }
  const stagedAt = Number(text(KEYS.nextCaStagedAt));
  return {
    ca: { certPem: caCert, keyPem: caKey },
    serving: { certPem: cert, keyPem: key },
    caBundlePem: text(KEYS.bundle) ?? caCert,
    ...(nextCert && nextKey
      ? { nextCa: { certPem: nextCert, keyPem: nextKey }, nextCaStagedAt: stagedAt || 0 }
      : {}),
  };
}

export function encodeStoredCertificates(stored: StoredCertificates): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  return {
    [KEYS.caCert]: b64(stored.ca.certPem),
    [KEYS.caKey]: b64(stored.ca.keyPem),
    [KEYS.cert]: b64(stored.serving.certPem),
    [KEYS.key]: b64(stored.serving.keyPem),
    [KEYS.bundle]: b64(stored.caBundlePem),
    ...(stored.nextCa
      ? {
          [KEYS.nextCaCert]: b64(stored.nextCa.certPem),
          [KEYS.nextCaKey]: b64(stored.nextCa.keyPem),
          [KEYS.nextCaStagedAt]: b64(String(stored.nextCaStagedAt ?? 0)),
        }
      : {}),
  };
}

const usable = (certPem: string, keyPem: string) => typeof certificateWithKey(certPem, keyPem) !== 'string';
